"""The client's own error on every load point: its error budget, beside the TTFT it
could distort.

A measurement is only as exact as the client that made it. Per (mode, capacity, load)
group of measured rows, from the rows' own facts (:class:`ClientError`):

- **send lag p99**: when a request left (its connection set-up's start, else written)
  minus when its schedule wanted it (ms). In a closed loop it is the client's own
  overhead between a user being free and its next request leaving.
- **event-loop lag p50**: how long a callback queued as a request was written waited
  for the client's event loop (``Record.loop_lag_ns``, ms). The median, as the TTFT
  it is set against: a closed loop's first N requests leave in one burst, and the
  burst's last callbacks wait for the others' sends (ms at c=8) though each request
  was stamped as it was written.
- **read lag p50**: how long a read of an answer waited in the socket before the loop
  took it (``Record.read_lag_ns``, ms; kernel-stamped reads only: their stamps do not
  include it, so it is the error a client stamping reads as it handles them would
  have).
- **set-up**: the mean connection set-up per measured request (ms; 0 on a connection
  opened before it, by the point's warm-up or kept alive). It is not in TTFT; it is
  the client's cost all the same, and when a server closes its connection after each
  answer every request pays it (:attr:`ClientError.closes_each_answer`).
- **load kept**: what the point achieved against what it was configured to offer, as a
  shortfall (0: all of it): a closed loop's most requests in flight against its users,
  an open loop's rate of leaving against its scheduled rate.
- **ingest**: the point's busiest second of stream events against the calibrated limit
  of this machine's client (``kvlab calibrate``), where one exists.

The **bound** is the sum of the four times: what the client could have added to a
request's figures. Its **share** is bound / the point's median TTFT (valid rows). A
point whose share, load shortfall or ingest share is above ``limit`` (default 5 %;
ingest above the saturation threshold) is flagged in every output, as a point verdict
``client_error`` (:mod:`kvlab.analysis.point_verdicts`); ``strict`` refuses it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from kvlab.analysis import metrics
from kvlab.analysis.point_verdicts import PointVerdict
from kvlab.analysis.saturation import DEFAULT_THRESHOLD, Calibration, busiest_rate
from kvlab.analysis.stats import describe, percentile
from kvlab.analysis.valid_rows import ValidRows
from kvlab.analysis.validate import Reason
from kvlab.labels import read_label
from kvlab.rundir import Outcome, Record

DEFAULT_LIMIT = 0.05  # the share of a point's median TTFT its client error may take
_NS_PER_MS = 1e6


def _pct_ms(values_ns: Sequence[int | None], q: float) -> float | None:
    present = [v / _NS_PER_MS for v in values_ns if v is not None]
    return percentile(present, q) if present else None


@dataclass(frozen=True)
class ClientError:
    """One point's client error budget (times in ms; None: not observed)."""

    mode: str
    capacity: int
    load: str | None
    positions: tuple[int, int]  # the run positions of its measured rows: [first, end)
    rows: int
    ttft_p50_ms: float | None  # of its valid rows
    send_lag_p99_ms: float | None
    loop_lag_p50_ms: float | None
    read_lag_p50_ms: float | None
    setup_mean_ms: float | None  # per measured row, 0 for a connection opened before it
    setup_paid: int  # rows that opened their own connection
    setup_paid_p50_ms: float | None  # the median set-up of those rows
    load_shortfall: float | None  # 1 - achieved / configured (0: all of it kept)
    ingest_share: float | None  # busiest second of events / the calibrated limit
    in_flight: int = 1  # the most requests in flight at once (the connections it needed)
    limit: float = DEFAULT_LIMIT
    ingest_limit: float = DEFAULT_THRESHOLD
    reasons: tuple[str, ...] = field(default=())

    @property
    def bound_ms(self) -> float | None:
        """Send lag p99 + loop lag p50 + read lag p50 + mean set-up (those observed)."""
        parts = [x for x in (self.send_lag_p99_ms, self.loop_lag_p50_ms,
                             self.read_lag_p50_ms, self.setup_mean_ms) if x is not None]
        return sum(parts) if parts else None

    @property
    def share(self) -> float | None:
        """The bound as a share of the point's median TTFT (None: either unknown)."""
        bound, ttft = self.bound_ms, self.ttft_p50_ms
        return None if bound is None or not ttft else bound / ttft

    @property
    def closes_each_answer(self) -> bool:
        """No connection carried two of the point's answers: requests opened their own
        connection, and at most as many as it had in flight went on one opened before
        them (its warm-up's): the server closed its connection after each answer."""
        return self.setup_paid > 0 and self.rows - self.setup_paid <= self.in_flight

    @property
    def over(self) -> list[str]:
        """What is above its limit, one phrase each ([] when nothing is)."""
        out = []
        if self.share is not None and self.share > self.limit:
            out.append(f"client error {self.bound_ms:.3f} ms is {self.share:.1%} of the "
                       f"median TTFT {self.ttft_p50_ms:.3f} ms (limit {self.limit:.0%})")
        if self.load_shortfall is not None and self.load_shortfall > self.limit:
            out.append(f"the load offered fell {self.load_shortfall:.1%} short of the "
                       f"configured one (limit {self.limit:.0%})")
        if self.ingest_share is not None and self.ingest_share > self.ingest_limit:
            out.append(f"ingest at {self.ingest_share:.0%} of the calibrated limit "
                       f"(limit {self.ingest_limit:.0%})")
        return out

    def describe(self) -> str:
        """``send lag p99 0.120 + loop lag p50 0.030 + read lag p50 0.050 + set-up
        0.000 = 0.200 ms, 1.0% of TTFT p50 20.100 ms``."""
        def ms(x: float | None) -> str:
            return "—" if x is None else f"{x:.3f}"

        share = "—" if self.share is None else f"{self.share:.1%}"
        return (f"send lag p99 {ms(self.send_lag_p99_ms)} + loop lag p50 "
                f"{ms(self.loop_lag_p50_ms)} + read lag p50 {ms(self.read_lag_p50_ms)} + "
                f"set-up {ms(self.setup_mean_ms)} = {ms(self.bound_ms)} ms, {share} of "
                f"TTFT p50 {ms(self.ttft_p50_ms)} ms")

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "positions": list(self.positions), "bound_ms": self.bound_ms,
                "share": self.share, "closes_each_answer": self.closes_each_answer,
                "over": self.over}


