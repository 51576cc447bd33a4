"""Capacity under objectives: the highest request rate at which a server still meets them.

A capacity search (an experiment's ``[search]``) runs rate points chosen here, each
``repetitions`` times (labels ``rate=R#1``, ``rate=R#2``, ...), and judges each rate:

- **Points whose schedule slipped are excluded** (p95 send lag above the slip threshold,
  :mod:`kvlab.analysis.load`): the client did not offer that rate, so the rows
  do not say what the server does at it. A rate whose points all slipped is
  *undecided* and counts as not met.
- **Refused rows make a miss.** A rate is judged on the valid rows of its kept points
  (:class:`~kvlab.analysis.valid_rows.ValidRows`); when validation refused more
  than ``max_refused`` (a share, 0 by default) of the requests they sent, the rate is
  *missed*, whatever its valid rows say, and the probe says why.
- **Objectives** are read over the valid rows of the kept points, pooled: the
  ``percentile`` (linear, as every kvlab percentile) of TTFT, effective ITL or e2e at
  most a limit (ms), a row that lacks the metric counting as slower than any other; and
  *goodput*, the share of valid rows meeting every per-request ``[slo]``, at least a
  limit.
- **Bisection**: ``low`` first (not met: the capacity is below the range), then
  ``high`` (met: at least ``high``), then the geometric midpoint of the highest rate met
  and the lowest rate not met above it, until they are within ``precision`` of each
  other (relative) or ``max_rates`` rates were tried.

**The answer** is where the binding objective crosses its limit, interpolated linearly
in rate between the two rates of the final bracket (an objective whose percentile falls
on rows without the metric, or a rate missed by its refused rows, takes the bracket's
midpoint). **Its interval** is a bootstrap: the rows of
every rate tried are resampled (1000 times, seeded), the answer recomputed from the
resampled statistics, and the 2.5 and 97.5 percentiles of those answers kept (clamped
to the rates tried: a resample that meets no rate counts as the lowest).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

import numpy as np

from kvlab.analysis import metrics
from kvlab.analysis.intervals import Interval
from kvlab.analysis.load import Slo, summarize_load
from kvlab.analysis.valid_rows import RowCount, ValidRows
from kvlab.labels import read_label
from kvlab.rundir import Record

LATENCY: dict[str, Callable[[Record], float | None]] = {
    "ttft_ms": metrics.ttft_ms,
    "itl_effective_ms": metrics.itl_effective_ms,
    "e2e_ms": metrics.e2e_ms,
}
GOODPUT = "goodput"
Status = Literal["found", "below_low", "above_high", "incomplete"]


@dataclass(frozen=True)
class Objective:
    """One objective: ``metric`` (a LATENCY name, or ``goodput``) against ``limit`` (ms,
    at most; or a share of rows, at least) at ``percentile`` (latency only)."""

    metric: str
    limit: float
    percentile: float | None = None

    def describe(self) -> str:
        if self.metric == GOODPUT:
            return f"goodput >= {self.limit:.0%} of requests meeting [slo]"
        return f"p{self.percentile:g} {self.metric} <= {self.limit:g} ms"

    def holds(self, value: float | None) -> bool:
        """Whether a statistic meets the objective (None: failed rows decide: not met)."""
        if value is None:
            return False
        return value >= self.limit if self.metric == GOODPUT else value <= self.limit


@dataclass(frozen=True)
class Objectives:
    """Every objective a rate must meet, and the per-request SLO goodput counts against."""

    items: tuple[Objective, ...]
    slo: Slo | None = None

    @classmethod
    def of(cls, percentile: float, ttft_ms: float | None = None, itl_ms: float | None = None,
           e2e_ms: float | None = None, goodput: float | None = None,
           slo: Slo | None = None) -> Objectives:
        items = [Objective(name, limit, percentile) for name, limit in
                 (("ttft_ms", ttft_ms), ("itl_effective_ms", itl_ms), ("e2e_ms", e2e_ms))
                 if limit is not None]
        if goodput is not None:
            if slo is None or slo.empty:
                raise ValueError("a goodput objective needs a per-request SLO")
            items.append(Objective(GOODPUT, goodput))
        if not items:
            raise ValueError("a capacity search needs at least one objective")
        return cls(tuple(items), slo)

    def samples(self, rows: Sequence[Record]) -> dict[str, np.ndarray]:
        """Per objective, one value per valid row: the metric (inf for a missing value),
        or 1.0 / 0.0 for goodput (met or not)."""
        out: dict[str, np.ndarray] = {}
        for o in self.items:
            if o.metric == GOODPUT:
                assert self.slo is not None
                out[o.metric] = np.array([1.0 if self.slo.met(r) else 0.0 for r in rows])
                continue
            values = []
            for r in rows:
                v = LATENCY[o.metric](r)
                values.append(math.inf if v is None else v)
            out[o.metric] = np.array(values, dtype=np.float64)
        return out

    def statistics(self, samples: Mapping[str, np.ndarray]) -> dict[str, float | None]:
        """Each objective's statistic over its samples (see :func:`tail_percentile`)."""
        out: dict[str, float | None] = {}
        for o in self.items:
            x = samples[o.metric]
            if o.metric == GOODPUT:
                out[o.metric] = float(x.mean()) if x.size else None
            else:
                assert o.percentile is not None
                out[o.metric] = tail_percentile(x, o.percentile)
        return out

    def met(self, values: Mapping[str, float | None]) -> bool:
        return all(o.holds(values.get(o.metric)) for o in self.items)


