"""Cached tokens per row and TTFT split by hit, only where reuse was asked."""

from __future__ import annotations

from kvlab.analysis.cache_hits import cache_splits
from kvlab.analysis.valid_rows import judge
from tests.rows import MS, row

REUSE = {"cache_prompt": True}


def test_hits_and_misses_are_split_and_every_row_is_kept() -> None:
    rows = [row(query_id=f"q{i}", position=i, body=REUSE, cached_tokens=c,
                prompt_tokens=250, t_first_content=ttft * MS)
            for i, (c, ttft) in enumerate([(0, 100), (200, 30), (200, 40), (0, 90)])]
    (split,) = cache_splits(judge(rows))
    assert (split.hits, len(split.rows)) == (2, 4)
    assert split.cached_share == 400 / 1000
    assert split.ttft_hit_ms.mean == 35.0 and split.ttft_miss_ms.mean == 95.0
    assert split.to_dict()["per_row"][1] == {"query_id": "q1", "repetition": 0,
                                             "cached_tokens": 200, "prompt_tokens": 250,
                                             "ttft_ms": 30.0}


def test_rows_that_did_not_ask_for_reuse_or_state_no_count_are_left_out() -> None:
    rows = [row(cached_tokens=0), row(query_id="q02", body=REUSE, cached_tokens=None),
            row(query_id="q03", body=REUSE, cached_tokens=5, warmup=True),
            row(query_id="q04", body=REUSE, cached_tokens=5, output_tokens=3)]  # refused
    assert cache_splits(judge(rows)) == []
