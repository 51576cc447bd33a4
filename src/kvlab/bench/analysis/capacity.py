"""Capacity under objectives: the highest request rate at which a server still meets them.

A capacity search (an experiment's ``[search]``) runs rate points chosen here, each
``repetitions`` times (labels ``rate=R#1``, ``rate=R#2``, ...), and judges each rate:

- **Points whose schedule slipped are excluded** (p95 send lag above the slip threshold,
  :mod:`kvlab.bench.analysis.load`): the client did not offer that rate, so the rows
  do not say what the server does at it. A rate whose points all slipped is
  *undecided* and counts as not met.
- **Objectives** are read over the rows of the kept points, pooled: the ``percentile``
  (linear, as every kvlab percentile) of TTFT, effective ITL or e2e at most a limit
  (ms), a row that failed or lacks the metric counting as slower than any other; and
  *goodput*, the share of rows meeting every per-request ``[slo]``, at least a limit.
- **Bisection**: ``low`` first (not met: the capacity is below the range), then
  ``high`` (met: at least ``high``), then the geometric midpoint of the highest rate met
  and the lowest rate not met above it, until they are within ``precision`` of each
  other (relative) or ``max_rates`` rates were tried.

**The answer** is where the binding objective crosses its limit, interpolated linearly
in rate between the two rates of the final bracket (an objective that fails by failed
rows only takes the bracket's midpoint). **Its interval** is a bootstrap: the rows of
every rate tried are resampled (1000 times, seeded), the answer recomputed from the
resampled statistics, and the 2.5 and 97.5 percentiles of those answers kept (clamped
to the rates tried: a resample that meets no rate counts as the lowest).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

import numpy as np

from kvlab.bench.analysis import metrics
from kvlab.bench.analysis.intervals import Interval
from kvlab.bench.analysis.load import Slo, parse_label, summarize_load
from kvlab.bench.records import Outcome, Record

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
        """Per objective, one value per row: the metric (inf for a failed row or a
        missing value), or 1.0 / 0.0 for goodput (met or not)."""
        out: dict[str, np.ndarray] = {}
        for o in self.items:
            if o.metric == GOODPUT:
                assert self.slo is not None
                out[o.metric] = np.array([1.0 if self.slo.met(r) else 0.0 for r in rows])
                continue
            values = []
            for r in rows:
                v = LATENCY[o.metric](r) if r.outcome == Outcome.OK else None
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
    """The rates a search may try (requests/s) and when it stops."""

    low: float
    high: float
    precision: float = 0.05
    max_rates: int = 10


@dataclass
class Probe:
    """One rate tried: its points, those excluded because they slipped, the rows judged
    and each objective's statistic; ``met`` None when every point slipped."""

    rate: float
    points: list[str]
    slipped: list[str]
    rows: int
    values: dict[str, float | None]
    met: bool | None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def judge(rate: float, by_point: Mapping[str, Sequence[Record]], objectives: Objectives,
          slip_threshold_ms: float) -> tuple[Probe, list[Record]]:
    """The verdict on one rate from the rows of its points (warm-ups left out), and the
    rows it was judged on (the kept points', pooled)."""
    kept: list[Record] = []
    slipped = []
    for label, rows in by_point.items():
        rows = [r for r in rows if not r.warmup]
        if not rows:
            continue
        if summarize_load(rows, None, slip_threshold_ms).slipped:
            slipped.append(label)
        else:
            kept += rows
    if not kept:
        return Probe(rate, list(by_point), slipped, 0, {}, None), kept
    values = objectives.statistics(objectives.samples(kept))
    return Probe(rate, list(by_point), slipped, len(kept), values,
                 objectives.met(values)), kept


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
    judged = [p for p in probes if p.met is not None and kept.get(p.rate)]
    if len(judged) < 2:
        return None
    samples = {p.rate: objectives.samples(kept[p.rate]) for p in judged}
    rng = np.random.default_rng(seed)
    lowest, highest = min(p.rate for p in judged), max(p.rate for p in judged)
    answers = []
    for _ in range(resamples):
        drawn = []
        for p in judged:
            n = p.rows
            pick = rng.integers(0, n, n)
            values = objectives.statistics({k: v[pick] for k, v in samples[p.rate].items()})
            drawn.append(Probe(p.rate, p.points, p.slipped, n, values, objectives.met(values)))
        status, rate, _ = estimate(drawn, objectives)
        answers.append(rate if rate is not None else
                       (lowest if status == "below_low" else highest))
    low, high = np.percentile(answers, [2.5, 97.5])
    return Interval(float(low), float(high), 0.95, "percentile")


def capacity_search(records: Iterable[Record], objectives: Objectives, plan: SearchPlan,
                    slip_threshold_ms: float, resamples: int = 1000) -> list[CapacityResult]:
    """The search of every (mode, capacity) from its rate points' records (a resumed
    row supersedes its earlier attempt)."""
    latest: dict[tuple[Any, ...], Record] = {}
    for r in records:
        if not r.warmup and parse_label(r.load)[0] == "rate":
            latest[r.key] = r
    cells: dict[tuple[str, int], dict[float, dict[str, list[Record]]]] = {}
    for r in sorted(latest.values(), key=lambda r: r.position):
        rate = parse_label(r.load)[1]
        assert rate is not None and r.load is not None
        cells.setdefault((r.mode, r.capacity), {}).setdefault(rate, {}) \
            .setdefault(r.load, []).append(r)
    out = []
    for (mode, capacity), rates in cells.items():
        probes, kept = [], {}
        for rate, by_point in sorted(rates.items()):
            probe, rows = judge(rate, by_point, objectives, slip_threshold_ms)
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
        out.append(result)
    return out
