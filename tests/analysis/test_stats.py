"""Tests for kvlab.analysis.stats against numpy and hand-computed values."""

from __future__ import annotations

import math

import numpy as np
import pytest

from kvlab.analysis.stats import (
    MIN_BOOTSTRAP_VALUES,
    Distribution,
    Interval,
    Verdict,
    bootstrap_ci,
    describe,
    percentile,
    ratio_ci,
    summarize_metric,
    verdict,
)

# Coverage simulations use fewer resamples than the default to stay within seconds;
# the interval's coverage depends on the sample, not much on the resample count.
SIM_RESAMPLES = 400


class TestPercentile:
    def test_hand_computed(self) -> None:
        assert percentile([1.0, 2.0, 3.0, 4.0], 50) == 2.5
        assert percentile([10.0], 95) == 10.0
        # 1..100: rank 0.95 * 99 = 94.05 -> 95 + 0.05 * (96 - 95)
        assert percentile(list(range(1, 101)), 95) == pytest.approx(95.05)
        assert percentile([3.0, 1.0, 2.0], 0) == 1.0
        assert percentile([3.0, 1.0, 2.0], 100) == 3.0

    def test_matches_numpy(self) -> None:
        rng = np.random.default_rng(7)
        values = rng.lognormal(3.0, 0.5, size=37).tolist()
        for q in (0, 1, 25, 50, 90, 95, 99, 100):
            assert percentile(values, q) == pytest.approx(float(np.percentile(values, q)))

    def test_empty_is_none(self) -> None:
        assert percentile([], 50) is None

    @pytest.mark.parametrize("q", [-1, 100.5])
    def test_q_out_of_range(self, q: float) -> None:
        with pytest.raises(ValueError, match="within"):
            percentile([1.0], q)

    def test_nan_refused(self) -> None:
        with pytest.raises(ValueError, match="NaN"):
            percentile([1.0, math.nan], 50)


class TestDescribe:
    def test_fields(self) -> None:
        d = describe([4.0, 1.0, 3.0, 2.0])
        assert d.count == 4
        assert d.mean == 2.5
        assert d.median == d.p50 == 2.5
        assert d.p95 == pytest.approx(3.85)  # rank 2.85 -> 3 + 0.85
        assert d.p99 == pytest.approx(3.97)
        assert (d.min, d.max) == (1.0, 4.0)
        assert d.std == pytest.approx(math.sqrt(5.0 / 3.0))  # sample std, n - 1

    def test_single_value_has_no_std(self) -> None:
        d = describe([5.0])
        assert d.count == 1 and d.mean == 5.0 and d.p99 == 5.0 and d.std is None

    def test_empty(self) -> None:
        d = describe([])
        assert d == Distribution(0, None, None, None, None, None, None, None, None)
        assert d.to_dict()["mean"] is None

    def test_to_dict_keys(self) -> None:
        keys = list(describe([1.0, 2.0]).to_dict())
        assert keys == ["count", "mean", "median", "p50", "p95", "p99", "min", "max", "std"]


class TestInterval:
    def test_contains_bounds_included(self) -> None:
        ci = Interval(0.9, 1.1, 0.95, "bca")
        assert ci.contains(0.9) and ci.contains(1.0) and ci.contains(1.1)
        assert not ci.contains(0.89) and not ci.contains(1.11)
        assert ci.to_dict() == {"low": 0.9, "high": 1.1, "confidence": 0.95, "method": "bca"}

    def test_rejects_inverted_bounds(self) -> None:
        with pytest.raises(ValueError, match="above"):
            Interval(2.0, 1.0, 0.95, "bca")


