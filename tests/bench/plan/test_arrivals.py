"""Arrival processes: gamma burstiness, ramp-up, trace replay; the schedule's deadlines."""

from __future__ import annotations

import statistics
from itertools import pairwise

import pytest

from kvlab.bench.plan.arrivals import ramp_time_s, rate_offsets_ns, trace_offsets_ns
from kvlab.bench.plan.loads.rate import RatePoint
from kvlab.bench.plan.loads.trace import TracePoint


def gaps_s(offsets: list[int]) -> list[float]:
    return [(b - a) / 1e9 for a, b in pairwise(offsets)]


def cv(values: list[float]) -> float:
    return statistics.pstdev(values) / statistics.fmean(values)


@pytest.mark.parametrize("burstiness", [0.25, 1.0, 4.0])
def test_gamma_gaps_have_the_rate_and_the_burstiness_asked(burstiness: float) -> None:
    """Gamma gaps of shape k: mean 1/rate, coefficient of variation 1/sqrt(k)."""
    gaps = gaps_s(rate_offsets_ns(10.0, 20_000, arrival="gamma", burstiness=burstiness,
                                  seed=1))
    assert statistics.fmean(gaps) == pytest.approx(0.1, rel=0.05)
    assert cv(gaps) == pytest.approx(burstiness ** -0.5, rel=0.05)


def test_poisson_and_constant_are_as_before_and_gamma_one_is_poisson_like() -> None:
    point = RatePoint(rate=4.0, requests=5, arrival="constant")
    assert point.arrivals_ns(5) == [0, 250_000_000, 500_000_000, 750_000_000,
                                            1_000_000_000]
    poisson = gaps_s(rate_offsets_ns(5.0, 20_000, seed=3))
    assert cv(poisson) == pytest.approx(1.0, rel=0.05)
    assert rate_offsets_ns(5.0, 10, seed=3) == rate_offsets_ns(5.0, 10, seed=3)


def test_a_ramp_rises_linearly_then_holds_the_rate() -> None:
    """Constant arrivals ramped over 10 s to 8/s: 40 expected over the ramp
    (8 * 10 / 2), arrival i at sqrt(2 i T / R) during it, then 1/8 s apart."""
    offsets = rate_offsets_ns(8.0, 60, arrival="constant", ramp_up_s=10.0)
    assert offsets[0] == 0
    assert offsets[10] == round(((2 * 10 * 10 / 8) ** 0.5) * 1e9)
    assert offsets[40] == 10 * 10**9
    assert all(g == pytest.approx(0.125) for g in gaps_s(offsets[40:]))
    assert gaps_s(offsets[:40]) == sorted(gaps_s(offsets[:40]), reverse=True)
    assert ramp_time_s(40.0, 8.0, 10.0) == 10.0
    assert len(rate_offsets_ns(8.0, None, 10.0, ramp_up_s=10.0, arrival="constant")) == 40


def test_a_trace_is_replayed_from_its_first_time_at_its_speed() -> None:
    assert trace_offsets_ns([500.0, 750.0, 2500.0], 2.0) == [0, 125_000_000, 1_000_000_000]
    point = TracePoint(speed=0.5, times_ms=(10.0, 12.0))
    assert point.label == "trace=0.5" and point.planned_requests() == 2
    assert point.arrivals_ns(None) == [0, 4_000_000]


def test_labels_of_repeated_points_and_bad_settings() -> None:
    assert RatePoint(rate=2.5, repetition=3).label == "rate=2.5#3"
    with pytest.raises(ValueError, match="burstiness"):
        RatePoint(rate=1.0, arrival="gamma", burstiness=0)
    with pytest.raises(ValueError, match="ramp_up_s"):
        RatePoint(rate=1.0, ramp_up_s=-1)
