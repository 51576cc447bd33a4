"""Metric functions against hand-computed rows."""

from __future__ import annotations

import pytest

from kvlab.analysis import metrics
from tests.rows import MS, row


def test_times_of_a_streamed_row() -> None:
    r = row()
    assert metrics.e2e_ms(r) == 1000.0
    assert metrics.ttft_ms(r) == 100.0
    assert metrics.itl_effective_ms(r) == pytest.approx(630.0 / 63)
    assert metrics.inter_delta_gaps_ms(r) == pytest.approx([10.0] * 63)
    assert metrics.content_deltas(r) == 64
    assert metrics.prefill_ms(r) == 90.0
    assert metrics.decode_ms(r) == 630.0
    assert metrics.decode_per_token_ms(r) == pytest.approx(10.0)
    assert metrics.overhead_ms(r) == pytest.approx(1000.0 - 720.0)
    assert metrics.decode_tokens_per_s(r) == pytest.approx(100.0)


def test_missing_facts_give_none() -> None:
    r = row(t_first_content=None, t_last_content=None, chunk_ns=[], timings=None,
            stream=False, output_tokens=1)
    assert metrics.ttft_ms(r) is None
    assert metrics.itl_effective_ms(r) is None
    assert metrics.prefill_ms(r) is None and metrics.decode_ms(r) is None
    assert metrics.overhead_ms(r) is None and metrics.decode_tokens_per_s(r) is None
    assert metrics.inter_delta_gaps_ms(r) == []


def test_itl_uses_server_tokens_not_chunks() -> None:
    # 3 chunks carrying 64 tokens: ITL still divides by 63.
    r = row(chunk_ns=[100 * MS, 400 * MS, 730 * MS])
    assert metrics.itl_effective_ms(r) == pytest.approx(10.0)
    assert metrics.content_deltas(r) == 3


def test_e2e_tokens_per_second_is_a_ratio_of_sums() -> None:
    # The tutorial's example: 64 tokens in 0.5 s and 64 in 1.5 s -> 64 tokens/s, not 85.33.
    rows = [row(t_end=500 * MS), row(t_end=1500 * MS)]
    assert metrics.e2e_tokens_per_s(rows) == pytest.approx(64.0)
    assert metrics.e2e_tokens_per_s([]) is None
