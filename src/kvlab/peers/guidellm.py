"""GuideLLM benchmark JSON (``benchmarks.json``, GuideLLM 0.4 to 0.8) -> requests.

Follows ``GenerativeBenchmarksReport`` (guidellm/benchmark/schemas/report.py, 0.8.1):
``benchmarks`` is a list, one per strategy (synchronous, concurrent, constant, ...),
each with ``requests.successful`` / ``incomplete`` / ``errored`` lists of
``GenerativeRequestStats`` (guidellm/schemas/base/request_stats.py). Per request:
``info.timings`` (``request_start``, ``first_request_iteration``,
``first_token_iteration``, ``last_token_iteration``, ``request_end``: time.time()
seconds; from 0.7 the first token is of any kind, reasoning included, and
``first_output_token_iteration`` is the first answer token), ``output_tokens`` and
``prompt_tokens`` (serialized computed fields), ``request_args`` (a JSON string with
the request ``body``: ``max_tokens`` or ``max_completion_tokens``, ``prompt`` or
``messages``) and ``output``.

GuideLLM keeps no time per chunk, only the first and last token iterations: imported
rows have no ``chunk_ns``. Incomplete requests are left out (they were cut by the
benchmark's end, not by the server); errored ones are imported as failed.
"""

from __future__ import annotations

import json
from typing import Any

from kvlab.labels import CONCURRENCY, RATE
from kvlab.peers.common import Request, ns

SHAPE = "GuideLLM benchmarks.json (a report with benchmarks[].requests)"
VERSION = "0.8.1"  # the version whose files the fields below were read from

_REQUEST = "benchmarks[].requests.successful[]."
# What every file must have for kvlab to read it (common.first_missing's paths).
REQUIRED: tuple[str, ...] = tuple(_REQUEST + f for f in (
    "info.timings.request_start", "info.timings.first_token_iteration",
    "info.timings.last_token_iteration", "info.timings.request_end", "output_tokens",
    "request_args"))
# What GuideLLM 0.8.1 also writes and kvlab reads where present (older files lack some).
EXPECTED: tuple[str, ...] = (*REQUIRED, "benchmarks[].config.strategy.type_", *(
    _REQUEST + f for f in ("info.timings.first_request_iteration",
                           "info.timings.first_output_token_iteration", "prompt_tokens",
                           "output")))


def matches(data: Any) -> bool:
    """True for a GuideLLM report: benchmarks with per-request stats."""
    if not isinstance(data, dict) or not isinstance(data.get("benchmarks"), list):
        return False
    return all(isinstance(b, dict) and isinstance(b.get("requests"), dict)
               for b in data["benchmarks"]) and bool(data["benchmarks"])


def _load(benchmark: dict[str, Any]) -> str | None:
    strategy = (benchmark.get("config") or {}).get("strategy") or {}
    kind = strategy.get("type_")
    streams = strategy.get("streams")
    if kind == "concurrent" and isinstance(streams, int):
        return CONCURRENCY.label(streams)
    if kind in ("constant", "poisson", "async") and strategy.get("rate") is not None:
        return RATE.label(float(strategy["rate"]))
    return None if kind in (None, "synchronous") else str(kind)


def _body(stats: dict[str, Any]) -> dict[str, Any]:
    args = stats.get("request_args")
    try:
        parsed = json.loads(args) if isinstance(args, str) else args
    except json.JSONDecodeError:
        return {}
    body = (parsed or {}).get("body") if isinstance(parsed, dict) else None
    return body if isinstance(body, dict) else {}


def _prompt(body: dict[str, Any]) -> str | None:
    if isinstance(body.get("prompt"), str):
        return str(body["prompt"])
    messages = body.get("messages")
    if isinstance(messages, list):
        return json.dumps(messages, sort_keys=True)
    return None


def _requested(body: dict[str, Any]) -> int | None:
    for key in ("max_tokens", "max_completion_tokens", "max_output_tokens"):
        if isinstance(body.get(key), int):
            return int(body[key])
    return None


def requests(data: dict[str, Any]) -> tuple[list[Request], bool]:
    """Requests of every benchmark of a GuideLLM report, and whether they used chat."""
    found: list[tuple[str | None, bool, dict[str, Any]]] = []
    for benchmark in data["benchmarks"]:
        load = _load(benchmark)
        groups = benchmark["requests"]
        found += [(load, True, s) for s in groups.get("successful") or []]
        found += [(load, False, s) for s in groups.get("errored") or []]
    starts = [((s.get("info") or {}).get("timings") or {}).get("request_start")
              for _, _, s in found]
    t0 = min((t for t in starts if t is not None), default=0.0)
    out: list[Request] = []
    chat = False

    def at(value: float | None) -> int | None:
        return None if value is None else ns(value - t0)

    for i, (load, ok, stats) in enumerate(found):
        timings = (stats.get("info") or {}).get("timings") or {}
        body = _body(stats)
        chat = chat or "messages" in body
        sent = at(timings.get("request_start")) or 0
        end = at(timings.get("request_end") or timings.get("resolve_end"))
        out.append(Request(
            index=i, t_sent=sent, t_end=end if end is not None else sent,
            requested_tokens=_requested(body), output_tokens=stats.get("output_tokens"),
            ok=ok, t_first_chunk=at(timings.get("first_request_iteration")),
            t_first_content=at(timings.get("first_token_iteration")),
            t_first_answer=at(timings.get("first_output_token_iteration")),
            t_last_content=at(timings.get("last_token_iteration")),
            prompt_tokens=stats.get("prompt_tokens"), prompt=_prompt(body),
            text=stats.get("output") or "", load=load,
            error=None if ok else str(stats.get("error") or "errored in GuideLLM"),
        ))
    return out, chat
