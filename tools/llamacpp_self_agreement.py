"""llama-server against itself: the same GGUF and prompt ids at -t 2 and at -t 1.

The noise floor under ``kvlab engine-check``'s teacher-forced top-1. With 2 threads,
llama.cpp's flash attention splits a one-token decode over 512 or more KV cells (the
view is padded to 256) between the threads and merges their F16 partial sums; with 1
thread it does not. Nothing else changes, so the logprobs must be equal while the
decoded position is under 256 and may differ after it. Reports, per query, the first
step where the greedy tokens differ and the largest top-k logprob difference at each
step of the shared history.

    python tools/llamacpp_self_agreement.py --queries 6
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path
from typing import Any

import httpx

from kvlab.bench.plan.workload import builtin_queries
from kvlab.servers.fetch import fetch_bundled
from kvlab.servers.llamacpp import LlamaCppSettings, LlamaServer
from kvlab.studies.agreement import protocol_prompts, server_tokenize


def greedy_with_logprobs(threads: int, queries: int, capacity: int, n_predict: int
                         ) -> list[dict[str, Any]]:
    """Each query's prompt ids, greedy tokens and top-8 logprobs per step."""
    server = LlamaServer(LlamaCppSettings(model=fetch_bundled().path, threads=threads),
                         capacity)
    server.start(Path(tempfile.mkdtemp(prefix="kvlab-self-")) / "llama-server.log")
    runs = []
    try:
        url = server.base_url
        for query_id, text in protocol_prompts(url, builtin_queries(queries), capacity):
            ids = server_tokenize(url, text)
            body = {"prompt": ids, "n_predict": n_predict, "temperature": 0.0,
                    "ignore_eos": True, "cache_prompt": False, "return_tokens": True,
                    "n_probs": 8, "seed": 42}
            reply = httpx.post(f"{url}/completion", json=body, timeout=600.0).json()
            runs.append({"query_id": query_id, "ids": ids, "tokens": reply["tokens"],
                         "top": [{t["id"]: t["logprob"] for t in p["top_logprobs"]}
                                 for p in reply["completion_probabilities"]]})
    finally:
        server.stop()
    return runs


def compare(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """First differing greedy step; per shared step, max |logprob difference| over the
    tokens both list."""
    n = len(a["tokens"])
    first = next((i for i in range(n) if a["tokens"][i] != b["tokens"][i]), n)
    deltas = [max((abs(lp - b["top"][i][t]) for t, lp in a["top"][i].items()
                   if t in b["top"][i]), default=0.0) for i in range(min(first + 1, n))]
    start = len(a["ids"]) - 1  # position whose logits give step 0
    first_moved = next((i for i, d in enumerate(deltas) if d > 0), None)
    return {"query_id": a["query_id"], "prompt_tokens": len(a["ids"]),
            "first_divergence": first, "first_step_moved": first_moved,
            "position_first_moved": None if first_moved is None else start + first_moved,
            "max_logprob_delta": max(deltas), "mean_logprob_delta": sum(deltas) / len(deltas)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=6)
    parser.add_argument("--capacity", type=int, default=512)
    parser.add_argument("--new-tokens", type=int, default=64)
    args = parser.parse_args()
    two = greedy_with_logprobs(2, args.queries, args.capacity, args.new_tokens)
    one = greedy_with_logprobs(1, args.queries, args.capacity, args.new_tokens)
    rows = [compare(a, b) for a, b in zip(two, one, strict=True)]
    for row in rows:
        print(json.dumps(row))
    diverged = sum(r["first_divergence"] < args.new_tokens for r in rows)
    print(f"-t 2 vs -t 1: greedy tokens differ in {diverged} of {len(rows)} queries; "
          f"logprobs first move at positions {[r['position_first_moved'] for r in rows]}")


if __name__ == "__main__":
    main()
