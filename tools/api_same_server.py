"""Responses (and Messages) against chat on one and the same server: what each API
costs, with the load of a shared machine the same for both.

experiments/api-responses.toml launches a server per (mode, API), one after the other;
on a shared machine the load drifts between the two and can dwarf an API's own cost.
This tool starts one server per kind, as kvlab launches them (llama-server, vLLM with
``enforce_eager``, kvlab serve ``--dtype int8``; the bundled Gemma 3 270M, one thread
each), and runs one experiment whose modes are those servers reached through two or
three APIs, every request alternating between the APIs (``order = "interleaved"``),
the same prompts and 16 forced tokens; its comparisons (ratio of means, 95 % bootstrap
interval, as ``kvlab compare`` computes them) are each API's cost on each server.

vLLM's Responses route adds a BOS of its own, so that vLLM is started with the bundled
ChatML without BOS and its chat requests ask ``add_special_tokens: true``: both routes
then send it the same tokens. Its Messages route adds none and takes no such field, so
on that server Messages would hold one token fewer than chat (a comparison refuses it:
measured, 145 vs 146): Messages is left out on vLLM, and on llama-server, whose
conversion drops ``cache_prompt: false`` (every row would be refused as prefix reuse).

Give one kind per run: requests then alternate between the APIs of one server, each
following the other's; with several kinds in one run, each server's first API always
follows another server's request, and that position alone costs it TTFT.

    python tools/api_same_server.py --out runs/apis --servers llamacpp
"""

from __future__ import annotations

import argparse
import contextlib
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx

from kvlab.run.runner import RunOutput, RunRequest, run_experiment
from kvlab.servers.base import Server, ServerSettings
from kvlab.servers.embedded import EmbeddedSettings
from kvlab.servers.llamacpp import LlamaCppSettings
from kvlab.servers.vllm import VllmSettings

CAPACITY = 512
KINDS: dict[str, ServerSettings] = {
    "llamacpp": LlamaCppSettings(threads=1),
    "embedded": EmbeddedSettings(model="gemma-3-270m", dtype="int8", threads=1),
    "vllm": VllmSettings(threads=1, enforce_eager=True, kv_cache_space_gib=1,
                         template_bos=False),
}
# the APIs each server is measured through, chat first (the baseline)
APIS = {"llamacpp": ("openai-chat", "openai-responses"),
        "embedded": ("openai-chat", "openai-responses", "anthropic-messages"),
        "vllm": ("openai-chat", "openai-responses")}
SHORT = {"openai-chat": "chat", "openai-responses": "responses",
         "anthropic-messages": "messages"}


@contextlib.contextmanager
def started(kinds: list[str], logs: Path) -> Iterator[dict[str, Server]]:
    """Each kind's server, up; all stopped on the way out."""
    up: dict[str, Server] = {}
    try:
        for kind in kinds:
            server = KINDS[kind].build(CAPACITY)
            assert server is not None, "a launched kind builds its server"
            server.start(logs / f"{kind}.log", 600)
            up[kind] = server
        yield up
    finally:
        for server in up.values():
            server.stop()


def served_model(server: Server) -> str:
    """The model id the server lists (what its requests must name)."""
    answer = httpx.get(f"{server.base_url}/v1/models", timeout=30).json()
    return str(answer["data"][0]["id"])


def experiment_text(servers: dict[str, Server]) -> str:
    """The experiment: external modes on the running servers, interleaved."""
    lines = ['name = "api-same-server"',
             'description = "Responses and Messages against chat, one server each, '
             'requests interleaved"', 'order = "interleaved"', "compare = ["]
    pairs = [(f"{k}-{SHORT[a]}", f"{k}-chat") for k in servers for a in APIS[k][1:]]
    lines += [f'  ["{a}", "{b}"],' for a, b in pairs] + ["]", ""]
    lines += ["[workload]", "queries = 8", "repetitions = 2", f"capacities = [{CAPACITY}]",
              "prompt_fraction = 0.25", "output_tokens = 16", "warmup = 1", "",
              "[protocol]", "temperature = 0.0", "seed = 42", "ignore_eos = true",
              "cache_prompt = false", "request_timeout_s = 300"]
    for kind, server in servers.items():
        for api in APIS[kind]:
            lines += ["", "[[modes]]", f'name = "{kind}-{SHORT[api]}"',
                      'server = "external"', f'api = "{api}"']
            if kind == "vllm" and api == "openai-chat":  # its template prints no BOS
                lines.append("body = { add_special_tokens = true }")
            lines += ["[modes.external]", f'base_url = "{server.base_url}/v1"',
                      f'model = "{served_model(server)}"']
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("runs"))
    parser.add_argument("--servers", default="llamacpp",
                        help="comma-separated kinds: llamacpp, embedded, vllm (one per "
                             "run: see the module's docstring)")
    args = parser.parse_args()
    kinds = [k for k in args.servers.split(",") if k]
    with tempfile.TemporaryDirectory() as tmp, started(kinds, Path(tmp)) as servers:
        path = Path(tmp) / "api-same-server.toml"
        path.write_text(experiment_text(servers), encoding="utf-8")
        result: Any = run_experiment(RunRequest(path), RunOutput(args.out, html=False))
    print(f"run: {result.run_dir.path}")
    for c in result.evaluation.comparisons:
        for name in ("ttft_ms", "itl_effective_ms"):
            m = c.metrics.get(name) or {}
            low_high = m.get("interval") or {}
            print(f"{c.a} / {c.b} {name}: ratio {m.get('ratio')} "
                  f"[{low_high.get('low')}, {low_high.get('high')}] {c.status}")


if __name__ == "__main__":
    main()
