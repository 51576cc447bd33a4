"""evaluation.json: the run's summaries, its comparisons, and the counts behind them.

``load`` is the row's load point (``c=8``, ``rate=4.0``; None for a sequential run),
so the points of a load sweep are never averaged together, and a comparison pairs A
and B at the same capacity and the same load point.

Every number comes from the run's records through one gate: rows are validated, row by
row (:mod:`kvlab.analysis.validate`) and point by point from the server's own
counters (:mod:`kvlab.analysis.point_verdicts`), into one
:class:`~kvlab.analysis.valid_rows.ValidRows`, the only input of every aggregate;
refused rows are named and left out, every figure says "n valid of m", each
(mode, capacity, load) becomes one :class:`~kvlab.analysis.summaries.Summary`
and each pair of modes one :class:`~kvlab.analysis.comparisons.PairComparison`
(ratios with intervals and verdicts). The strict :class:`Comparison` of the
experiment's ``compare`` pairs reads those summaries. The same :func:`evaluate` also
gives what each load point achieved (:mod:`kvlab.analysis.load`), whether the
client was near its limit (:mod:`kvlab.analysis.saturation`) and the cells under
other tools' definitions (:mod:`kvlab.analysis.definitions`): one complete, typed
:class:`Evaluation`. evaluation.json, report.md, report.html, the CSV files and the
CLI's tables render it; they compute nothing of their own.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar, cast

from kvlab.analysis.cache_hits import CacheSplit, cache_splits
from kvlab.analysis.capacity import CapacityResult, capacity_search
from kvlab.analysis.check import Check, Finding, Judged
from kvlab.analysis.checks import CHECKS
from kvlab.analysis.client_error import ClientError, client_error_verdicts, client_errors
from kvlab.analysis.comparisons import (
    COMPARED_METRICS,
    MetricComparison,
    PairComparison,
    compare_run,
)
from kvlab.analysis.definition_cells import Cell, cells, evaluation_block
from kvlab.analysis.load import LoadSummary, load_summaries
from kvlab.analysis.point_verdicts import PointVerdict, point_verdicts
from kvlab.analysis.prefix_reuse import PrefixReuse, prefix_reuse
from kvlab.analysis.run_view import EvaluateOptions, RunView
from kvlab.analysis.saturation import ClientCheck, client_check
from kvlab.analysis.server_counters import PointCounters, point_counters
from kvlab.analysis.summaries import Summary, summarize
from kvlab.analysis.summary_metrics import metric_definitions
from kvlab.analysis.turns import ConversationCheck, turn_growth
from kvlab.analysis.valid_rows import ValidRows, judge
from kvlab.analysis.validate import Violation
from kvlab.labels import load_order
from kvlab.rundir.evaluation import write_evaluation as save_evaluation

__all__ = [
    "SCHEMA_VERSION", "Comparison", "EvaluateOptions", "Evaluation", "RunView", "Summary",
    "compare", "evaluate", "explain_ratio", "ratio_of", "reduction_of", "summarize",
    "write_evaluation",
]

# evaluation.json's layout: raised when a field is removed or changes meaning (fields
# are only ever added within one version). 2: load figures (request throughput, output
# tokens/s, goodput, slo_met) and the capacity search read valid rows only; summaries,
# load points, comparisons and probes carry "n valid of m" (count); point verdicts.
SCHEMA_VERSION = 2

T = TypeVar("T", bound=Finding)

def ratio_of(a: float | None, b: float | None) -> float | None:
    """mean_A / mean_B; None when either is missing or B is not positive."""
    if a is None or b is None or b <= 0:
        return None
    return a / b


def reduction_of(ratio: float | None) -> float | None:
    """1 - 1/ratio: the share of A's time B saves (negative: B takes longer)."""
    if ratio is None or ratio <= 0:
        return None
    return 1.0 - 1.0 / ratio


