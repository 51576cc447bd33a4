"""engine-profile's library: the serving scheduler's decode step timed by phase, and
one step traced by torch.profiler agreeing with the step clock."""

from __future__ import annotations

import pytest
import torch

from kvlab.engine.gemma import build_gemma
from kvlab.engine.weights import to_format
from kvlab.studies.step_profile import (
    AGREEMENT,
    AGREEMENT_MS,
    ENTRY_MS,
    decoding,
    profile_steps,
    trace_step,
)
from tests.engine.test_gemma import TINY

FORWARD = {"embed", "layers 0-0", "layers 1-1", "layers 2-2", "gather", "head"}


def test_every_row_decodes_after_the_prompts() -> None:
    scheduler = decoding(build_gemma(TINY), batch=3, context=20)
    assert len(scheduler.running) == 3 and not scheduler.waiting
    assert all(len(r.token_ids) - r.cached == 1 for r in scheduler.running)


def test_phases_partition_each_step() -> None:
    model = to_format(build_gemma(TINY), "bfloat16")
    found = profile_steps(model, [1, 4], context=20, steps=3)
    assert [p.batch for p in found] == [1, 4]
    for p in found:
        assert FORWARD | {"schedule", "batch", "sample", "finish"} <= set(p.phases_ms)
        assert p.step_ms > 0 and all(v >= 0 for v in p.phases_ms.values())


def test_each_step_meets_the_floor_of_its_own_seconds() -> None:
    """A probe after each timed step: the ratio is the median of step_i / floor_i,
    floor_i = weight bytes / the i-th probe's bandwidth, not the median step over one
    floor (the bandwidths here halve from step to step, so the two differ)."""
    model = to_format(build_gemma(TINY), "bfloat16")
    speeds = iter([8e9, 4e9, 2e9])
    (found,) = profile_steps(model, [2], context=20, steps=3,
                             bandwidth=lambda: next(speeds), weight_bytes=10**6)
    assert found.bandwidths == (8e9, 4e9, 2e9)
    floors_ms = [1e3 * 10**6 / bw for bw in (8e9, 4e9, 2e9)]
    ratios = sorted(t / f for t, f in zip(found.each_ms, floors_ms, strict=True))
    assert found.paired_ratio == pytest.approx(ratios[1], rel=1e-9)
    assert found.to_dict()["paired_copy_gb_per_s"] == [8.0, 4.0, 2.0]
    assert "between" not in found.phases_ms  # the gap between steps held the probes
    (plain,) = profile_steps(model, [2], context=20, steps=2)
    assert plain.paired_ratio is None and plain.bandwidths == ()


def test_the_clock_agrees_with_torch_profiler() -> None:
    torch.manual_seed(0)
    trace = trace_step(build_gemma(TINY), batch=4, context=20)
    names = {p.name for p in trace.phases}
    assert FORWARD | {"schedule", "batch", "sample", "finish", "step"} <= names
    for p in trace.phases:  # within 5 % or 0.25 ms, + 0.02 ms a range, of the profiler
        bound = max(AGREEMENT * max(p.clock_ms, p.profiler_ms), AGREEMENT_MS) \
            + ENTRY_MS * p.entries
        assert abs(p.clock_ms - p.profiler_ms) <= bound, p
        assert 0 <= p.ops_ms <= p.profiler_ms * 1.001 + 1e-3, p  # operators inside it
    layers = [p for p in trace.phases if p.name.startswith("layers")]
    assert all(p.ops_ms > 0 for p in layers)  # the profiler saw the layers' operators
    assert trace.agrees