def tail_percentile(values: np.ndarray, q: float) -> float | None:
    """The ``q``-th percentile by linear interpolation (as ``stats.percentile``), where
    infinite values are rows worse than any; None when it falls on one of them (or no
    values)."""
    n = values.size
    if n == 0:
        return None
    ordered = np.sort(values)
    pos = (n - 1) * q / 100.0
    lo, hi = math.floor(pos), math.ceil(pos)
    if not math.isfinite(ordered[hi]):
        return None
    return float(ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo))


@dataclass(frozen=True)
class SearchPlan:
    """The rates a search may try (requests/s), when it stops, and the share of a rate's
    requests validation may refuse before the rate is a miss (``max_refused``)."""

    low: float
    high: float
    precision: float = 0.05
    max_rates: int = 10
    max_refused: float = 0.0


@dataclass
class Probe:
    """One rate tried: its points, those excluded because they slipped, what the kept
    points' figures stand on (``count``: n valid of m sent, refused by class) and each
    objective's statistic over the valid rows; ``met`` None when every point slipped.
    ``refused_miss``: missed because validation refused more than the plan allows."""

    rate: float
    points: list[str]
    slipped: list[str]
    count: RowCount
    values: dict[str, float | None]
    met: bool | None
    refused_miss: bool = False

    @property
    def rows(self) -> int:
        """Valid rows judged."""
        return self.count.valid

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "count": self.count.to_dict()}


def judge_rate(rate: float, by_point: Mapping[str, ValidRows], objectives: Objectives,
               slip_threshold_ms: float, max_refused: float = 0.0
               ) -> tuple[Probe, list[Record]]:
    """The verdict on one rate from its points' validated rows, and the valid rows it
    was judged on (the kept points', pooled). A rate whose kept points had more than
    ``max_refused`` of their requests refused is missed."""
    kept: list[Record] = []
    counts: list[RowCount] = []
    slipped = []
    for label, valid in by_point.items():
        if not valid.sent:
            continue
        if summarize_load(valid, None, slip_threshold_ms).slipped:
            slipped.append(label)
        else:
            kept += valid.rows
            counts.append(valid.count)
    count = RowCount.total(counts)
    if not count.measured:
        return Probe(rate, list(by_point), slipped, count, {}, None), kept
    values = objectives.statistics(objectives.samples(kept))
    too_many = (count.refused_share or 0.0) > max_refused
    return Probe(rate, list(by_point), slipped, count, values,
                 objectives.met(values) and not too_many, too_many), kept


def round_rate(rate: float) -> float:
    """A rate to try, to 4 significant digits (tidy labels, no float noise)."""
    return float(f"{rate:.4g}")


def bracket(probes: Sequence[Probe]) -> tuple[float | None, float | None]:
    """(the highest rate met below the lowest rate not met, that lowest rate); None
    where there is none."""
    failing = [p.rate for p in probes if not p.met]
    high = min(failing) if failing else None
    met = [p.rate for p in probes if p.met and (high is None or p.rate < high)]
    return (max(met) if met else None), high


def next_rate(probes: Sequence[Probe], plan: SearchPlan) -> float | None:
    """The next rate to try, or None when the search is over."""
    tried = {p.rate for p in probes}
    if round_rate(plan.low) not in tried:
        return round_rate(plan.low)
    if not any(p.met for p in probes):
        return None  # below the range
    if round_rate(plan.high) not in tried:
        return round_rate(plan.high)
    low, high = bracket(probes)
    if high is None or low is None or len(probes) >= plan.max_rates:
        return None
    if (high - low) / low <= plan.precision:
        return None
    rate = round_rate(math.sqrt(low * high))
    return rate if low < rate < high and rate not in tried else None


def crossing(objectives: Objectives, low: float, at_low: Mapping[str, float | None],
             high: float, at_high: Mapping[str, float | None]) -> float:
    """Where the binding objective crosses its limit between ``low`` (met) and ``high``
    (not met), linearly in rate (requests/s)."""
    found = high
    for o in objectives.items:
        s_high, s_low = at_high.get(o.metric), at_low.get(o.metric)
        if o.holds(s_high):
            continue
        if s_high is None or s_low is None or s_high == s_low:
            found = min(found, (low + high) / 2)
            continue
        share = (o.limit - s_low) / (s_high - s_low)
        found = min(found, low + (high - low) * min(1.0, max(0.0, share)))
    return found