@dataclass
class Comparison:
    """Mode A against mode B at one capacity and load, strictly: refused when any row of
    either mode was refused or any pair of rows differs. ``pair`` is the same pair in
    the interval view (computed over the valid rows, as report.html shows it)."""

    a: str
    b: str
    capacity: int
    load: str | None  # load point label; None: sequential
    status: str  # "ok" or "refused"
    reasons: list[str] = field(default_factory=list)
    metrics: dict[str, dict[str, Any]] = field(default_factory=dict)
    pair: PairComparison | None = field(default=None, repr=False, compare=False)

    def to_json(self) -> dict[str, Any]:
        return {"a": self.a, "b": self.b, "capacity": self.capacity, "load": self.load,
                "status": self.status, "reasons": self.reasons, "metrics": self.metrics}


def _interval_of(found: MetricComparison | None) -> dict[str, Any]:
    if found is None:
        return {"interval": None, "verdict": None}
    return {"interval": found.interval.to_dict() if found.interval else None,
            "verdict": str(found.verdict) if found.verdict else None}


def compare(a: Summary, b: Summary, pair_violations: list[Violation],
            pair: PairComparison | None = None) -> Comparison:
    """Ratios A/B of the summaries' means and reductions for each compared metric, with
    the interval and verdict of ``pair``, unless refused."""
    reasons = [str(v) for v in pair_violations]
    for s in (a, b):
        at = f"{s.capacity} {s.load}" if s.load else str(s.capacity)
        if s.refused:
            reasons.append(f"{s.mode} @ {at}: {s.refused} refused rows")
        if s.queries == 0:
            reasons.append(f"{s.mode} @ {at}: no valid rows")
    result = Comparison(a.mode, b.mode, a.capacity, a.load, "refused" if reasons else "ok",
                        reasons, pair=pair)
    if reasons:
        return result
    found = {c.metric: c for c in pair.metrics} if pair is not None else {}
    for metric in COMPARED_METRICS:
        mean_a, mean_b = a.mean(metric.name), b.mean(metric.name)
        ratio = ratio_of(mean_a, mean_b)
        result.metrics[metric.name] = {
            "mean_a": mean_a,
            "mean_b": mean_b,
            "ratio": ratio,
            "reduction": reduction_of(ratio),
            **_interval_of(found.get(metric.name)),
        }
    return result


