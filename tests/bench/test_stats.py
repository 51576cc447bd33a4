"""Tests for kvlab.bench.stats against numpy and hand-computed values."""

from __future__ import annotations

import math

import numpy as np
import pytest

from kvlab.bench.stats import Distribution, describe, percentile


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
