"""The LRU of blocks that says what a prefix cache should find."""

from __future__ import annotations

from kvlab.bench.analysis.prefix_hits import BlockLru, predicted_hits


def test_a_prompt_finds_its_longest_run_of_leading_blocks() -> None:
    assert predicted_hits([[1, 2, 3], [1, 2, 4], [1, 5], [9, 2, 3], [1, 2, 4, 6]]) == [
        0, 2, 1, 0, 3]


def test_the_least_recently_used_blocks_go_first_a_prompts_tail_before_its_head() -> None:
    cache = BlockLru(capacity_blocks=4)
    assert cache.visit([1, 2, 3]) == 0
    assert cache.visit([7, 8]) == 0  # 5 blocks held: 3, the tail of the first, goes
    assert len(cache) == 4 and cache.evictions == 1
    assert cache.hits([1, 2, 3]) == 2
    assert cache.visit([1, 2]) == 2  # touched again: now 8 and 7 are the oldest
    assert cache.visit([5, 6]) == 0
    assert cache.hits([7, 8]) == 0 and cache.hits([1, 2]) == 2


def test_an_unbounded_cache_never_evicts() -> None:
    assert predicted_hits([[i] for i in range(100)] + [[0]]) == [0] * 100 + [1]