@dataclass
class Evaluation:
    """The one view of a run: what evaluation.json holds and every report renders.

    ``valid``: the run's validated rows, the input of every figure here. ``pairs`` are
    the interval comparisons: of the experiment's ``compare`` pairs, or of every pair
    of modes when it names none (``named_pairs`` False). ``verdicts``: the server
    counters' verdicts on whole points (``strict``: disagreeing counters refuse)."""

    run_id: str
    experiment: str
    valid: ValidRows = field(repr=False)
    counts: dict[str, Any]
    violations: list[Violation]
    summaries: list[Summary]
    comparisons: list[Comparison]
    pairs: list[PairComparison] = field(default_factory=list)
    named_pairs: bool = True
    client: ClientCheck | None = None  # was the client near its calibrated limit?
    definitions: list[Cell] = field(default_factory=list)  # under every tool's definitions
    load: list[LoadSummary] = field(default_factory=list)  # what each load point achieved
    order: dict[str, Any] | None = None  # the run order used (bench.plan.order)
    repeat_aa: str | None = None  # the mode measured twice, for an A/A run
    definition_sets: tuple[str, ...] = ()  # other tools' sets evaluation.json keeps
    schema_version: int = SCHEMA_VERSION
    prefix_reuse: list[PrefixReuse] = field(default_factory=list)  # per mode: verifiable?
    server_counters: list[PointCounters] = field(default_factory=list)  # /metrics deltas
    prefix_cache: list[CacheSplit] = field(default_factory=list)  # reuse asked: hits, TTFT
    turns: list[ConversationCheck] = field(default_factory=list)  # multi-turn growth
    capacity: list[CapacityResult] = field(default_factory=list)  # [search]'s answers
    verdicts: list[PointVerdict] = field(default_factory=list)  # on whole points
    strict: bool = False  # counters that disagree with the records refuse their point
    # each registered check's findings (analysis.checks), by its key: read them with
    # found(); not_measured: per key, the parts of the run it could not measure
    checks: dict[str, list[Finding]] = field(default_factory=dict)
    not_measured: dict[str, list[str]] = field(default_factory=dict)
    client_errors: list[ClientError] = field(default_factory=list)  # per point's budget

    def to_json(self) -> dict[str, Any]:
        """evaluation.json."""
        head: dict[str, Any] = {"schema_version": self.schema_version,
                                "load": [s.to_dict() for s in self.load], "order": self.order}
        if self.repeat_aa:
            head["repeat_aa"] = self.repeat_aa
        if self.client is not None:
            head["client_check"] = {"status": self.client.status, "text": self.client.text}
        head["definitions"] = evaluation_block(self.definitions, self.definition_sets)
        return {**head, **{
            "run_id": self.run_id,
            "experiment": self.experiment,
            "metric_definitions": metric_definitions(),
            "counts": self.counts,
            "valid": self.valid.count.to_dict(),
            "strict": self.strict,
            "point_verdicts": [v.to_dict() for v in self.verdicts],
            "violations": [v.to_dict() for v in self.violations],
            "summaries": [s.to_json() for s in self.summaries],
            "comparisons": [c.to_json() for c in self.comparisons],
            "intervals": {"named_pairs": self.named_pairs,
                          "pairs": [p.to_dict() for p in self.pairs]},
            "prefix_reuse": [p.to_dict() for p in self.prefix_reuse],
            "server_counters": [c.to_dict() for c in self.server_counters],
            "prefix_cache": [c.to_dict() for c in self.prefix_cache],
            "turns": [t.to_dict() for t in self.turns],
            "capacity_search": [c.to_dict() for c in self.capacity],
            "client_errors": [e.to_dict() for e in self.client_errors],
            **{c.key: [f.to_dict() for f in self.checks.get(c.key, [])] for c in CHECKS},
        }}

    def found(self, check: Check[T]) -> list[T]:
        """The findings of ``check`` (one of analysis.checks.CHECKS) in this run."""
        return cast("list[T]", self.checks.get(check.key, []))

    def summary(self, mode: str, capacity: int, load: str | None = None) -> Summary | None:
        """The summary of (mode, capacity, load); ``load`` None: the sequential one."""
        for s in self.summaries:
            if s.mode == mode and s.capacity == capacity and s.load == load:
                return s
        return None

    @property
    def has_load(self) -> bool:
        """True when the run has load points (tables then show a load column)."""
        return any(s.load is not None for s in self.summaries)

    @property
    def row_violations(self) -> list[Violation]:
        """The refused rows (pair violations left out)."""
        return [v for v in self.violations if v.other_mode is None]


