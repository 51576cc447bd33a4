"""What a load point achieved: pure functions over its validated rows.

Per (mode, capacity, load) group, a :class:`~kvlab.analysis.valid_rows.ValidRows`:
facts of the load offered read every request the point sent (refused ones included:
they left when they left, and took their time); figures of work done read the valid
rows only, and every summary says what it stands on (``count``: n valid of m, the
refused ones by class).

- **target rate**: the rate a ``rate=R`` point aimed at (requests/s); None otherwise.
- **scheduled rate**: (n - 1) / (last t_scheduled - first t_scheduled): the rate the
  drawn arrivals really asked for (Poisson gaps make it differ from the target).
- **achieved rate**: n / span (span as below): the rate the point put requests
  through. Only where a rate exists: a rate load, or a closed loop with more requests
  than users (one whose users all leave at once, c=16 with 16 requests, has none).
- **send lag**: when the request left (its connection set-up's start where it opened
  one, else t_sent) - t_scheduled per row (ms): how late each request left against
  its schedule. Closed loops schedule "as soon as the user is free", so their lag is
  the client's own overhead.
- **slipped**: the p95 send lag is above ``slip_threshold_ms``: the schedule was not
  kept, so the point measured a lighter load than it claims. Never silently dropped.
- **request throughput**: valid rows / span; **output-token throughput**: Σ output
  tokens of valid rows / span; span = first t_sent to last t_end of every request the
  point sent (seconds).
- **goodput**: valid rows meeting every SLO given (TTFT, effective ITL, e2e) / span, and
  how many met them (of the requests sent: a refused row never meets them).
- **max in flight**: the most rows whose [t_sent, t_end) overlap.

Public API::

    valid = judge(records)                                        # valid_rows.judge
    summaries = load_summaries(valid, slo=Slo(ttft_ms=500), slip_threshold_ms=50)
    summary = summarize_load(group, slo=None, slip_threshold_ms=50)  # one of valid.groups()
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from kvlab.analysis import metrics
from kvlab.analysis.stats import describe
from kvlab.analysis.valid_rows import GroupKey, RowCount, ValidRows
from kvlab.labels import load_order, read_label
from kvlab.rundir import Outcome, Record

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


def send_lags_ms(rows: Iterable[Record]) -> list[float]:
    """When each row left (its set-up's start, else t_sent) - t_scheduled, for each row
    that has a schedule (ms; late is positive)."""
    return [(metrics.started_ns(r) - r.t_scheduled) / _NS_PER_MS for r in rows
            if r.t_scheduled is not None]


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


def has_rate(load: str | None, requests: int) -> bool:
    """Whether a load point (its label) has an achieved rate: an open loop (rate, trace)
    does; a closed loop only when it sends more requests than it has users (else all
    leave at t = 0); sequential rows and a kind of unknown meaning do not."""
    kind, value = (label := read_label(load)).kind, label.value
    if kind is None or kind.open_loop:
        return kind is not None
    return kind.users_valued and value is not None and requests > value


@dataclass
class LoadSummary:
    """What one (mode, capacity, load) group achieved. Rates in requests/s; ``count``:
    what the throughput and goodput stand on (n valid of m requests sent)."""

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
    request_throughput: float | None  # valid rows / s
    output_tokens_per_s: float | None  # Σ output tokens of valid rows / s
    goodput: float | None  # valid rows meeting the SLOs / s; None without SLOs
    slo_met: int | None  # valid rows meeting the SLOs
    count: RowCount
    slo: dict[str, float | None] = field(default_factory=dict)

    @property
    def valid(self) -> int:
        return self.count.valid

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "count": self.count.to_dict()}


def summarize_load(valid: ValidRows, slo: Slo | None = None,
                   slip_threshold_ms: float = DEFAULT_SLIP_THRESHOLD_MS) -> LoadSummary:
    """Summarize one group (same mode, capacity and load; one of
    :meth:`ValidRows.groups`); ValueError for a group without a measured row."""
    sent, good = valid.sent, valid.rows
    if not sent:
        raise ValueError("summarize_load needs at least one measured row")
    first = sent[0]
    label = read_label(first.load)
    kind = label.kind.name if label.kind is not None else str(first.load)
    lags = send_lags_ms(sent)
    span = span_s(sent)
    late = sum(1 for lag in lags if lag > slip_threshold_ms)
    lag_dist = describe(lags)
    slipped = lag_dist.p95 is not None and lag_dist.p95 > slip_threshold_ms
    tokens = sum(r.output_tokens or 0 for r in good)
    met = None if slo is None or slo.empty else sum(1 for r in good if slo.met(r))
    per_s = (lambda n: n / span) if span else (lambda n: None)
    return LoadSummary(
        mode=first.mode, capacity=first.capacity, load=first.load, kind=kind,
        requests=len(sent), ok=sum(1 for r in sent if r.outcome == Outcome.OK),
        target_rate=label.value if label.kind is not None and label.kind.rate_valued else None,
        scheduled_rate=rate_of([r.t_scheduled for r in sent if r.t_scheduled is not None]),
        achieved_rate=per_s(len(sent)) if has_rate(first.load, len(sent)) else None,
        send_lag_ms=lag_dist.to_dict(), slip_threshold_ms=slip_threshold_ms, late=late,
        slipped=slipped, max_in_flight=max_in_flight(sent), span_s=span,
        request_throughput=per_s(len(good)), output_tokens_per_s=per_s(tokens),
        goodput=None if met is None else per_s(met), slo_met=met, count=valid.count,
        slo={} if slo is None else asdict(slo),
    )


def load_summaries(valid: ValidRows, slo: Slo | None = None,
                   slip_threshold_ms: float = DEFAULT_SLIP_THRESHOLD_MS) -> list[LoadSummary]:
    """One summary per (mode, capacity, load) of a run's validated rows, in first-seen
    mode order, then capacity, then load (sequential first, then by kind and value)."""
    groups = valid.groups()
    modes = {m: i for i, m in enumerate(valid.modes())}

    def order(key: GroupKey) -> tuple[Any, ...]:
        return (modes[key[0]], key[1], *load_order(key[2]))

    return [summarize_load(groups[k], slo, slip_threshold_ms) for k in sorted(groups, key=order)]
