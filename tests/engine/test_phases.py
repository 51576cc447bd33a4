"""The step clock: phases that partition a step, the gap between busy steps, and the
histograms /metrics renders."""

from __future__ import annotations

import time

import pytest

from kvlab.engine.phases import BETWEEN, BUCKETS, STEP, Histogram, StepClock, layer_group


def test_phases_partition_the_step_and_repeat_phases_add_up() -> None:
    clock = StepClock()
    clock.begin("schedule")
    time.sleep(0.002)
    clock.phase("layers")
    time.sleep(0.001)
    assert clock.phase("gather") == "layers"  # returns the phase it closed
    clock.phase("layers")  # entered again: its times add up
    time.sleep(0.001)
    last = clock.end(rows=3)
    assert set(last) == {"schedule", "layers", "gather"}
    assert last["schedule"] >= 2_000_000 and last["layers"] >= 2_000_000
    hist = clock.snapshot()
    assert hist[STEP].count == 1 and clock.rows == 3
    assert hist[STEP].sum == pytest.approx(sum(last.values()) / 1e9)


def test_the_gap_before_a_step_counts_only_after_a_busy_one() -> None:
    clock = StepClock()
    clock.begin("a")
    clock.end(1)
    time.sleep(0.002)
    clock.begin("a", continued=True)
    assert clock.end(1)[BETWEEN] >= 2_000_000
    clock.begin("a", continued=False)  # after an idle wait: no gap recorded
    assert BETWEEN not in clock.end(1)
    step = clock.snapshot()[STEP]
    assert step.count == 3 and clock.snapshot()[BETWEEN].count == 1


def test_histogram_buckets_are_cumulative_with_inf_last() -> None:
    h = Histogram()
    for s in (0.00001, 0.03, 0.03, 100.0):
        h.observe(s)
    pairs = h.cumulative()
    assert pairs[-1] == ("+Inf", 4) and len(pairs) == len(BUCKETS) + 1
    assert dict(pairs)["5e-05"] == 1 and dict(pairs)["0.03"] == 3 and dict(pairs)["5"] == 3
    assert h.mean == pytest.approx((0.00001 + 0.06 + 100.0) / 4)


def test_layer_groups_cut_gemma_in_three() -> None:
    assert [layer_group(i, 18) for i in (0, 5, 6, 17)] == [
        "layers 0-5", "layers 0-5", "layers 6-11", "layers 12-17"]
    assert layer_group(1, 2) == "layers 1-1"
