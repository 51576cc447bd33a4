"""The roofline's arithmetic and its timing loop (timings are measured by ``kvlab
engine-batch``, never asserted)."""

from __future__ import annotations

from kvlab.engine.gemma import build_gemma
from kvlab.engine.weights import to_format, weight_nbytes
from kvlab.studies.roofline import StepTime, copy_bandwidth, kv_nbytes_read, time_steps
from tests.engine.test_gemma import TINY


def test_kv_bytes_stop_at_each_window() -> None:
    model = build_gemma(TINY, seed=1)  # windows (4, 4, None), 1 KV head of 16, float32
    per_token = 2 * 1 * 16 * 4
    assert kv_nbytes_read(model, 3) == 3 * 3 * per_token
    assert kv_nbytes_read(model, 10) == (4 + 4 + 10) * per_token


def test_a_step_time_reads_its_rates() -> None:
    step = StepTime(batch=8, step_ms=50.0, weight_bytes=400_000_000, kv_bytes=1_000_000)
    assert step.tokens_per_s == 160.0
    assert step.gb_per_s == 401_000_000 / 0.05 / 1e9


def test_time_steps_gives_one_row_per_batch_size() -> None:
    model = to_format(build_gemma(TINY, seed=1), "int8")
    steps = time_steps(model, [1, 3], context=6, repeats=1, steps=1)
    assert [s.batch for s in steps] == [1, 3]
    assert all(s.step_ms > 0 and s.weight_bytes == weight_nbytes(model) for s in steps)
    assert steps[1].kv_bytes == 3 * steps[0].kv_bytes


def test_copy_bandwidth_is_a_rate() -> None:
    assert copy_bandwidth(nbytes=2**20, repeats=1) > 0