def estimate(probes: Sequence[Probe], objectives: Objectives
             ) -> tuple[Status, float | None, tuple[float, float] | None]:
    """The search's answer from its probes: status, rate (requests/s) and bracket."""
    if not probes:
        return "incomplete", None, None
    low, high = bracket(probes)
    if low is None:
        return "below_low", None, None
    if high is None:
        return "above_high", None, None
    by_rate = {p.rate: p for p in probes}
    if by_rate[high].refused_miss:  # missed by refusals, not by a statistic: no crossing
        return "found", (low + high) / 2, (low, high)
    return "found", crossing(objectives, low, by_rate[low].values, high,
                             by_rate[high].values), (low, high)


@dataclass
class CapacityResult:
    """The capacity of one (mode, capacity): the rates tried and the answer.

    ``status``: ``found`` (``rate`` between the bracket's two rates, with its bootstrap
    ``interval``), ``below_low`` (even the lowest rate missed an objective),
    ``above_high`` (the highest rate met them all) or ``incomplete``."""

    mode: str
    capacity: int
    objectives: list[str]
    probes: list[Probe]
    status: Status
    rate: float | None = None
    interval: Interval | None = None
    bracket: tuple[float, float] | None = None
    notes: list[str] = field(default_factory=list)
    metrics: list[str] = field(default_factory=list)  # each objective's metric, in order

    def to_dict(self) -> dict[str, Any]:
        return {"mode": self.mode, "capacity": self.capacity, "objectives": self.objectives,
                "metrics": self.metrics,
                "status": self.status, "rate": self.rate,
                "interval": self.interval.to_dict() if self.interval else None,
                "bracket": list(self.bracket) if self.bracket else None,
                "probes": [p.to_dict() for p in self.probes], "notes": self.notes}


def bootstrap_rate(probes: Sequence[Probe], kept: Mapping[float, Sequence[Record]],
                   objectives: Objectives, resamples: int = 1000,
                   seed: int = 0) -> Interval | None:
    """The 95 % percentile-bootstrap interval of the answer (see the module doc)."""
    # a rate missed by its refusals stays missed in every resample, rows or not
    judged = [p for p in probes if p.met is not None and (kept.get(p.rate) or p.refused_miss)]
    if len(judged) < 2:
        return None
    samples = {p.rate: objectives.samples(kept[p.rate]) for p in judged if kept.get(p.rate)}
    rng = np.random.default_rng(seed)
    lowest, highest = min(p.rate for p in judged), max(p.rate for p in judged)
    answers = []
    for _ in range(resamples):
        drawn = []
        for p in judged:
            if p.rate not in samples:
                drawn.append(p)
                continue
            pick = rng.integers(0, p.rows, p.rows)
            values = objectives.statistics({k: v[pick] for k, v in samples[p.rate].items()})
            met = objectives.met(values) and not p.refused_miss
            drawn.append(Probe(p.rate, p.points, p.slipped, p.count, values, met,
                               p.refused_miss))
        status, rate, _ = estimate(drawn, objectives)
        answers.append(rate if rate is not None else
                       (lowest if status == "below_low" else highest))
    low, high = np.percentile(answers, [2.5, 97.5])
    return Interval(float(low), float(high), 0.95, "percentile")


def capacity_search(valid: ValidRows, objectives: Objectives, plan: SearchPlan,
                    slip_threshold_ms: float, resamples: int = 1000) -> list[CapacityResult]:
    """The search of every (mode, capacity) from its rate points' validated rows."""
    cells: dict[tuple[str, int], dict[float, dict[str, ValidRows]]] = {}
    for (mode, capacity, load), group in valid.groups().items():
        label = read_label(load)
        rate = label.value
        if label.kind is None or not label.kind.rate_valued or rate is None or load is None:
            continue
        cells.setdefault((mode, capacity), {}).setdefault(rate, {})[load] = group
    out = []
    for (mode, capacity), rates in cells.items():
        probes, kept = [], {}
        for rate, by_point in sorted(rates.items()):
            probe, rows = judge_rate(rate, by_point, objectives, slip_threshold_ms,
                                     plan.max_refused)
            probes.append(probe)
            kept[rate] = rows
        status, rate, found = estimate(probes, objectives)
        result = CapacityResult(mode, capacity, [o.describe() for o in objectives.items],
                                probes, status, rate, bracket=found,
                                metrics=[o.metric for o in objectives.items])
        if status == "found":
            result.interval = bootstrap_rate(probes, kept, objectives, resamples)
        if found and (found[1] - found[0]) / found[0] > plan.precision:
            result.notes.append(f"the bracket {found[0]:g}..{found[1]:g} req/s is wider than "
                                f"the precision asked ({plan.precision:.0%}): the search "
                                "stopped at max_rates")
        undecided = [p.rate for p in probes if p.met is None]
        if undecided:
            result.notes.append("every point slipped at " + ", ".join(f"{r:g}" for r in
                                                                     undecided)
                                + " req/s: not measured, counted as not met")
        for p in probes:
            if p.refused_miss:
                result.notes.append(
                    f"missed at {p.rate:g} req/s by its refused rows: {p.count.describe()}, "
                    f"more than the {plan.max_refused:.0%} of requests [search] "
                    "max_refused allows")
        out.append(result)
    return out