def _shortfall(sent: Sequence[Record]) -> float | None:
    """1 - achieved / configured: a closed loop's most in flight against its users, an
    open loop's leaving rate against its scheduled rate (None: no such figure)."""
    label = read_label(sent[0].load)
    kind = label.kind
    if kind is None or not (kind.open_loop or kind.name == "concurrency"):
        return None  # (a sessions load's users think between turns: no such figure)
    if not kind.open_loop:
        if label.value is None:
            return None
        return max(0.0, 1 - _max_in_flight(sent) / min(label.value, len(sent)))
    scheduled = sorted(r.t_scheduled for r in sent if r.t_scheduled is not None)
    left = sorted(metrics.started_ns(r) for r in sent if r.t_scheduled is not None)
    if len(scheduled) < 2 or scheduled[-1] == scheduled[0] or left[-1] == left[0]:
        return None
    achieved = (len(left) - 1) / (left[-1] - left[0])
    configured = (len(scheduled) - 1) / (scheduled[-1] - scheduled[0])
    return max(0.0, 1 - achieved / configured)


def _max_in_flight(rows: Sequence[Record]) -> int:
    events = sorted([(metrics.started_ns(r), 1) for r in rows] + [(r.t_end, -1) for r in rows],
                    key=lambda e: (e[0], e[1]))
    current = peak = 0
    for _, step in events:
        current += step
        peak = max(peak, current)
    return peak


def client_error(group: ValidRows, calibration: Calibration | None = None,
                 limit: float = DEFAULT_LIMIT) -> ClientError:
    """One group's client error budget (a group of :meth:`ValidRows.groups`)."""
    sent = list(group.sent)
    first = sent[0]
    ttft = describe([x for r in group.rows if (x := metrics.ttft_ms(r)) is not None]).p50
    lags = [int(metrics.started_ns(r) - r.t_scheduled) for r in sent
            if r.t_scheduled is not None]
    setups = [x for r in sent if (x := metrics.setup_ms(r)) is not None]
    paid = [x for r in sent if r.connection_reused is False
            and (x := metrics.setup_ms(r)) is not None]
    ingest = None
    if calibration is not None and calibration.max_events_per_s > 0:
        events_s, _ = busiest_rate([r for r in sent if r.outcome is Outcome.OK])
        ingest = events_s / calibration.max_events_per_s if events_s else None
    positions = [r.position for r in sent]
    return ClientError(
        first.mode, first.capacity, first.load, (min(positions), max(positions) + 1),
        len(sent), ttft, _pct_ms(lags, 99.0) if lags else None,
        _pct_ms([r.loop_lag_ns for r in sent], 50.0),
        _pct_ms([r.read_lag_ns for r in sent], 50.0),
        sum(setups) / len(setups) if setups else None, len(paid),
        describe(paid).p50 if paid else None, _shortfall(sent), ingest,
        _max_in_flight(sent), limit)


def client_errors(valid: ValidRows, calibration: Calibration | Mapping[str, Any] | None
                  = None, limit: float = DEFAULT_LIMIT, workers: int | None = None
                  ) -> list[ClientError]:
    """Every load point's client error budget (sequential rows left out), in run order;
    ``calibration`` counts only when it was measured with the run's client (``workers``
    load workers, None: one process)."""
    try:
        cal = (calibration if isinstance(calibration, Calibration) or calibration is None
               else Calibration.from_dict(calibration))
    except (KeyError, TypeError, ValueError):
        cal = None  # an unreadable calibration counts as none
    if cal is not None and cal.workers != workers:
        cal = None
    out = [client_error(g, cal, limit) for key, g in valid.groups().items()
           if key[2] is not None and g.sent]
    return sorted(out, key=lambda e: e.positions)


def client_error_verdicts(errors: Sequence[ClientError], *, strict: bool = False
                          ) -> list[PointVerdict]:
    """A verdict on each point whose client error is over its limit: flagged in every
    output, refused with ``strict``."""
    then = "refused (--strict)" if strict else "flagged; kvlab evaluate --strict refuses it"
    return [PointVerdict(e.mode, e.capacity, e.load, e.positions, Reason.CLIENT_ERROR,
                         "; ".join(e.over) + f" ({e.describe()}): {then}", strict)
            for e in errors if e.over]
