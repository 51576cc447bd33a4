"""What a load point achieved: pure functions over its Records.

Per (mode, capacity, load) group of measured rows (warm-ups left out):

- **target rate**: the rate a ``rate=R`` point aimed at (requests/s); None otherwise.
- **scheduled rate**: (n - 1) / (last t_scheduled - first t_scheduled): the rate the
  drawn arrivals really asked for (Poisson gaps make it differ from the target).
- **achieved rate**: n / span (span as below): the rate the point put requests
  through. Only where a rate exists: a rate load, or a closed loop with more requests
  than users (one whose users all leave at once, c=16 with 16 requests, has none).
- **send lag**: t_sent - t_scheduled per row (ms): how late each request left against
  its schedule. Closed loops schedule "as soon as the user is free", so their lag is
  the client's own overhead.
- **slipped**: the p95 send lag is above ``slip_threshold_ms``: the schedule was not
  kept, so the point measured a lighter load than it claims. Never silently dropped.
- **request throughput**: ok rows / span; **output-token throughput**: Σ output tokens
  of ok rows / span; span = first t_sent to last t_end (seconds).
- **goodput**: ok rows meeting every SLO given (TTFT, effective ITL, e2e) / span, and
  the share of rows that met them.
- **max in flight**: the most rows whose [t_sent, t_end) overlap.

Public API::

    summaries = load_summaries(records, slo=Slo(ttft_ms=500), slip_threshold_ms=50)
    summary = summarize_load(rows, slo=None, slip_threshold_ms=50)   # one group
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from kvlab.bench.analysis import metrics
from kvlab.bench.analysis.stats import describe
from kvlab.bench.records import Outcome, Record

_NS_PER_S = 1e9
_NS_PER_MS = 1e6
DEFAULT_SLIP_THRESHOLD_MS = 50.0


@dataclass(frozen=True)
class Slo:
    """Service-level objectives per request (ms); None: that one is not checked."""

    ttft_ms: float | None = None
    itl_ms: float | None = None  # effective ITL (see metrics.itl_effective_ms)
    e2e_ms: float | None = None

    def met(self, row: Record) -> bool:
        """True when ``row`` is ok and within every objective set (a missing fact fails)."""
        if row.outcome != Outcome.OK:
            return False
        checks = ((self.ttft_ms, metrics.ttft_ms), (self.itl_ms, metrics.itl_effective_ms),
                  (self.e2e_ms, metrics.e2e_ms))
        for limit, metric in checks:
            if limit is None:
                continue
            value = metric(row)
            if value is None or value > limit:
                return False
        return True

    @property
    def empty(self) -> bool:
        return self.ttft_ms is None and self.itl_ms is None and self.e2e_ms is None


_LABEL = re.compile(r"(c|rate|trace)=([0-9.eE+-]+)(?:#([0-9]+))?")
_RANK = {"sequential": 0, "concurrency": 1, "rate": 2, "trace": 3}


def parse_label(load: str | None) -> tuple[str, float | None]:
    """("sequential", None), ("concurrency", 8.0) for "c=8", ("rate", 4.0) for "rate=4.0"
    or "rate=4.0#2" (the second repetition of a capacity search's point), ("trace", 2.0)
    for "trace=2.0" (a trace replayed twice as fast)."""
    if load is None:
        return ("sequential", None)
    match = _LABEL.fullmatch(load)
    if not match:
        return (load, None)
    kind = {"c": "concurrency"}.get(match[1], match[1])
    return (kind, float(match[2]))


def label_repetition(load: str | None) -> int:
    """The repetition of a load point label ("rate=4.0#2" -> 2); 0 without one."""
    match = _LABEL.fullmatch(load or "")
    return int(match[3]) if match and match[3] else 0


def load_order(load: str | None) -> tuple[int, float, int, str]:
    """Sort key of load labels: sequential first, then concurrency, rate and trace
    points, each by value ("c=2" < "c=16") then repetition; unknown labels last."""
    kind, value = parse_label(load)
    return (_RANK.get(kind, len(_RANK)), value or 0.0, label_repetition(load), load or "")


def send_lags_ms(rows: Iterable[Record]) -> list[float]:
    """t_sent - t_scheduled of each row that has a schedule (ms; late is positive)."""
    return [(r.t_sent - r.t_scheduled) / _NS_PER_MS for r in rows if r.t_scheduled is not None]


def rate_of(times_ns: Sequence[int]) -> float | None:
    """(n - 1) / (last - first) in events/s; None below two events or a zero span."""
    if len(times_ns) < 2:
        return None
    span = (max(times_ns) - min(times_ns)) / _NS_PER_S
    return (len(times_ns) - 1) / span if span > 0 else None


def max_in_flight(rows: Iterable[Record]) -> int:
    """The most rows in flight at once ([t_sent, t_end), an end before a start)."""
    events = sorted([(r.t_sent, 1) for r in rows] + [(r.t_end, -1) for r in rows],
                    key=lambda e: (e[0], e[1]))
    current = peak = 0
    for _, step in events:
        current += step
        peak = max(peak, current)
    return peak


def span_s(rows: Sequence[Record]) -> float | None:
    """First t_sent to last t_end, seconds; None without rows."""
    if not rows:
        return None
    return (max(r.t_end for r in rows) - min(r.t_sent for r in rows)) / _NS_PER_S


def has_rate(kind: str, value: float | None, requests: int) -> bool:
    """Whether a load point has an achieved rate: a rate or trace load does; a closed
    loop only when it sends more requests than it has users (else all leave at t = 0)."""
    if kind in ("rate", "trace"):
        return True
    return kind == "concurrency" and value is not None and requests > value


@dataclass
class LoadSummary:
    """What one (mode, capacity, load) group achieved. Rates in requests/s."""

    mode: str
    capacity: int
    load: str | None
    kind: str  # sequential | concurrency | rate
    requests: int
    ok: int
    target_rate: float | None
    scheduled_rate: float | None
    achieved_rate: float | None  # requests / span_s; None where has_rate is False
    send_lag_ms: dict[str, Any]  # stats.describe of send lags
    slip_threshold_ms: float
    late: int  # rows whose lag exceeds the threshold
    slipped: bool
    max_in_flight: int
    span_s: float | None
    request_throughput: float | None  # ok rows / s
    output_tokens_per_s: float | None  # Σ output tokens of ok rows / s
    goodput: float | None  # rows meeting the SLOs / s; None without SLOs
    slo_met: int | None
    slo: dict[str, float | None] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def summarize_load(rows: Sequence[Record], slo: Slo | None = None,
                   slip_threshold_ms: float = DEFAULT_SLIP_THRESHOLD_MS) -> LoadSummary:
    """Summarize one group of rows (same mode, capacity and load); warm-ups dropped."""
    rows = [r for r in rows if not r.warmup]
    if not rows:
        raise ValueError("summarize_load needs at least one measured row")
    first = rows[0]
    kind, value = parse_label(first.load)
    ok = [r for r in rows if r.outcome == Outcome.OK]
    lags = send_lags_ms(rows)
    span = span_s(rows)
    late = sum(1 for lag in lags if lag > slip_threshold_ms)
    lag_dist = describe(lags)
    slipped = lag_dist.p95 is not None and lag_dist.p95 > slip_threshold_ms
    tokens = sum(r.output_tokens or 0 for r in ok)
    met = None if slo is None or slo.empty else sum(1 for r in rows if slo.met(r))
    per_s = (lambda n: n / span) if span else (lambda n: None)
    return LoadSummary(
        mode=first.mode, capacity=first.capacity, load=first.load, kind=kind,
        requests=len(rows), ok=len(ok),
        target_rate=value if kind == "rate" else None,
        scheduled_rate=rate_of([r.t_scheduled for r in rows if r.t_scheduled is not None]),
        achieved_rate=per_s(len(rows)) if has_rate(kind, value, len(rows)) else None,
        send_lag_ms=lag_dist.to_dict(), slip_threshold_ms=slip_threshold_ms, late=late,
        slipped=slipped, max_in_flight=max_in_flight(rows), span_s=span,
        request_throughput=per_s(len(ok)), output_tokens_per_s=per_s(tokens),
        goodput=None if met is None else per_s(met), slo_met=met,
        slo={} if slo is None else asdict(slo),
    )


def load_summaries(records: Iterable[Record], slo: Slo | None = None,
                   slip_threshold_ms: float = DEFAULT_SLIP_THRESHOLD_MS) -> list[LoadSummary]:
    """One summary per (mode, capacity, load) of measured rows, in first-seen mode order,
    then capacity, then load (sequential first, then by kind and value).

    A row retried by a resume supersedes its earlier attempt (latest per key), as in
    :func:`kvlab.bench.analysis.evaluate.current_rows`.
    """
    latest: dict[tuple[Any, ...], Record] = {}
    for r in records:
        if not r.warmup:
            latest[r.key] = r
    groups: dict[tuple[str, int, str | None], list[Record]] = {}
    modes: dict[str, int] = {}
    for r in sorted(latest.values(), key=lambda r: r.position):
        modes.setdefault(r.mode, len(modes))
        groups.setdefault((r.mode, r.capacity, r.load), []).append(r)

    def order(key: tuple[str, int, str | None]) -> tuple[Any, ...]:
        return (modes[key[0]], key[1], *load_order(key[2]))

    return [summarize_load(groups[k], slo, slip_threshold_ms) for k in sorted(groups, key=order)]
