"""Probe a running server's concurrency knee: N closed-loop clients, /metrics sampled.

For each N, N clients each send ``--rounds`` completions one after another (a prompt of
exactly ``--prompt-tokens`` token ids, ``--output-tokens`` forced tokens, no prompt
cache), while /metrics is read every ``--every`` seconds. Prints one JSON line per N:
requests completed, the gauges' maxima (requests running and waiting, llama-server's
processing and deferred, KV usage, kvlab's blocks in use) and the counters' deltas
(preemptions), with the tokens the server says it counted.

    python tools/knee_probe.py --url http://127.0.0.1:8000 --model gemma-3-270m \\
        --prompt-tokens 192 --output-tokens 64 --concurrency 6,7
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import re
import time
from typing import Any

import httpx

_SAMPLE = re.compile(r"^(?P<name>[a-zA-Z_:][\w:]*)(?P<labels>\{[^}]*\})?\s+(?P<value>\S+)",
                     re.MULTILINE)
WATCHED = ("num_requests_running", "num_requests_waiting", "num_preemptions",
           "kv_cache_usage_perc", "kv_blocks_in_use", "requests_processing",
           "requests_deferred", "cache_config_info", "kv_blocks_total")


def scrape(text: str) -> dict[str, float]:
    """The watched series of one /metrics text, keyed ``name{labels}`` (vLLM's
    ``engine``/``model_name`` labels dropped)."""
    out: dict[str, float] = {}
    for m in _SAMPLE.finditer(text):
        name = m["name"]
        if not any(w in name for w in WATCHED) or name.endswith(("_created", "_bucket")):
            continue
        labels = re.sub(r'(engine|model_name)="[^"]*",?', "", m["labels"] or "")
        labels = "" if labels in ("{}", "") else labels
        if "cache_config_info" in name:
            keep = re.findall(r'[{,](num_gpu_blocks|block_size)="([^"]*)"', m["labels"] or "")
            labels = "{" + ",".join(f"{k}={v}" for k, v in keep) + "}"
        try:
            out[name + labels] = float(m["value"])
        except ValueError:
            continue
    return out


async def sample(client: httpx.AsyncClient, url: str, every: float,
                 stop: asyncio.Event, seen: list[dict[str, float]]) -> None:
    while not stop.is_set():
        with contextlib.suppress(httpx.HTTPError):
            seen.append(scrape((await client.get(f"{url}/metrics", timeout=5.0)).text))
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), every)


def prompt_ids(client_index: int, round_index: int, n: int, bos: int) -> list[int]:
    """``n`` token ids, BOS first, different for every request (no shared prefix)."""
    start = 1000 + 97 * (client_index * 31 + round_index)
    return [bos] + [start + (j * 13) % 5000 for j in range(n - 1)]


async def one_client(client: httpx.AsyncClient, args: argparse.Namespace, index: int,
                     results: list[dict[str, Any]]) -> None:
    for r in range(args.rounds):
        body = {"model": args.model, "prompt": prompt_ids(index, r, args.prompt_tokens, args.bos),
                "max_tokens": args.output_tokens, "ignore_eos": True, "temperature": 0.0,
                "cache_prompt": False, "stream": False}
        t0 = time.perf_counter()
        try:
            answer = await client.post(f"{args.url}/v1/completions", json=body, timeout=600.0)
            usage = answer.json().get("usage", {}) if answer.status_code == 200 else {}
            results.append({"status": answer.status_code, "s": time.perf_counter() - t0,
                            "prompt": usage.get("prompt_tokens"),
                            "output": usage.get("completion_tokens"),
                            "error": None if answer.status_code == 200 else answer.text[:200]})
        except httpx.HTTPError as exc:
            results.append({"status": None, "error": str(exc)[:200]})


async def probe(args: argparse.Namespace, n: int) -> dict[str, Any]:
    async with httpx.AsyncClient(limits=httpx.Limits(max_connections=64)) as client:
        stop, seen, results = asyncio.Event(), [], []  # type: ignore[var-annotated]
        sampler = asyncio.create_task(sample(client, args.url, args.every, stop, seen))
        await asyncio.sleep(args.every * 2)
        t0 = time.perf_counter()
        await asyncio.gather(*(one_client(client, args, i, results) for i in range(n)))
        wall = time.perf_counter() - t0
        await asyncio.sleep(args.every * 2)
        stop.set()
        await sampler
    keys = sorted({k for s in seen for k in s})
    series = {k: [s[k] for s in seen if k in s] for k in keys}
    gauges = {k: max(v) for k, v in series.items() if "_total" not in k}
    counters = {k: v[-1] - v[0] for k, v in series.items() if "_total" in k}
    ok = [r for r in results if r["status"] == 200]
    return {"n": n, "rounds": args.rounds, "ok": len(ok), "sent": len(results),
            "wall_s": round(wall, 2), "samples": len(seen),
            "prompt_tokens": sorted({r["prompt"] for r in ok}),
            "output_tokens": sorted({r["output"] for r in ok}),
            "errors": sorted({r["error"] for r in results if r["error"]})[:3],
            "max": gauges, "delta": counters}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", required=True, help="the server's base URL")
    parser.add_argument("--model", default="gemma-3-270m")
    parser.add_argument("--prompt-tokens", type=int, required=True)
    parser.add_argument("--output-tokens", type=int, required=True)
    parser.add_argument("--concurrency", default="1", help="comma list of N")
    parser.add_argument("--rounds", type=int, default=2, help="requests per client")
    parser.add_argument("--every", type=float, default=0.05, help="seconds between scrapes")
    parser.add_argument("--bos", type=int, default=2, help="the first token id (Gemma's BOS)")
    args = parser.parse_args()
    for n in (int(x) for x in args.concurrency.split(",")):
        print(json.dumps(asyncio.run(probe(args, n))), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
