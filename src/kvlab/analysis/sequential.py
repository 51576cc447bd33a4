"""A sequential A/B test of one metric: stop as soon as the verdict is decided.

``kvlab ab`` sends a baseline A and a candidate B the same prompts in ABBA blocks and,
after each block, asks whether B's ``metric`` is above A's by more than a margin.
Each block gives one figure, ``d = ln(mean_B / mean_A)`` over its rows
(:func:`block_log_ratio`): A and B share the block's prompts and its moment, so what
changes between blocks (the machine's load, caches, drift) cancels inside ``d``. With
``theta`` the true mean of ``d`` and ``delta = ln(1 + margin)``, two one-sided tests
run side by side:

- *regress* when ``(mean d - delta) / se`` crosses the regress bound: B is slower
  than the margin. Its error, ``P(regress | theta <= delta)``, is at most ``alpha``
  (at ``theta = delta``; an A/A pair, ``theta = 0``, far less).
- *pass* when ``(delta - mean d) / se`` crosses the pass bound: B is not slower than
  the margin. ``P(pass | theta >= delta)`` is at most ``beta``.

The bounds are a group-sequential design (Jennison & Turnbull, *Group Sequential
Methods*, ch. 7 and 19): each test spends its error over the looks with Lan and
DeMets' O'Brien-Fleming-like spending function, ``2 - 2 Phi(z_(1 - level/2) /
sqrt(t))`` at information fraction ``t`` = blocks / the budget's blocks, so an early
look needs overwhelming evidence (a 3x slowdown stops at the first look; an A/A pair
is not called on a lucky start), and the last look is close to a fixed-size test at
the full ``alpha``. The bounds are computed exactly for the normal case by the
recursive integration of the score's sub-density over the looks (:func:`bounds`);
each test's bounds ignore the other's (non-binding), so each error stays within its
level whatever the other does. The two cannot both be crossed at one look (they lie
on either side of ``delta``). ``se`` comes from the blocks themselves
(``sd(d) / sqrt(n)``); its estimation is paid for by reading each normal bound at
the same tail probability of Student's t with ``n - 1`` degrees of freedom, and by
a first look only after ``min_blocks`` blocks. ``tests/analysis/test_sequential.py``
measures both error rates on simulated blocks.

When the budget's last block is spent without a crossing the verdict is
*inconclusive*: the difference is closer to the margin than the budget can resolve.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from functools import lru_cache
from typing import Any, Literal

import numpy as np
from scipy import optimize, stats

from kvlab.errors import ConfigError

Verdict = Literal["pass", "regress", "inconclusive", "continue"]
_GRID = 601  # points of the score's sub-density between looks
_TAIL_SD = 9.0  # the grid reaches this many standard deviations below 0


@dataclass(frozen=True)
class Design:
    """A sequential test's declared error rates and budget.

    ``margin``: B/A above ``1 + margin`` is a regression (0.05: 5 %). ``alpha``: the
    largest chance of *regress* when B is no slower than the margin; ``beta``: the
    largest chance of *pass* when B is slower than the margin. ``max_blocks``: the
    budget, in blocks; ``min_blocks``: the first look (>= 3: a spread needs blocks)."""

    margin: float = 0.05
    alpha: float = 0.05
    beta: float = 0.05
    max_blocks: int = 40
    min_blocks: int = 4

    def __post_init__(self) -> None:
        if not 0.0 <= self.margin < 10.0:
            raise ConfigError(f"margin {self.margin:g}: give a fraction in [0, 10), e.g. "
                              "0.05 for 5 %")
        for name, level in (("alpha", self.alpha), ("beta", self.beta)):
            if not 0.0 < level < 0.5:
                raise ConfigError(f"{name} {level:g}: give an error rate in (0, 0.5), "
                                  "e.g. 0.05")
        if self.min_blocks < 3:
            raise ConfigError(f"min_blocks {self.min_blocks}: the first look needs at "
                              "least 3 blocks (a spread of the blocks' ratios)")
        if self.max_blocks < self.min_blocks:
            raise ConfigError(f"the budget ({self.max_blocks} blocks) is below the first "
                              f"look ({self.min_blocks} blocks): give a larger budget")

    @property
    def delta(self) -> float:
        """The margin on the log scale: ln(1 + margin)."""
        return math.log1p(self.margin)

    def regress_bound(self, blocks: int) -> float:
        """The t bound ``(mean d - delta) / se`` must cross at ``blocks`` blocks."""
        return _t_bound(self.alpha, self.min_blocks, self.max_blocks, blocks)

    def pass_bound(self, blocks: int) -> float:
        """The t bound ``(delta - mean d) / se`` must cross at ``blocks`` blocks."""
        return _t_bound(self.beta, self.min_blocks, self.max_blocks, blocks)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Look:
    """The test after ``blocks`` blocks: ``verdict`` (``continue`` while neither bound
    is crossed and budget is left), B/A as ``exp(mean d)``, the interval of B/A the
    two bounds leave (``low``..``high``: regress when ``low`` > 1 + margin, pass when
    ``high`` < 1 + margin) and ``detectable``: the departure from the margin (a
    fraction of B/A) this many blocks decides with probability ``1 - beta``."""

    blocks: int
    verdict: Verdict
    b_over_a: float
    low: float
    high: float
    se: float
    regress_bound: float
    pass_bound: float
    detectable: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def spent(level: float, t: float) -> float:
    """Lan-DeMets O'Brien-Fleming-like spending: the error spent by information
    fraction ``t`` (0..1) of a test of total error ``level``."""
    if t <= 0.0:
        return 0.0
    z = float(stats.norm.isf(level / 2.0))
    return float(2.0 * stats.norm.sf(z / math.sqrt(min(t, 1.0))))


def bounds(level: float, fractions: Sequence[float]) -> list[float]:
    """One-sided z bounds at looks of information ``fractions`` (increasing, the last
    1.0) such that a standard Brownian score first crosses look k's bound with
    probability ``spent(t_k) - spent(t_(k-1))`` under the null: the exact normal
    group-sequential bounds, by recursive integration over the looks."""
    out: list[float] = []
    grid = weights = density = np.zeros(0)
    previous_t = previous_spent = 0.0
    for t in fractions:
        increment = spent(level, t) - previous_spent
        previous_spent += increment
        step = t - previous_t
        if not out:  # the first look: the score is N(0, t)
            z = float(stats.norm.isf(max(increment, 1e-300)))
            grid, weights, density = _start(t, z)
        else:
            mass = weights * density
            z = _solve(grid, mass, step, increment, t)
            grid, weights, density = _advance(grid, mass, step, t, z)
        out.append(z)
        previous_t = t
    return out


def _start(t: float, z: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Grid, quadrature weights and density of the score at the first look, below the
    bound ``z``."""
    grid, weights = _grid(t, z)
    sd = math.sqrt(t)
    return grid, weights, stats.norm.pdf(grid / sd) / sd


