"""Aggregates for benchmark summaries: percentiles, distributions, bootstrap intervals.

Every summary in kvlab goes through this module, so that one percentile definition
(linear interpolation, numpy's default) serves every aggregate. Functions are pure:
they take sequences of floats (milliseconds, tokens/s, ...) and return numbers; the
unit of the output is the unit of the input. ``None`` means "not enough values".

Percentiles and distributions are :mod:`kvlab.analysis.percentiles`; bootstrap intervals
and verdicts, with how to read them, :mod:`kvlab.analysis.intervals`. Import them from here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kvlab.analysis.intervals import (
    MIN_BOOTSTRAP_VALUES,
    Interval,
    Verdict,
    bootstrap_ci,
    ratio_ci,
    verdict,
)
from kvlab.analysis.percentiles import Distribution, describe, percentile, weighted_percentile

__all__ = [
    "MIN_BOOTSTRAP_VALUES",
    "Distribution",
    "Interval",
    "Verdict",
    "bootstrap_ci",
    "describe",
    "percentile",
    "ratio_ci",
    "summarize_metric",
    "verdict",
    "weighted_percentile",
]


def summarize_metric(
    values: Sequence[float],
    *,
    confidence: float = 0.95,
    resamples: int = 2000,
    seed: int = 0,
) -> dict[str, Any]:
    """describe() fields plus bootstrap intervals of mean, median, p95 and p99.

    Returns ``{count, mean, median, p50, p95, p99, min, max, std, "intervals": {"mean":
    {low, high, confidence, method} | None, "median": ..., "p95": ..., "p99": ...}}``,
    JSON-ready; an interval is None below ``MIN_BOOTSTRAP_VALUES`` values.
    """
    summary: dict[str, Any] = dict(describe(values).to_dict())
    intervals: dict[str, dict[str, float | str] | None] = {}
    for name in ("mean", "median", "p95", "p99"):
        ci = bootstrap_ci(values, name, confidence=confidence, resamples=resamples, seed=seed)
        intervals[name] = ci.to_dict() if ci is not None else None
    summary["intervals"] = intervals
    return summary
