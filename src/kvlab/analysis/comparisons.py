"""A/B comparisons: ratios of mean times with a bootstrap interval and a verdict.

Comparisons are only ever between two modes in the same capacity and load, as ratios of
mean times A/B with a bootstrap 95 % interval and the verdict it supports
(``stats.verdict``): above 1 means B took less time. Each side is a group's
:class:`~kvlab.analysis.valid_rows.ValidRows`: the comparison reads its valid rows
and says what each side stands on (n valid of m, refused by class).

Pairing: rows of A and B are matched on (query, repetition). When at least
``MIN_BOOTSTRAP_VALUES`` queries are valid in both modes, the ratio and its interval
are computed over those matched queries with a paired bootstrap; otherwise over all
valid rows of each mode, resampled independently. A pair of modes whose prompts
differ for the same query is refused, never compared.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from kvlab.analysis.metric import Metric
from kvlab.analysis.stats import MIN_BOOTSTRAP_VALUES, Interval, Verdict, ratio_ci, verdict
from kvlab.analysis.summary_metrics import COMPARED_METRICS
from kvlab.analysis.valid_rows import RowCount, ValidRows
from kvlab.analysis.validate import Reason, Violation, check_pairs
from kvlab.labels import load_order
from kvlab.rundir import Record

__all__ = ["COMPARED_METRICS", "MetricComparison", "PairComparison", "compare_metric",
           "compare_rows", "compare_run", "default_pairs"]


# ------------------------------------------------------------------------- comparisons


@dataclass
class MetricComparison:
    """Ratio of means A/B of one time metric, its interval and the verdict on B."""

    metric: str
    mean_a: float
    mean_b: float
    n: int  # pairs when paired, else min(n_a, n_b)
    paired: bool
    interval: Interval | None  # None below MIN_BOOTSTRAP_VALUES values, or see note
    note: str | None = None  # why there is no interval, when it is not "too few rows"

    @property
    def ratio(self) -> float:
        return self.mean_a / self.mean_b

    @property
    def reduction(self) -> float:
        """1 − 1/ratio = 1 − B/A: the share of A's time B saves (negative: B slower)."""
        return 1.0 - 1.0 / self.ratio

    @property
    def verdict(self) -> Verdict | None:
        return verdict(self.interval) if self.interval is not None else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "metric": self.metric, "mean_a": self.mean_a, "mean_b": self.mean_b,
            "ratio": self.ratio, "reduction": self.reduction, "n": self.n,
            "paired": self.paired,
            "interval": self.interval.to_dict() if self.interval else None,
            "verdict": str(self.verdict) if self.verdict else None,
            "note": self.note,
        }


@dataclass
class PairComparison:
    """Mode B against mode A at one capacity and load; ``refused`` says why not.
    ``count_a`` and ``count_b``: what each side stands on (n valid of m)."""

    mode_a: str
    mode_b: str
    capacity: int
    load: str | None
    count_a: RowCount
    count_b: RowCount
    metrics: list[MetricComparison] = field(default_factory=list)
    refused: str | None = None  # one line; metrics is empty when set
    pair_violations: list[Violation] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "mode_a": self.mode_a, "mode_b": self.mode_b, "capacity": self.capacity,
            "load": self.load, "refused": self.refused,
            "count_a": self.count_a.to_dict(), "count_b": self.count_b.to_dict(),
            "metrics": [c.to_dict() for c in self.metrics],
            "pair_violations": [v.to_dict() for v in self.pair_violations],
        }


_FATAL_PAIR_REASONS = (Reason.PROMPT_DIFFERS, Reason.PROMPT_TOKENS_DIFFER)


def _key(row: Record) -> tuple[str, int]:
    return (row.query_id, row.repetition)


def compare_metric(metric: Metric, rows_a: Sequence[Record], rows_b: Sequence[Record],
                   *, resamples: int = 2000) -> MetricComparison | None:
    """Ratio A/B of one metric over valid rows; paired on matching queries if enough.

    Means use every known value (as the summaries do). A ratio interval needs positive
    values: when some are 0 (a stream that delivered all its tokens in one chunk has
    an effective ITL of 0) the interval is None and ``note`` says why. None when either
    mean is not positive (no ratio can be read).
    """
    a_by = {_key(r): v for r in rows_a if (v := metric.of(r)) is not None}
    b_by = {_key(r): v for r in rows_b if (v := metric.of(r)) is not None}
    if not a_by or not b_by:
        return None
    common = sorted(a_by.keys() & b_by.keys())
    paired = len(common) >= MIN_BOOTSTRAP_VALUES
    if paired:
        xa, xb = [a_by[k] for k in common], [b_by[k] for k in common]
    else:
        xa, xb = list(a_by.values()), list(b_by.values())
    mean_a, mean_b = sum(xa) / len(xa), sum(xb) / len(xb)
    if mean_a <= 0 or mean_b <= 0:
        return None
    note = None
    interval = None
    if min(xa) <= 0 or min(xb) <= 0:
        note = "some values are 0: no ratio interval"
    else:
        interval = ratio_ci(xa, xb, "mean", paired=paired, resamples=resamples)
    return MetricComparison(
        metric=metric.name, mean_a=mean_a, mean_b=mean_b,
        n=len(common) if paired else min(len(xa), len(xb)), paired=paired, interval=interval,
        note=note,
    )


def compare_rows(mode_a: str, a: ValidRows, mode_b: str, b: ValidRows, *, capacity: int,
                 load: str | None = None, resamples: int = 2000,
                 metrics: Sequence[Metric] = COMPARED_METRICS) -> PairComparison:
    """Compare the valid rows of two groups of one capacity and load (A and B may be
    other runs); pairs are checked over every row each side sent. ``metrics``: the
    times compared (kvlab's, or a tool's: analysis.definition_metrics)."""
    pair_violations = check_pairs(mode_a, a.sent, mode_b, b.sent)
    result = PairComparison(mode_a, mode_b, capacity, load, a.count, b.count,
                            pair_violations=pair_violations)
    fatal = [v for v in pair_violations if v.reason in _FATAL_PAIR_REASONS]
    if fatal:
        result.refused = (f"prompts differ for {len(fatal)} "
                          f"quer{'y' if len(fatal) == 1 else 'ies'}; first: {fatal[0]}")
        return result
    if not a.rows or not b.rows:
        result.refused = f"no valid row in {mode_a if not a.rows else mode_b}"
        return result
    for metric in metrics:
        found = compare_metric(metric, a.rows, b.rows, resamples=resamples)
        if found is not None:
            result.metrics.append(found)
    return result


def default_pairs(valid: ValidRows) -> list[tuple[str, str]]:
    """Every pair of modes (A before B in order of first appearance)."""
    modes = valid.modes()
    return [(a, b) for i, a in enumerate(modes) for b in modes[i + 1:]]


def compare_run(valid: ValidRows, pairs: Sequence[tuple[str, str]] | None = None,
                *, resamples: int = 2000) -> list[PairComparison]:
    """Comparisons of ``pairs`` (default: every pair) at each capacity and load both ran."""
    by = valid.groups()
    cells = sorted({(k[1], k[2]) for k in by}, key=lambda c: (c[0], load_order(c[1])))
    out: list[PairComparison] = []
    for capacity, load in cells:
        for a, b in pairs if pairs is not None else default_pairs(valid):
            rows_a, rows_b = by.get((a, capacity, load)), by.get((b, capacity, load))
            if rows_a and rows_b:
                out.append(compare_rows(a, rows_a, b, rows_b, capacity=capacity, load=load,
                                        resamples=resamples))
    return out
