"""The gate's statistics: the hierarchical bootstrap sees between-run noise, pairing
cancels the queries' own spread, the floor estimates what it was given, Holm adjusts
as the textbook says, and the detectable effect grows with the error and the family."""

from __future__ import annotations

import math

import numpy as np
import pytest

from kvlab.analysis.gate_stats import (
    between_run_sd,
    detectable,
    hierarchical_ratio,
    holm,
)


def runs(k: int, *, n: int = 200, between: float = 0.0, within: float = 0.1,
         scale: float = 1.0, seed: int = 0) -> list[np.ndarray]:
    """k runs of n rows: each run's mean off by a log-normal factor (sd ``between``),
    each row by a normal one (sd ``within``), around 100 * ``scale`` ms."""
    rng = np.random.default_rng(seed)
    return [100.0 * scale * math.exp(rng.normal(0.0, between))
            * (1.0 + rng.normal(0.0, within, size=n)) for _ in range(k)]


def test_identical_sides_give_a_ratio_of_one_inside_its_interval() -> None:
    a = runs(1, seed=1)
    found = hierarchical_ratio(a, a)
    assert found is not None and found.ratio == pytest.approx(1.0)
    low, high = found.interval(0.95)
    assert low < 1.0 < high and found.between == "none"


def test_a_slower_side_is_seen_beyond_doubt() -> None:
    found = hierarchical_ratio(runs(1, seed=1), runs(1, scale=1.2, seed=2))
    assert found is not None and found.ratio == pytest.approx(1.2, rel=0.03)
    assert found.interval(0.99)[0] > 1.1
    assert found.p_slower_than(1.05) < 1e-6 and found.p_faster_than(1.05) > 0.999


def test_several_runs_per_side_carry_the_between_run_noise() -> None:
    """Runs 10 % apart: five runs a side resampled give a standard error near
    sqrt(2/5) * 10 %, where rows alone would give well under 1 %."""
    a = runs(5, between=0.10, seed=3)
    b = runs(5, between=0.10, seed=4)
    found = hierarchical_ratio(a, b, resamples=4000)
    rows_only = hierarchical_ratio([np.concatenate(a)], [np.concatenate(b)])
    assert found is not None and rows_only is not None
    assert found.between == "runs" and found.runs_a == found.runs_b == 5
    assert rows_only.log_se < 0.01 < 0.03 < found.log_se < 0.10


def test_a_noise_floor_widens_a_single_run_comparison() -> None:
    a, b = runs(1, seed=5), runs(1, seed=6)
    without = hierarchical_ratio(a, b)
    with_floor = hierarchical_ratio(a, b, between=0.05, resamples=4000)
    assert without is not None and with_floor is not None
    assert with_floor.between == "floor"
    # sqrt(2) * 5 % between runs, on top of the rows' own error
    expected = math.sqrt(without.log_se ** 2 + 2 * 0.05 ** 2)
    assert with_floor.log_se == pytest.approx(expected, rel=0.1)


def test_pairing_on_keys_cancels_the_queries_own_spread() -> None:
    """Queries range from 50 to 150 ms; B is A times 1.02 with 1 % jitter. Paired on
    the query, the error is that jitter's; unpaired, the queries' spread."""
    rng = np.random.default_rng(7)
    base = np.linspace(50.0, 150.0, 100)
    a = base * (1.0 + rng.normal(0.0, 0.01, 100))
    b = base * 1.02 * (1.0 + rng.normal(0.0, 0.01, 100))
    keys = [(f"q{i}", 0) for i in range(100)]
    paired = hierarchical_ratio([a], [b], keys_a=[keys], keys_b=[keys])
    unpaired = hierarchical_ratio([a], [b])
    assert paired is not None and unpaired is not None and paired.paired
    assert paired.log_se < 0.003 < 0.03 < unpaired.log_se
    assert paired.interval(0.99)[0] > 1.0


def test_the_floor_estimates_the_between_run_sd_it_was_given() -> None:
    found = between_run_sd(runs(40, between=0.05, within=0.2, seed=8))
    assert found is not None and 0.035 < found < 0.065
    assert between_run_sd(runs(40, between=0.0, within=0.2, seed=9)) < 0.01  # type: ignore[operator]
    assert between_run_sd(runs(1)) is None


def test_the_floor_s_upper_bound_errs_wide_with_few_runs() -> None:
    """Four runs 5 % apart can read a floor near 0; its 80 % upper bound cannot, and
    with many runs the bound comes close to the estimate."""
    few = runs(4, between=0.05, within=0.2, seed=10)
    estimate, upper = between_run_sd(few), between_run_sd(few, upper=0.8)
    assert estimate is not None and upper is not None and upper > estimate
    same = runs(4, between=0.0, within=0.2, seed=11)
    assert between_run_sd(same, upper=0.8) > 0.005  # type: ignore[operator]
    many = runs(200, between=0.05, within=0.2, seed=12)
    close, bound = between_run_sd(many), between_run_sd(many, upper=0.8)
    assert close is not None and bound is not None and close < bound < close * 1.15


def test_holm_adjusts_step_down() -> None:
    assert holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert holm([0.5]) == [0.5] and holm([]) == []


def test_the_detectable_effect_grows_with_the_error_and_the_family() -> None:
    assert detectable(0.0, 0.05, 0.05) == pytest.approx(0.05)
    one = detectable(0.01, 0.05, 0.05)
    assert one == pytest.approx(1.05 * math.exp(0.01 * (1.6449 + 0.8416)) - 1, rel=1e-3)
    assert detectable(0.02, 0.05, 0.05) > one
    assert detectable(0.01, 0.05, 0.05, checks=10) > one


def test_no_values_or_no_positive_mean_give_nothing() -> None:
    assert hierarchical_ratio([[]], [[1.0, 2.0]]) is None
    assert hierarchical_ratio([[0.0, 0.0]], [[1.0, 2.0]]) is None


def test_few_runs_a_side_keep_the_declared_false_alarm_rate() -> None:
    """A/A pairs of 3 runs a side, runs 10 % apart: resampling 3 runs sees them as a
    population of 3, and the normal ignores that their spread is known from 3 values;
    uncorrected, "B slower" at a declared 5 % came out near 11 % of 300 pairs. With
    the K / (K - 1) widening and Welch's t it stays at or under the 5 % declared
    (a binomial 5 % of 300 stays under 8 % with probability above 0.99)."""
    rng = np.random.default_rng(7)
    alarms = 0
    for seed in range(300):
        a = [100.0 * math.exp(rng.normal(0.0, 0.10)) * (1.0 + rng.normal(0.0, 0.2, size=20))
             for _ in range(3)]
        b = [100.0 * math.exp(rng.normal(0.0, 0.10)) * (1.0 + rng.normal(0.0, 0.2, size=20))
             for _ in range(3)]
        found = hierarchical_ratio(a, b, resamples=500, seed=seed)
        assert found is not None and found.between == "runs" and 2.0 <= found.df < 10.0
        alarms += found.p_slower_than(1.0) <= 0.05
    assert alarms / 300 <= 0.08
