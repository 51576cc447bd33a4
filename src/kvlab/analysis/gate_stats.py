"""The gate's statistics: a hierarchical bootstrap of B/A, Holm, the smallest effect seen.

Each side of a comparison is one or more runs, each a sample of rows. Rows within a run
vary (prompts, output lengths, the scheduler), and runs vary too (the machine's load,
caches, order): an interval over the rows of one run sees only the first kind, so the
tighter the rows, the more often an unchanged configuration "regresses" (issue 37).

:func:`hierarchical_ratio` resamples both levels, vectorised with numpy:

- runs: a side with at least ``MIN_RUNS_TO_RESAMPLE`` runs has them resampled with
  replacement (the between-run variation read from the runs themselves);
- a side with fewer runs keeps them, and the between-run part comes from a noise
  floor (``between``: the standard deviation of log(run mean) between identical runs,
  measured beforehand by A/A runs, :func:`between_run_sd`), drawn as a log-normal
  factor of each side's mean. Without one the interval covers rows only;
- rows: within each run, resampled with replacement. When every run of both sides has
  the same keys (query, repetition), the rows are paired: one draw of keys is applied
  to every run of both sides, so the queries' own spread (long and short answers)
  cancels in the ratio.

The estimate is the ratio of the sides' means (each side's mean: the mean of its runs'
means, runs weighted equally); its standard error is the bootstrap's on the log scale,
and tests and intervals read a smooth approximation of it (so Holm works at any family
size). Resampling K runs sees their spread as a population of K, which is narrower than
the runs' own by (K - 1) / K, and the spread itself is known from K values only: where
runs were resampled, the variance is widened by K / (K - 1) and tests read Student's t
with Welch's degrees of freedom from the runs' log means (a normal where a floor
stands in for the runs). Without that, A/A pairs of 3 runs a side called B slower at
a declared 5 % about 11 % of the time. :func:`holm` adjusts p-values for a family of checks;
:func:`detectable` is the smallest slowdown a check had 80 % power to call.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np
import numpy.typing as npt

Array = npt.NDArray[np.float64]
MIN_RUNS_TO_RESAMPLE = 3  # a side with fewer runs takes its between-run part from a floor
MIN_PAIRED_KEYS = 10  # fewer keys common to every run: rows resampled without pairing
RESAMPLES = 2000
_NORMAL = NormalDist()


@dataclass(frozen=True)
class RatioEstimate:
    """B/A of the means and the bootstrap's standard error of log(B/A).

    ``runs_a``/``runs_b``: runs per side; ``paired``: rows paired on keys;
    ``between``: where the between-run part came from (``"runs"``, ``"floor"``, or
    ``"none"``: rows only); ``df``: degrees of freedom of Student's t that tests and
    intervals read (infinite: the normal)."""

    ratio: float
    log_se: float
    runs_a: int
    runs_b: int
    paired: bool
    between: str
    df: float = math.inf

    def interval(self, level: float = 0.95) -> tuple[float, float]:
        """The two-sided ``level`` interval of B/A (normal on the log scale)."""
        z = _quantile(0.5 + level / 2.0, self.df)
        centre = math.log(self.ratio)
        return math.exp(centre - z * self.log_se), math.exp(centre + z * self.log_se)

    def p_slower_than(self, limit: float) -> float:
        """One-sided p-value against "B/A <= limit" (small: B is slower than ``limit``)."""
        return 1.0 - self._cdf(limit)

    def p_faster_than(self, limit: float) -> float:
        """One-sided p-value against "B/A >= limit" (small: B is below ``limit``)."""
        return self._cdf(limit)

    def _cdf(self, limit: float) -> float:
        """P(Z <= z) where z is how many standard errors log(B/A) is above log(limit)."""
        if self.log_se <= 0.0:
            return 1.0 if self.ratio > limit else 0.0
        return _cdf((math.log(self.ratio) - math.log(limit)) / self.log_se, self.df)


def _quantile(p: float, df: float) -> float:
    """The ``p`` quantile of Student's t with ``df`` degrees of freedom (the normal's
    when infinite)."""
    if math.isinf(df):
        return _NORMAL.inv_cdf(p)
    from scipy.stats import t

    return float(t.ppf(p, df))


def _cdf(x: float, df: float) -> float:
    """P(T <= x), T Student's t with ``df`` degrees of freedom (normal when infinite)."""
    if math.isinf(df):
        return _NORMAL.cdf(x)
    from scipy.stats import t

    return float(t.cdf(x, df))