def evaluate(view: RunView, *, options: EvaluateOptions | None = None) -> Evaluation:
    """The complete evaluation of a run (``view``), judged with ``options`` (None: the
    defaults).

    Validate, summarize per (mode, capacity, load) and compare each pair at every
    (capacity, load) both modes measured (every pair of modes when the view names no
    pairs; only named pairs get a strict :class:`Comparison`); summarize each load
    point against the SLOs and the slip threshold; check the client's load against its
    calibration; cells under every tool's definitions; the server counters of each point
    and whether prefix reuse can be verified, and their verdicts on whole points
    (prefix-cache hits no request allowed refuse a point; counters that disagree with
    the records flag it, and refuse it with ``options.strict``); where reuse was
    allowed, the cached tokens of each row and TTFT split by cache hit; the growth of
    multi-turn prompts against the plan; with a ``[search]``, the highest rate meeting
    its objectives; each load point's client error budget against its median TTFT (over
    the view's ``client_error_limit``: flagged, refused with ``options.strict``). Then
    every registered check (:data:`~kvlab.analysis.checks.CHECKS`:
    server histograms, reasoning, the KV knee, process memory, trace hits, sessions)
    adds its findings, and says what it could not measure.
    """
    options = options or EvaluateOptions()
    records, resamples, strict = view.records, options.resamples, options.strict
    compare_pairs, search = view.compare_pairs, view.search
    counters = point_counters(records, view.gauges, view.metric_names)
    verdicts = point_verdicts(counters, strict=strict)
    errors = client_errors(judge(records, verdicts, view.plan or None), view.calibration,
                           view.client_error_limit, view.workers)
    verdicts += client_error_verdicts(errors, strict=strict)
    valid = judge(records, verdicts, view.plan or None)
    rows = list(valid.sent)
    rank = {m: i for i, m in enumerate(view.mode_order)}
    summaries = sorted(
        (summarize(group, resamples=resamples) for group in valid.groups().values()),
        key=lambda s: (rank.get(s.mode, len(rank)), s.mode, s.capacity, load_order(s.load)),
    )
    pairs = compare_run(valid, list(compare_pairs) or None, resamples=resamples)
    by_pair = {(p.mode_a, p.mode_b, p.capacity, p.load): p for p in pairs}
    by_key = {(s.mode, s.capacity, s.load): s for s in summaries}
    comparisons: list[Comparison] = []
    pair_violations: list[Violation] = []
    for a, b in compare_pairs:
        cells_a = {(c, load) for m, c, load in by_key if m == a}
        cells_b = {(c, load) for m, c, load in by_key if m == b}
        for capacity, load in sorted(cells_a & cells_b,
                                     key=lambda cell: (cell[0], load_order(cell[1]))):
            pair = by_pair[(a, b, capacity, load)]
            pair_violations.extend(pair.pair_violations)
            comparisons.append(compare(by_key[(a, capacity, load)], by_key[(b, capacity, load)],
                                       pair.pair_violations, pair))
    loads = load_summaries(valid, view.slo, view.slip_threshold_ms)
    count = valid.count
    counts: dict[str, Any] = {
        "records": len(records),
        "warmup": sum(1 for r in records if r.warmup),
        "measured": len(rows),
        "superseded": sum(1 for r in records if not r.warmup) - len(rows),
        "refused_rows": count.measured - count.valid,
        "valid_rows": count.valid,
        "refused_by_reason": count.refused,
    }
    judged = Judged(view, options, valid, summaries, loads, counters)
    return Evaluation(
        view.run_id, view.experiment, valid, counts,
        list(valid.violations) + pair_violations,
        summaries, comparisons, pairs=pairs, named_pairs=bool(compare_pairs),
        client=client_check(records, view.calibration, workers=view.workers),
        definitions=cells(valid),
        prefix_reuse=prefix_reuse(rows, counters),
        server_counters=counters,
        load=loads,
        order=dict(view.order) if view.order is not None else None,
        repeat_aa=view.repeat_aa,
        definition_sets=tuple(view.definition_sets),
        prefix_cache=cache_splits(valid),
        turns=turn_growth(rows, view.turns),
        capacity=capacity_search(valid, search[0], search[1], view.slip_threshold_ms,
                                 resamples=min(resamples, 1000)) if search else [],
        verdicts=verdicts, strict=strict,
        checks={c.key: list(c.run(judged)) for c in CHECKS},
        not_measured={c.key: lines for c in CHECKS if (lines := c.not_measured(judged))},
        client_errors=errors,
    )


def write_evaluation(evaluation: Evaluation, path: Path) -> None:
    """Write evaluation.json (indented, stable key order) through the run directory's
    writer of it."""
    save_evaluation(Path(path), evaluation.to_json())


def explain_ratio(ratio: float) -> str:
    """How to read a ratio A/B in words (e.g. 1.2: B saves 16.67 % of A's time)."""
    if ratio <= 0:
        return f"ratio {ratio:g} is not meaningful: times are positive, so A/B must be > 0"
    reduction = reduction_of(ratio)
    assert reduction is not None
    b_over_a = 1.0 / ratio
    if abs(ratio - 1.0) < 1e-12:
        return "ratio 1: A and B took the same time (B/A = 1, no reduction)"
    if ratio > 1:
        return (
            f"ratio {ratio:g}: B is faster. B takes {b_over_a:.4f} of A's time, "
            f"a reduction of {reduction * 100:.2f} % (1 - 1/{ratio:g}); "
            f"A takes {(ratio - 1) * 100:.2f} % more time than B."
        )
    return (
        f"ratio {ratio:g}: B is slower. B takes {b_over_a:.4f} of A's time, "
        f"+{(b_over_a - 1) * 100:.2f} % more time (reduction {reduction * 100:.2f} %, "
        f"1 - 1/{ratio:g})."
    )
