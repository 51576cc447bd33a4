"""The sequential A/B test's bounds and error rates, on simulated blocks (fixed seeds)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from kvlab.analysis.sequential import (
    Design,
    block_log_ratio,
    bounds,
    look,
    run_test,
    spent,
)
from kvlab.errors import ConfigError

DESIGN = Design(margin=0.05, alpha=0.05, beta=0.05, max_blocks=40, min_blocks=4)


def simulated_blocks(rng: np.random.Generator, slowdown: float, blocks: int, rows: int = 4,
                     drift: float = 0.0, spread: float = 0.2) -> list[float]:
    """Each block's ln(mean_B / mean_A) of ``rows`` lognormal request times per side
    (``spread``: of ln of a row's time), B slower by ``slowdown`` (1.0: A/A), a machine whose speed
    wanders by ``drift`` per block (both sides alike, as ABBA makes it)."""
    out = []
    level = 0.0
    for _ in range(blocks):
        level += rng.normal(0.0, drift)
        a = 100.0 * np.exp(level + rng.normal(0.0, spread, rows))
        b = 100.0 * slowdown * np.exp(level + rng.normal(0.0, spread, rows))
        ratio = block_log_ratio(list(a), list(b))
        assert ratio is not None
        out.append(ratio)
    return out


def rates(slowdown: float, trials: int, seed: int, drift: float = 0.0, spread: float = 0.2
          ) -> tuple[dict[str, int], list[int]]:
    rng = np.random.default_rng(seed)
    counts = {"pass": 0, "regress": 0, "inconclusive": 0}
    spent_blocks = []
    for _ in range(trials):
        end = run_test(DESIGN, simulated_blocks(rng, slowdown, DESIGN.max_blocks,
                                                drift=drift, spread=spread))
        counts[end.verdict] += 1
        spent_blocks.append(end.blocks)
    return counts, spent_blocks


def test_spending_is_the_obrien_fleming_like_function() -> None:
    assert spent(0.05, 1.0) == pytest.approx(0.05)
    assert spent(0.05, 0.0) == 0.0
    assert spent(0.05, 0.25) < 1e-4  # an early look spends almost nothing
    assert spent(0.05, 0.5) < spent(0.05, 0.75) < 0.05


def test_bounds_spend_their_level_under_the_null() -> None:
    """A Brownian score crosses the bounds with probability alpha (Monte Carlo)."""
    fractions = [k / 20 for k in range(4, 21)]
    z = np.array(bounds(0.05, fractions))
    assert np.all(np.diff(z) < 0)  # later looks need less
    assert z[-1] == pytest.approx(1.75, abs=0.15)  # near a fixed test's 1.645 at the end
    rng = np.random.default_rng(7)
    steps = np.diff([0.0, *fractions])
    scores = np.cumsum(rng.normal(size=(100_000, len(fractions))) * np.sqrt(steps), axis=1)
    crossed = (scores / np.sqrt(fractions) > z).any(axis=1).mean()
    assert crossed == pytest.approx(0.05, abs=0.004)


def test_aa_rarely_regresses_and_mostly_passes() -> None:
    counts, spent_blocks = rates(1.0, 400, seed=1, drift=0.05, spread=0.1)
    assert counts["regress"] <= 2  # alpha is 5 % at the margin; at B/A = 1 far less
    assert counts["pass"] >= 380
    noisy, _ = rates(1.0, 400, seed=5, drift=0.05, spread=0.3)  # noisier rows: a budget
    assert noisy["regress"] <= 2 and noisy["inconclusive"] > 0  # too small to pass all
    assert np.median(spent_blocks) < DESIGN.max_blocks


def test_a_slowdown_at_the_margin_keeps_both_errors_near_their_levels() -> None:
    """At B/A = 1 + margin exactly, regress is alpha's error and pass beta's."""
    counts, _ = rates(1.05, 1000, seed=2)
    assert counts["regress"] / 1000 <= 0.075
    assert counts["pass"] / 1000 <= 0.075


def test_a_threefold_slowdown_regresses_within_a_few_looks() -> None:
    counts, spent_blocks = rates(3.0, 200, seed=3, drift=0.05)
    assert counts == {"pass": 0, "regress": 200, "inconclusive": 0}
    assert max(spent_blocks) <= DESIGN.min_blocks + 4  # at most 5 looks


def test_a_difference_near_the_margin_is_inconclusive_on_a_small_budget() -> None:
    small = Design(max_blocks=6, min_blocks=4)
    end = run_test(small, simulated_blocks(np.random.default_rng(4), 1.05, 6))
    assert end.verdict == "inconclusive" and end.blocks == 6


def test_a_look_states_its_interval_and_what_it_could_resolve() -> None:
    ratios = [math.log(1.2)] * 3 + [math.log(1.22)] * 3
    now = look(DESIGN, ratios)
    assert now.low < now.b_over_a < now.high
    assert now.verdict == "regress"
    assert 0 < now.detectable < 0.2
    with pytest.raises(ValueError):
        look(DESIGN, ratios[:3])


def test_block_log_ratio_needs_a_valid_row_on_each_side() -> None:
    assert block_log_ratio([10.0, 10.0], [20.0]) == pytest.approx(math.log(2))
    assert block_log_ratio([], [1.0]) is None


@pytest.mark.parametrize("kwargs", [dict(alpha=0.0), dict(beta=0.7), dict(margin=-0.1),
                                    dict(min_blocks=2), dict(max_blocks=3)])
def test_a_bad_design_is_one_line(kwargs: dict[str, float]) -> None:
    with pytest.raises(ConfigError):
        Design(**kwargs)  # type: ignore[arg-type]