def _welch_df(sides: Sequence[Sequence[Array]]) -> float:
    """Welch-Satterthwaite degrees of freedom of the difference of the sides' mean log
    run means (each side: its runs' values); infinite when no run mean varies."""
    terms = []
    for runs in sides:
        logs = np.log([r.mean() for r in runs])
        terms.append((float(np.var(logs, ddof=1)) / logs.size, logs.size - 1))
    total = sum(v for v, _ in terms)
    spread = sum(v * v / df for v, df in terms)
    return total * total / spread if spread > 0.0 else math.inf


def _inner_means(values: Array, resamples: int, rng: np.random.Generator,
                 index: npt.NDArray[np.intp] | None) -> Array:
    """``resamples`` bootstrap means of one run's values (``index``: shared draws)."""
    if index is None:
        index = rng.integers(0, values.size, size=(resamples, values.size))
    return np.asarray(values[index].mean(axis=1), dtype=np.float64)


def _side_draws(runs: Sequence[Array], between: float, resamples: int,
                rng: np.random.Generator, index: npt.NDArray[np.intp] | None) -> Array:
    """``resamples`` bootstrap draws of one side's mean (mean of run means)."""
    inner = np.stack([_inner_means(r, resamples, rng, index) for r in runs])  # (K, R)
    k = len(runs)
    if k >= MIN_RUNS_TO_RESAMPLE:
        pick = rng.integers(0, k, size=(resamples, k))
        cols = np.arange(resamples)[:, None]
        if index is None:  # unpaired: each slot its own row draw of the run it picked
            cols = np.stack([rng.permutation(resamples) for _ in range(k)], axis=1)
        draws = inner[pick, cols].mean(axis=1)
    else:
        draws = inner.mean(axis=0)
        if between > 0.0:
            draws = draws * np.exp(rng.normal(0.0, between / math.sqrt(k), size=resamples))
    return np.asarray(draws, dtype=np.float64)


def hierarchical_ratio(a_runs: Sequence[Sequence[float] | Array],
                       b_runs: Sequence[Sequence[float] | Array], *,
                       between: float | None = None, keys_a: Sequence[Sequence[object]] = (),
                       keys_b: Sequence[Sequence[object]] = (), resamples: int = RESAMPLES,
                       seed: int = 0) -> RatioEstimate | None:
    """B/A of the means of a metric over several runs per side, with its bootstrap error.

    ``a_runs``/``b_runs``: each run's values (ms, one per valid row). ``between``: the
    noise floor, sd of log(run mean) between identical runs, used by a side of fewer
    than ``MIN_RUNS_TO_RESAMPLE`` runs (None: none known, rows only). ``keys_*``: each
    run's row keys in the order of its values; when every run holds the same keys
    (at least ``MIN_PAIRED_KEYS``) rows are paired across runs and sides. None when a
    side has no value or a mean that is not positive."""
    a = [np.asarray(r, dtype=np.float64) for r in a_runs if len(r)]
    b = [np.asarray(r, dtype=np.float64) for r in b_runs if len(r)]
    if not a or not b:
        return None
    mean_a = float(np.mean([r.mean() for r in a]))
    mean_b = float(np.mean([r.mean() for r in b]))
    if mean_a <= 0.0 or mean_b <= 0.0:
        return None
    rng = np.random.default_rng(seed)
    paired = False
    index = None
    if keys_a and keys_b and len(keys_a) == len(a) and len(keys_b) == len(b):
        aligned = _aligned([*a, *b], [*keys_a, *keys_b])
        if aligned is not None:
            a, b = aligned[:len(a)], aligned[len(a):]
            paired = True
            index = rng.integers(0, a[0].size, size=(resamples, a[0].size))
    floor = between or 0.0
    draws_a = _side_draws(a, floor, resamples, rng, index)
    draws_b = _side_draws(b, floor, resamples, rng, index)
    ok = (draws_a > 0) & (draws_b > 0)
    log_ratio = np.log(draws_b[ok]) - np.log(draws_a[ok])
    few = min(len(a), len(b)) < MIN_RUNS_TO_RESAMPLE
    source = "runs" if not few else ("floor" if between is not None else "none")
    log_se = float(np.std(log_ratio, ddof=1))
    df = math.inf
    if not few:  # both sides' runs resampled: a population of K widened to a sample
        k = min(len(a), len(b))
        log_se *= math.sqrt(k / (k - 1))
        df = _welch_df([a, b])
    return RatioEstimate(mean_b / mean_a, log_se, len(a), len(b), paired, source, df)