class TestBootstrapCi:
    def test_too_few_values_is_none(self) -> None:
        assert bootstrap_ci([1.0] * (MIN_BOOTSTRAP_VALUES - 1)) is None
        assert bootstrap_ci([]) is None
        assert bootstrap_ci([1.0, 2.0, 3.0, 4.0, 5.0]) is not None

    def test_contains_point_estimate(self) -> None:
        rng = np.random.default_rng(3)
        values = rng.lognormal(4.0, 0.3, size=30)
        for name, point in [
            ("mean", values.mean()),
            ("median", np.median(values)),
            ("p95", np.percentile(values, 95)),
        ]:
            ci = bootstrap_ci(values.tolist(), name)
            assert ci is not None and ci.method == "bca" and ci.confidence == 0.95
            assert ci.low < point < ci.high, name

    def test_coverage_of_true_mean(self) -> None:
        # 200 samples of n = 30 from N(100, 15): a 95 % interval should cover 100 in
        # about 95 % of them; allow the simulation's own noise (sd about 1.5 points).
        rng = np.random.default_rng(2024)
        covered = 0
        for i in range(200):
            sample = rng.normal(100.0, 15.0, size=30)
            ci = bootstrap_ci(sample.tolist(), "mean", resamples=SIM_RESAMPLES, seed=i)
            assert ci is not None
            covered += ci.contains(100.0)
        # Bootstrap intervals at n = 30 cover a little under nominal (about 92 % here).
        assert 178 <= covered <= 198, covered

    def test_wider_at_higher_confidence(self) -> None:
        values = np.random.default_rng(5).normal(50.0, 5.0, size=30).tolist()
        ci90 = bootstrap_ci(values, confidence=0.90)
        ci99 = bootstrap_ci(values, confidence=0.99)
        assert ci90 is not None and ci99 is not None
        assert ci99.low < ci90.low and ci90.high < ci99.high

    def test_degenerate_data_falls_back_to_percentile(self) -> None:
        ci = bootstrap_ci([7.0] * 30, "mean")
        assert ci == Interval(7.0, 7.0, 0.95, "percentile")
        ci = bootstrap_ci([5.0] * 28 + [6.0, 7.0], "median")
        assert ci is not None and ci.method == "percentile" and ci.contains(5.0)

    def test_callable_statistic(self) -> None:
        values = np.random.default_rng(9).normal(10.0, 1.0, size=40)

        def p90(x: np.ndarray, axis: int = -1) -> np.ndarray:
            return np.percentile(x, 90, axis=axis)

        ci = bootstrap_ci(values.tolist(), p90)
        assert ci is not None and ci.contains(float(np.percentile(values, 90)))

    def test_unknown_statistic(self) -> None:
        with pytest.raises(ValueError, match="unknown statistic"):
            bootstrap_ci([1.0] * 10, "p42")

    def test_seed_makes_it_deterministic(self) -> None:
        values = np.random.default_rng(11).exponential(20.0, size=30).tolist()
        assert bootstrap_ci(values, seed=1) == bootstrap_ci(values, seed=1)
        assert bootstrap_ci(values, seed=1) != bootstrap_ci(values, seed=2)


def _times(rng: np.random.Generator, mean: float, cv: float, n: int = 30) -> list[float]:
    """n positive request times (ms) around ``mean`` with coefficient of variation cv."""
    return np.abs(rng.normal(mean, cv * mean, size=n)).tolist()


