"""``kvlab calibrate``'s figures: client timestamps against the server's own send times.

Pure functions of records and the synthetic server's send log; see
:mod:`kvlab.bench.calibrate.check` for what each error means.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from kvlab.rundir import Outcome, Record


@dataclass
class Errors:
    """Client timestamp errors against the server's send times (ms; p50/p99 of |error|)."""

    requests: int = 0
    failed: int = 0
    unmatched: int = 0  # records whose chunks could not be paired with logged sends
    events: int = 0
    tokens: int = 0
    ttft_ms: dict[str, float | None] = field(default_factory=dict)
    latency_ms: dict[str, float | None] = field(default_factory=dict)
    gap_ms: dict[str, float | None] = field(default_factory=dict)


# -- error figures ---------------------------------------------------------------------


def pcts(values: list[float]) -> dict[str, float | None]:
    """p50, p99 and max of |values| (None for none)."""
    if not values:
        return {"p50": None, "p99": None, "max": None}
    a = np.abs(np.asarray(values, dtype=np.float64))
    return {"p50": float(np.percentile(a, 50)), "p99": float(np.percentile(a, 99)),
            "max": float(a.max())}


def timestamp_errors(records: list[Record], log: dict[str, Any], t0_ns: int) -> Errors:
    """Pair each record's chunks with the server's logged sends (by request id) -> Errors.

    ``t0_ns`` is the RunClock origin the records are relative to. The i-th content
    chunk of a record is the server's i-th content event (the harness keeps one entry
    per event, even when several share a network read).
    """
    out = Errors(requests=len(records))
    ttft: list[float] = []
    lat: list[float] = []
    gaps: list[float] = []
    for rec in records:
        if rec.outcome is not Outcome.OK:
            out.failed += 1
            continue
        entry = log.get(str((rec.body.get("synthetic") or {}).get("id")))
        if entry is None or len(entry["send_ns"]) != len(rec.chunk_ns) or not rec.chunk_ns:
            out.unmatched += 1
            continue
        sends = np.asarray(entry["send_ns"], dtype=np.int64)
        arrivals = np.asarray(rec.chunk_ns, dtype=np.int64) + t0_ns
        diff = (arrivals - sends) / 1e6
        ttft.append(float(diff[0]))
        lat.extend(diff.tolist())
        gaps.extend(np.diff(diff).tolist())
        out.events += len(sends)
        out.tokens += int(sum(entry["tokens"]))
    out.ttft_ms, out.latency_ms, out.gap_ms = pcts(ttft), pcts(lat), pcts(gaps)
    return out


def steady_rate(records: list[Record], start_ns: int, end_ns: int) -> tuple[float, float]:
    """(events/s, tokens/s) that arrived in ``[start_ns, end_ns)``, RunClock ns.

    A level's steady part runs from its last stream's start to the time no new request
    starts: every stream is busy throughout, so ragged starts and ends do not count.
    """
    span_s = max((end_ns - start_ns) / 1e9, 1e-9)
    events = tokens = 0
    for rec in records:
        if rec.outcome is not Outcome.OK:
            continue
        counts = rec.chunk_tokens if len(rec.chunk_tokens) == len(rec.chunk_ns) else None
        for k, t in enumerate(rec.chunk_ns):
            if start_ns <= t < end_ns:
                events += 1
                count = None if counts is None else counts[k]
                tokens += 1 if count is None else count
    return events / span_s, tokens / span_s