def _grid(t: float, z: float) -> tuple[np.ndarray, np.ndarray]:
    """A uniform grid of the score at fraction ``t`` up to the bound ``z * sqrt(t)``,
    with Simpson's weights."""
    sd = math.sqrt(t)
    top = min(z, 12.0) * sd
    grid = np.linspace(-_TAIL_SD * sd, top, _GRID)
    h = (top + _TAIL_SD * sd) / (_GRID - 1)
    weights = np.full(_GRID, 2.0)
    weights[1::2] = 4.0
    weights[0] = weights[-1] = 1.0
    return grid, weights * h / 3.0


def _solve(grid: np.ndarray, mass: np.ndarray, step: float, increment: float,
           t: float) -> float:
    """The z bound at fraction ``t`` whose first-crossing probability is
    ``increment``, from the continuation mass ``mass`` at ``grid``."""
    sd = math.sqrt(step)

    def crossing(z: float) -> float:
        return float(np.sum(mass * stats.norm.sf((z * math.sqrt(t) - grid) / sd))) \
            - increment

    if increment <= 1e-14 or crossing(12.0) >= 0.0:  # nothing (or all but nothing) spent
        return 12.0
    return float(optimize.brentq(crossing, -12.0, 12.0, xtol=1e-10))


def _advance(grid: np.ndarray, mass: np.ndarray, step: float, t: float, z: float
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The score's sub-density at fraction ``t`` below the bound ``z``, from the
    previous look's continuation mass."""
    new, weights = _grid(t, z)
    sd = math.sqrt(step)
    kernel = stats.norm.pdf((new[:, None] - grid[None, :]) / sd) / sd  # (new, old)
    return new, weights, kernel @ mass


@lru_cache(maxsize=64)
def _bounds_of(level: float, min_blocks: int, max_blocks: int) -> tuple[float, ...]:
    fractions = [k / max_blocks for k in range(min_blocks, max_blocks + 1)]
    return tuple(bounds(level, fractions))


def _bound(level: float, min_blocks: int, max_blocks: int, blocks: int) -> float:
    """The z bound at ``blocks`` blocks of a design with looks min..max blocks."""
    if not min_blocks <= blocks <= max_blocks:
        raise ValueError(f"no look at {blocks} blocks (looks: {min_blocks}..{max_blocks})")
    return _bounds_of(level, min_blocks, max_blocks)[blocks - min_blocks]


@lru_cache(maxsize=4096)
def _t_bound(level: float, min_blocks: int, max_blocks: int, blocks: int) -> float:
    """The normal bound at ``blocks`` read at the same tail probability of Student's t
    (n - 1 df): the price of a spread estimated from ``blocks`` blocks."""
    z = _bound(level, min_blocks, max_blocks, blocks)
    return float(stats.t.isf(stats.norm.sf(z), blocks - 1))


@lru_cache(maxsize=4096)
def _t_quantile(level: float, df: int) -> float:
    return float(stats.t.isf(level, df))


def block_log_ratio(a: Sequence[float], b: Sequence[float]) -> float | None:
    """``ln(mean(b) / mean(a))`` of one block's values on each side; None when a side
    has no positive mean (no valid row)."""
    if not a or not b:
        return None
    mean_a, mean_b = sum(a) / len(a), sum(b) / len(b)
    if mean_a <= 0.0 or mean_b <= 0.0:
        return None
    return math.log(mean_b / mean_a)


def look(design: Design, ratios: Sequence[float]) -> Look:
    """The test on the blocks' log ratios so far (``len(ratios)`` >= ``min_blocks``)."""
    n = len(ratios)
    if n < design.min_blocks:
        raise ValueError(f"the first look is at {design.min_blocks} blocks, got {n}")
    n = min(n, design.max_blocks)
    values = np.asarray(ratios[:n], dtype=float)
    mean = float(values.mean())
    se = max(float(values.std(ddof=1)) / math.sqrt(n), 1e-12)
    up, down = design.regress_bound(n), design.pass_bound(n)
    delta = design.delta
    verdict: Verdict = "continue"
    if (mean - delta) / se > up:
        verdict = "regress"
    elif (delta - mean) / se > down:
        verdict = "pass"
    elif n >= design.max_blocks:
        verdict = "inconclusive"
    detect = (up + _t_quantile(design.beta, n - 1)) * se
    return Look(n, verdict, math.exp(mean), math.exp(mean - up * se),
                math.exp(mean + down * se), se, up, down, math.expm1(detect))


def run_test(design: Design, ratios: Sequence[float]) -> Look:
    """The look that ends a sequence of blocks: the first one that decides, else the
    last (``continue`` while the budget is not spent). Simulations use it."""
    last: Look | None = None
    for n in range(design.min_blocks, min(len(ratios), design.max_blocks) + 1):
        last = look(design, ratios[:n])
        if last.verdict != "continue":
            return last
    if last is None:
        raise ValueError(f"the first look is at {design.min_blocks} blocks, got "
                         f"{len(ratios)}")
    return last