class TestRatioAndVerdict:
    def test_verdict_sides(self) -> None:
        assert verdict(Interval(1.1, 1.3, 0.95, "bca")) is Verdict.FASTER
        assert verdict(Interval(0.7, 0.9, 0.95, "bca")) is Verdict.SLOWER
        assert verdict(Interval(0.9, 1.1, 0.95, "bca")) is Verdict.NO_DIFFERENCE
        assert verdict(Interval(1.0, 1.2, 0.95, "bca")) is Verdict.NO_DIFFERENCE
        assert str(Verdict.NO_DIFFERENCE) == "no detectable difference"

    def test_separated_distributions(self) -> None:
        # B takes 20 % less time than A (true ratio A/B = 1.25), low noise.
        rng = np.random.default_rng(1)
        a, b = _times(rng, 100.0, 0.03), _times(rng, 80.0, 0.03)
        ab = ratio_ci(a, b)
        assert ab is not None and ab.contains(1.25)
        assert verdict(ab) is Verdict.FASTER
        ba = ratio_ci(b, a)
        assert ba is not None and verdict(ba) is Verdict.SLOWER

    def test_identical_distributions_mostly_no_difference(self) -> None:
        rng = np.random.default_rng(42)
        verdicts = []
        for i in range(100):
            a, b = _times(rng, 100.0, 0.2), _times(rng, 100.0, 0.2)
            ci = ratio_ci(a, b, resamples=SIM_RESAMPLES, seed=i)
            assert ci is not None
            verdicts.append(verdict(ci))
        # Nominally 95 %; the simulation's noise allows a few points either way.
        assert verdicts.count(Verdict.NO_DIFFERENCE) >= 88

    def test_ratio_coverage_of_true_ratio(self) -> None:
        rng = np.random.default_rng(7)
        covered = 0
        for i in range(100):
            a, b = _times(rng, 120.0, 0.15), _times(rng, 100.0, 0.15)
            ci = ratio_ci(a, b, resamples=SIM_RESAMPLES, seed=i)
            assert ci is not None
            covered += ci.contains(1.2)
        assert 88 <= covered <= 100, covered

    def test_paired_removes_query_spread(self) -> None:
        # Queries differ a lot in length (base times 50..500 ms); B is 10 % faster on
        # each query with 2 % noise. Independent resampling sees the query spread and
        # cannot tell; resampling pairs can.
        rng = np.random.default_rng(3)
        base = rng.uniform(50.0, 500.0, size=30)
        a = base * rng.normal(1.0, 0.02, size=30)
        b = base / 1.1 * rng.normal(1.0, 0.02, size=30)
        independent = ratio_ci(a.tolist(), b.tolist())
        paired = ratio_ci(a.tolist(), b.tolist(), paired=True)
        assert independent is not None and paired is not None
        assert paired.contains(1.1)
        assert verdict(paired) is Verdict.FASTER
        assert verdict(independent) is Verdict.NO_DIFFERENCE
        assert paired.high - paired.low < (independent.high - independent.low) / 5

    def test_paired_needs_equal_lengths(self) -> None:
        with pytest.raises(ValueError, match="equal lengths"):
            ratio_ci([1.0] * 10, [1.0] * 9, paired=True)

    def test_too_few_and_non_positive(self) -> None:
        assert ratio_ci([1.0] * 10, [1.0] * (MIN_BOOTSTRAP_VALUES - 1)) is None
        with pytest.raises(ValueError, match="positive"):
            ratio_ci([1.0] * 10, [1.0] * 9 + [0.0])

    def test_ratio_of_medians_and_determinism(self) -> None:
        rng = np.random.default_rng(8)
        a, b = _times(rng, 90.0, 0.1), _times(rng, 60.0, 0.1)
        first = ratio_ci(a, b, "median", seed=5)
        assert first is not None and first.contains(1.5)
        assert first == ratio_ci(a, b, "median", seed=5)


class TestSummarizeMetric:
    def test_fields_and_intervals(self) -> None:
        values = np.random.default_rng(4).lognormal(3.0, 0.4, size=30).tolist()
        summary = summarize_metric(values, resamples=500)
        assert {k: summary[k] for k in describe(values).to_dict()} == describe(values).to_dict()
        assert set(summary["intervals"]) == {"mean", "median", "p95", "p99"}
        for name, point in [("mean", summary["mean"]), ("median", summary["median"])]:
            ci = summary["intervals"][name]
            assert ci["low"] <= point <= ci["high"] and ci["confidence"] == 0.95

    def test_too_few_values(self) -> None:
        summary = summarize_metric([1.0, 2.0])
        assert summary["count"] == 2
        assert summary["intervals"] == {"mean": None, "median": None, "p95": None, "p99": None}


def test_weighted_percentile_is_guidellms_no_interpolation() -> None:
    from kvlab.analysis.stats import weighted_percentile

    assert weighted_percentile([4, 1, 3, 2], [1, 1, 1, 1], 50) == 2.0  # linear: 2.5
    assert weighted_percentile([1, 2, 3, 4], [1, 1, 1, 1], 95) == 4.0
    # Weights move the median: 10 weighs 63, 100 weighs 1.
    assert weighted_percentile([10, 100], [63, 1], 50) == 10.0
    assert weighted_percentile([10, 100], [63, 1], 99) == 100.0
    # GuideLLM's rounding: 20 shares of 0.05 sum to just under 0.5 at the 10th value,
    # so its median of 1..20 is 11 (not 10, and not the interpolated 10.5).
    assert weighted_percentile(list(range(1, 21)), [1] * 20, 50) == 11.0
    assert weighted_percentile([], [], 50) is None
    with pytest.raises(ValueError, match="weights"):
        weighted_percentile([1, 2], [1], 50)
