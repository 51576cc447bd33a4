"""Percentiles and distributions: the one percentile definition every summary uses.

Linear interpolation (numpy's default). Functions are pure: sequences of floats in,
numbers in the same unit out; ``None`` means "not enough values". Use them through
:mod:`kvlab.analysis.stats`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np
import numpy.typing as npt


def as_array(values: Sequence[float] | npt.ArrayLike) -> npt.NDArray[np.float64]:
    """One-dimensional float64 copy of ``values``; refuses NaN and infinities."""
    arr = np.asarray(values, dtype=np.float64).reshape(-1)
    if not np.all(np.isfinite(arr)):
        raise ValueError("values contain NaN or infinity; drop or fix those rows first")
    return arr


def percentile(values: Sequence[float], q: float) -> float | None:
    """The ``q``-th percentile (q in [0, 100]) by linear interpolation; None if empty.

    Linear interpolation between closest ranks is numpy's default ("linear", type 7
    in Hyndman & Fan): p50 of [1, 2, 3, 4] is 2.5, p95 of 1..100 is 95.05.
    """
    if not 0.0 <= q <= 100.0:
        raise ValueError(f"percentile q must be within [0, 100], got {q}")
    arr = as_array(values)
    if arr.size == 0:
        return None
    return float(np.percentile(arr, q))


def weighted_percentile(values: Sequence[float], weights: Sequence[float],
                        q: float) -> float | None:
    """GuideLLM's percentile: the smallest value whose cumulative weight share reaches
    q / 100, without interpolation; None if empty or the weights sum to 0.

    Used only by the ``guidellm`` definition set (analysis.definitions), to report what
    GuideLLM would: p50 of [1, 2, 3, 4] with equal weights is 2 (linear gives 2.5).
    Follows ``Percentiles.from_pdf`` in guidellm/schemas/base/statistics.py (0.8.1).
    """
    if not 0.0 <= q <= 100.0:
        raise ValueError(f"percentile q must be within [0, 100], got {q}")
    arr, w = as_array(values), as_array(weights)
    if arr.size != w.size:
        raise ValueError(f"{arr.size} values but {w.size} weights")
    if arr.size == 0 or w.sum() <= 0:
        return None
    if np.any(w < 0):
        raise ValueError("weights must be non-negative")
    # GuideLLM's arithmetic, rounding included: equal values merged, weights normalised
    # first and then cumulated (so with 20 equal weights the 10th share sums to just
    # under 0.5, and its median is the 11th value).
    unique, inverse = np.unique(arr, return_inverse=True)
    merged = np.zeros_like(unique)
    np.add.at(merged, inverse, w)
    keep = merged > 0
    unique, merged = unique[keep], merged[keep]
    cdf = np.cumsum(merged / merged.sum())
    index = min(int(np.searchsorted(cdf, q / 100.0, side="left")), unique.size - 1)
    return float(unique[index])


@dataclass(frozen=True)
class Distribution:
    """Summary of one metric over rows, in the metric's unit.

    ``median`` and ``p50`` are the same number (both names are used in reports).
    ``std`` is the sample standard deviation (n - 1 denominator): None below 2 values.
    Every float field is None when ``count`` is 0.
    """

    count: int
    mean: float | None
    median: float | None
    p50: float | None
    p95: float | None
    p99: float | None
    min: float | None
    max: float | None
    std: float | None

    def to_dict(self) -> dict[str, int | float | None]:
        """Plain dict for JSON output (keys are the field names)."""
        return asdict(self)


def describe(values: Sequence[float]) -> Distribution:
    """count, mean, median/p50, p95, p99, min, max and sample std of ``values``."""
    arr = as_array(values)
    n = int(arr.size)
    if n == 0:
        return Distribution(0, None, None, None, None, None, None, None, None)
    p50, p95, p99 = (float(x) for x in np.percentile(arr, [50.0, 95.0, 99.0]))
    return Distribution(
        count=n,
        mean=float(arr.mean()),
        median=p50,
        p50=p50,
        p95=p95,
        p99=p99,
        min=float(arr.min()),
        max=float(arr.max()),
        std=float(arr.std(ddof=1)) if n >= 2 else None,
    )
