"""AIPerf per-request export (``profile_export.jsonl``, AIPerf 0.13) -> requests.

Follows ``MetricRecordInfo`` (aiperf/common/models/record_models.py, 0.13.0): one JSON
object per line with ``metadata`` (``request_start_ns`` and ``request_end_ns``, wall
clock ns; ``benchmark_phase`` "warmup" or "profiling"; ``session_num``), ``metrics``
(each ``{"value": ..., "unit": ...}`` in display units: ``time_to_first_token``,
``request_latency`` (to the last content response), ``inter_chunk_latency`` (a list),
``output_sequence_length``, ``input_sequence_length``, ``requested_osl``; 0.13 exports
``osl_mismatch_diff_pct`` instead, when the length was asked with ``--osl``) and
``error`` (absent or None when the request succeeded).

AIPerf's OSL is its tokenizer's count unless it ran with --use-server-token-count;
the file does not say which, so give AIPerf that option for counts kvlab can check.
"""

from __future__ import annotations

import json
from typing import Any

from kvlab.peers.common import Request

SHAPE = "AIPerf profile_export.jsonl (one record per line with metadata and metrics)"
VERSION = "0.13.0"  # the version whose files the fields below were read from

# What every line must have for kvlab to read it (common.first_missing's paths).
REQUIRED: tuple[str, ...] = (
    "[].metadata.request_start_ns", "[].metrics.time_to_first_token",
    "[].metrics.request_latency", "[].metrics.output_sequence_length")
# What AIPerf 0.13.0 also writes and kvlab reads where present.
EXPECTED: tuple[str, ...] = (
    *REQUIRED, "[].metadata.request_end_ns", "[].metadata.benchmark_phase",
    "[].metadata.session_num", "[].metrics.inter_chunk_latency",
    # "error" is written only for a failed request
    "[].metrics.input_sequence_length", "[].metrics.osl_mismatch_diff_pct")

_NS_PER_UNIT = {"ns": 1, "us": 1_000, "ms": 1_000_000, "s": 1_000_000_000,
                "sec": 1_000_000_000}


def parse_lines(text: str) -> list[Any] | None:
    """The JSON objects of a JSONL text; None when a line is not JSON."""
    try:
        return [json.loads(line) for line in text.splitlines() if line.strip()]
    except json.JSONDecodeError:
        return None


def matches(data: Any) -> bool:
    """True for a list of AIPerf metric records (lines with metadata and metrics)."""
    return isinstance(data, list) and bool(data) and all(
        isinstance(d, dict) and isinstance(d.get("metadata"), dict)
        and isinstance(d.get("metrics"), dict) for d in data)


def _value(metrics: dict[str, Any], tag: str) -> Any:
    entry = metrics.get(tag)
    return entry.get("value") if isinstance(entry, dict) else None


def _ns(metrics: dict[str, Any], tag: str) -> int | None:
    entry = metrics.get(tag)
    if not isinstance(entry, dict) or not isinstance(entry.get("value"), int | float):
        return None
    return round(entry["value"] * _NS_PER_UNIT.get(str(entry.get("unit", "ms")), 1_000_000))


def _requested_from_mismatch(metrics: dict[str, Any]) -> int | None:
    """The length asked with ``--osl``: AIPerf 0.13 keeps it as an internal metric
    (``requested_osl``, not exported) but exports ``osl_mismatch_diff_pct`` = (OSL −
    requested) / requested × 100, from which it follows; None without one of them."""
    pct = _value(metrics, "osl_mismatch_diff_pct")
    osl = _value(metrics, "output_sequence_length")
    if not isinstance(pct, int | float) or not isinstance(osl, int | float) or pct <= -100:
        return None
    return round(osl / (1 + pct / 100))


def requests(data: list[dict[str, Any]]) -> tuple[list[Request], bool]:
    """Requests of an AIPerf export (chat is not recorded per line: False)."""
    t0 = min(d["metadata"]["request_start_ns"] for d in data)
    out = []
    for i, d in enumerate(data):
        meta, metrics = d["metadata"], d["metrics"]
        sent = meta["request_start_ns"] - t0
        end = (meta.get("request_end_ns") or meta["request_start_ns"]) - t0
        ttft, latency = _ns(metrics, "time_to_first_token"), _ns(metrics, "request_latency")
        first = None if ttft is None else sent + ttft
        answer = _ns(metrics, "time_to_first_output_token")  # its reasoning models' (TTFO)
        chunks: list[int] = []
        gaps = metrics.get("inter_chunk_latency")
        if first is not None and isinstance(gaps, dict) and isinstance(gaps.get("value"), list):
            scale = _NS_PER_UNIT.get(str(gaps.get("unit", "ms")), 1_000_000)
            chunks = [first]
            for gap in gaps["value"]:
                chunks.append(chunks[-1] + round(gap * scale))
        osl = _value(metrics, "output_sequence_length")
        requested = _value(metrics, "requested_osl") or _requested_from_mismatch(metrics)
        error = d.get("error")
        out.append(Request(
            index=int(meta.get("session_num", i)), t_sent=sent, t_end=end,
            requested_tokens=int(requested) if isinstance(requested, int | float) else None,
            output_tokens=int(osl) if isinstance(osl, int | float) else None,
            ok=error is None, t_first_content=first,
            t_first_answer=None if answer is None else sent + answer,
            t_last_content=None if latency is None else sent + latency, chunk_ns=chunks,
            prompt_tokens=_value(metrics, "input_sequence_length"),
            error=None if error is None else json.dumps(error)[:200],
            warmup=meta.get("benchmark_phase") == "warmup",
        ))
    return out, False
