"""Bootstrap confidence intervals and the verdicts read from them.

How to read the intervals
-------------------------
A 95 % bootstrap interval is a range of values of the statistic compatible with the
rows measured: had the run been repeated many times, about 95 % of such intervals
would contain the true value. It describes uncertainty due to the rows drawn (queries,
timing noise), not systematic error (a busy machine, thermal throttling, a different
build): repeating the run on another day may move it further than its width.

- ``ratio_ci(a, b)`` for times gives the interval of mean_A / mean_B. Above 1 means B
  took less time. ``verdict()`` turns it into "faster", "slower" or "no detectable
  difference" from the interval alone; "no detectable difference" does not mean the
  modes are equal, only that this run cannot tell them apart - look at the width.
- A relative reduction follows from the bounds: 1 - 1/low .. 1 - 1/high.
- When both modes ran the same queries, use ``paired=True``: pairs are resampled
  together, so the spread between short and long queries cancels out and the interval
  gets narrower (often much narrower).
- Intervals of p95/p99 from about 30 rows rest on the two or three largest values;
  treat them as rough, and never compare modes on a p99 interval alone.
- Bootstrap intervals at n = 30 cover a little under their nominal level (about
  92-94 % for a 95 % interval in our simulations); fewer rows, worse coverage.

Use them through :mod:`kvlab.analysis.stats`.
"""

from __future__ import annotations

import inspect
import warnings
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from enum import StrEnum
from typing import Any

import numpy as np
import numpy.typing as npt

from kvlab.analysis.percentiles import as_array

# Below this many values a bootstrap interval is mostly an artefact of the few points
# drawn (and BCa's jackknife has almost nothing to work with): we return None instead.
MIN_BOOTSTRAP_VALUES = 5


@dataclass(frozen=True)
class Interval:
    """A two-sided confidence interval [low, high] in the statistic's unit.

    ``confidence`` is the nominal level (0.95 for a 95 % interval); ``method`` names how
    it was computed: "bca" (bias-corrected and accelerated bootstrap) or "percentile"
    (plain percentile bootstrap, the fallback when BCa is undefined).
    """

    low: float
    high: float
    confidence: float
    method: str

    def __post_init__(self) -> None:
        if not self.low <= self.high:
            raise ValueError(f"interval low {self.low} is above high {self.high}")
        if not 0.0 < self.confidence < 1.0:
            raise ValueError(f"confidence must be within (0, 1), got {self.confidence}")

    def contains(self, x: float) -> bool:
        """True when ``x`` lies within the interval, bounds included."""
        return self.low <= x <= self.high

    def to_dict(self) -> dict[str, float | str]:
        """Plain dict for JSON output."""
        return asdict(self)


# A statistic is vectorised like numpy's reductions: f(array, axis=...) reduces `axis`.
StatisticFn = Callable[..., Any]


def _pct(q: float) -> StatisticFn:
    def stat(x: npt.NDArray[np.float64], axis: int = -1) -> Any:
        return np.percentile(x, q, axis=axis)

    stat.__name__ = f"p{q:g}"
    return stat


_NAMED_STATISTICS: dict[str, StatisticFn] = {
    "mean": np.mean,
    "median": np.median,
    "p95": _pct(95.0),
    "p99": _pct(99.0),
}


def _statistic(statistic: str | StatisticFn) -> StatisticFn:
    if callable(statistic):
        return statistic
    try:
        return _NAMED_STATISTICS[statistic]
    except KeyError:
        names = ", ".join(_NAMED_STATISTICS)
        raise ValueError(
            f"unknown statistic {statistic!r}; use one of {names} or a callable f(x, axis)"
        ) from None


def _scipy_bootstrap(
    data: tuple[npt.NDArray[np.float64], ...],
    statistic: StatisticFn,
    *,
    paired: bool,
    confidence: float,
    resamples: int,
    seed: int,
) -> Interval:
    """BCa interval from scipy; the percentile interval where BCa is undefined."""
    from scipy import stats  # heavy import (about a second): only when intervals are asked

    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be within (0, 1), got {confidence}")
    if resamples < 1:
        raise ValueError(f"resamples must be at least 1, got {resamples}")
    params = inspect.signature(stats.bootstrap).parameters
    seed_kw = "rng" if "rng" in params else "random_state"  # scipy >= 1.15 renamed it
    for method in ("BCa", "percentile"):
        with warnings.catch_warnings():
            # BCa on degenerate data (all values equal, heavy ties under a median)
            # warns and yields NaN; that is exactly the case we handle by falling back.
            warnings.simplefilter("ignore", RuntimeWarning)
            warnings.simplefilter("ignore", stats.DegenerateDataWarning)
            res = stats.bootstrap(
                data,
                statistic,
                n_resamples=resamples,
                vectorized=True,
                paired=paired,
                confidence_level=confidence,
                method=method,
                **{seed_kw: np.random.default_rng(seed)},
            )
        low, high = float(res.confidence_interval.low), float(res.confidence_interval.high)
        if low > high and np.isclose(low, high, rtol=1e-12, atol=0.0):
            low = high  # constant resamples: the two quantiles differ only by rounding
        if np.isfinite(low) and np.isfinite(high):
            return Interval(low, high, confidence, method.lower())
    raise ValueError(
        "the bootstrap produced no finite interval; check that the statistic is finite "
        "on every resample (a ratio needs a denominator that is never 0)"
    )