def _aligned(runs: list[Array], keys: Sequence[Sequence[object]]) -> list[Array] | None:
    """Every run's values in the order of the keys common to all of them (each key once
    per run), or None when fewer than ``MIN_PAIRED_KEYS`` are common."""
    maps = []
    for values, run_keys in zip(runs, keys, strict=True):
        if len(run_keys) != values.size:
            return None
        maps.append(dict(zip(run_keys, values.tolist(), strict=True)))
    common = set(maps[0]).intersection(*maps[1:])
    if len(common) < MIN_PAIRED_KEYS:
        return None
    order = sorted(common, key=repr)
    return [np.array([m[k] for k in order], dtype=np.float64) for m in maps]


FLOOR_CONFIDENCE = 0.8  # the floor the gate uses: this one-sided upper bound


def between_run_sd(runs: Sequence[Sequence[float] | Array],
                   upper: float | None = None) -> float | None:
    """The noise floor of identical runs: the sd of log(run mean) beyond what the rows'
    own sampling explains (the variance of the log means less the mean within-run
    variance of a log mean, floored at 0). ``upper``: instead of the estimate, its
    one-sided upper confidence bound at that level (the variance of K log means is
    chi-square with K - 1 degrees of freedom), so a floor from few runs errs wide.
    None below 2 runs with values."""
    arrays = [np.asarray(r, dtype=np.float64) for r in runs if len(r) >= 2]
    arrays = [r for r in arrays if r.mean() > 0]
    if len(arrays) < 2:
        return None
    logs = np.log([r.mean() for r in arrays])
    within = np.mean([r.var(ddof=1) / (r.size * r.mean() ** 2) for r in arrays])
    total = float(np.var(logs, ddof=1))
    if upper is not None:
        from scipy.stats import chi2

        df = len(arrays) - 1
        total = max(total, float(within)) * df / float(chi2.ppf(1.0 - upper, df))
    return float(math.sqrt(max(0.0, total - float(within))))


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values, in the order given: reject check i at
    family-wise error rate alpha when its adjusted p-value is at most alpha."""
    n = len(p_values)
    order = sorted(range(n), key=lambda i: p_values[i])
    adjusted = [1.0] * n
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (n - rank) * p_values[i]))
        adjusted[i] = running
    return adjusted


def detectable(log_se: float, margin: float, alpha: float, checks: int = 1,
               power: float = 0.8, df: float = math.inf) -> float:
    """The smallest slowdown (a fraction: 0.12 = B 12 % slower) that a check with this
    standard error would call a regression with probability ``power``, at the first
    (strictest) Holm level alpha / ``checks``, one-sided (Student's t with ``df``
    degrees of freedom; the normal when infinite)."""
    z = _quantile(1.0 - alpha / max(1, checks), df) + _quantile(power, df)
    return (1.0 + margin) * math.exp(z * log_se) - 1.0