def bootstrap_ci(
    values: Sequence[float],
    statistic: str | StatisticFn = "mean",
    *,
    confidence: float = 0.95,
    resamples: int = 2000,
    seed: int = 0,
) -> Interval | None:
    """Bootstrap confidence interval of ``statistic`` over ``values``; None if too few.

    ``statistic`` is "mean", "median", "p95", "p99" or a vectorised callable
    ``f(x, axis=-1)`` like ``np.mean``. Needs at least ``MIN_BOOTSTRAP_VALUES`` values.

    Method: scipy.stats.bootstrap with BCa (bias-corrected and accelerated). Latencies
    are right-skewed; BCa corrects for skew and bias of the statistic and its coverage
    is closer to nominal than the plain percentile bootstrap at the sample sizes we
    see (about 30). BCa is undefined on degenerate data (all values equal, or a median
    whose jackknife values all tie); there we fall back to the percentile bootstrap
    and say so in ``Interval.method``. The same ``seed`` gives the same interval.

    Intervals of p95/p99 from a few dozen values lean on the few largest values: read
    them as rough (with n = 30, p99 is interpolated between the two largest values).
    """
    arr = as_array(values)
    if arr.size < MIN_BOOTSTRAP_VALUES:
        return None
    return _scipy_bootstrap(
        (arr,),
        _statistic(statistic),
        paired=False,
        confidence=confidence,
        resamples=resamples,
        seed=seed,
    )


def ratio_ci(
    a: Sequence[float],
    b: Sequence[float],
    statistic: str | StatisticFn = "mean",
    *,
    paired: bool = False,
    confidence: float = 0.95,
    resamples: int = 2000,
    seed: int = 0,
) -> Interval | None:
    """Bootstrap interval of statistic(a) / statistic(b); None if either has too few.

    Independent samples (``paired=False``): a and b are resampled separately, each
    needing ``MIN_BOOTSTRAP_VALUES`` values. Paired samples (``paired=True``, the same
    queries measured in both modes, a[i] and b[i] being the same query): pairs are
    resampled together, which removes the query-to-query spread from the interval;
    a and b must then have equal lengths. The ratio is of the statistics (mean_A /
    mean_B as in the design's "ratio A/B"), never the mean of per-row ratios.

    Values must be positive (times, rates): a ratio of signed values has no reading.
    Method as in ``bootstrap_ci`` (BCa, percentile fallback).
    """
    xa, xb = as_array(a), as_array(b)
    if paired and xa.size != xb.size:
        raise ValueError(
            f"paired samples need equal lengths, got {xa.size} and {xb.size}; "
            "pair rows by query first or use paired=False"
        )
    if min(xa.size, xb.size) < MIN_BOOTSTRAP_VALUES:
        return None
    if np.any(xa <= 0) or np.any(xb <= 0):
        raise ValueError("ratio_ci needs positive values (times or rates); got a value <= 0")
    stat = _statistic(statistic)

    def ratio(x: npt.NDArray[np.float64], y: npt.NDArray[np.float64], axis: int = -1) -> Any:
        return stat(x, axis=axis) / stat(y, axis=axis)

    return _scipy_bootstrap(
        (xa, xb),
        ratio,
        paired=paired,
        confidence=confidence,
        resamples=resamples,
        seed=seed,
    )


# ---------------------------------------------------------------------------- verdicts


class Verdict(StrEnum):
    """What a ratio interval says about mode B against mode A."""

    FASTER = "faster"
    SLOWER = "slower"
    NO_DIFFERENCE = "no detectable difference"


def verdict(interval: Interval) -> Verdict:
    """Verdict on B from the interval of a ratio of TIMES A/B (e.g. mean e2e_A / e2e_B).

    - interval entirely above 1: A took longer, so B is FASTER;
    - interval entirely below 1: B took longer, so B is SLOWER;
    - interval containing 1 (bounds included): NO_DIFFERENCE detectable at this
      confidence - which is not proof that the modes are equal.

    Decided from the interval only, never from the point estimate. For a ratio of
    rates (tokens/s) the sides swap: pass the ratio B/A instead.
    """
    if interval.low > 1.0:
        return Verdict.FASTER
    if interval.high < 1.0:
        return Verdict.SLOWER
    return Verdict.NO_DIFFERENCE
