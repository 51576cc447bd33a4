"""The LRU block cache's predicted hits against kvlab's own paged pool, request after
request: the same blocks found, with and without evictions."""

from __future__ import annotations

import random

import pytest

from kvlab.analysis.prefix_hits import (
    BlockLru,
    LruBlockCache,
    block_request,
    predict_hits,
    predicted_hits,
)
from kvlab.engine.config import get_preset
from kvlab.engine.paged import BlockPool

BLOCK = 16


def _names(tokens: list[int]) -> list[tuple[int, ...]]:
    """A chain name per full block: every token up to its end."""
    return [tuple(tokens[:(i + 1) * BLOCK]) for i in range(len(tokens) // BLOCK)]


def _workload(seed: int, n: int = 40) -> list[tuple[list[int], list[int]]]:
    """(prompt, output) pairs: prompts from three families of shared openings, cut at
    lengths that are and are not multiples of a block."""
    rng = random.Random(seed)
    families = [[rng.randrange(256) for _ in range(96)] for _ in range(3)]
    out = []
    for _ in range(n):
        head = rng.choice(families)[:rng.choice([16, 32, 40, 64, 96])]
        prompt = head + [rng.randrange(256) for _ in range(rng.randrange(1, 40))]
        out.append((prompt, [rng.randrange(256) for _ in range(rng.randrange(1, 30))]))
    return out


def _served(pairs: list[tuple[list[int], list[int]]], n_blocks: int) -> list[int]:
    """Blocks kvlab's pool gave each request, one request after another."""
    pool = BlockPool(get_preset("toy"), n_blocks, BLOCK, prefix_caching=True)
    found = []
    for seq, (prompt, output) in enumerate(pairs):
        tokens = list(prompt)
        pool.add(seq, tokens)
        hit = pool.match(seq)
        found.append(hit // BLOCK)
        pool.grow(seq, len(prompt) - hit)
        pool.advance(seq, len(prompt) - hit)
        for token in output[:-1]:  # the last sampled token is never fed back
            tokens.append(token)
            pool.grow(seq, 1)
            pool.advance(seq, 1)
        pool.release(seq)
    return found


def _predicted(pairs: list[tuple[list[int], list[int]]], capacity: int | None) -> list[int]:
    requests = [block_request(_names(p + o[:-1]), len(p), len(o), BLOCK, 3 * i, 3 * i + 1,
                              3 * i + 2) for i, (p, o) in enumerate(pairs)]
    return predict_hits(requests, capacity)


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("n_blocks", [12, 20, 40, 400])
def test_predicted_hits_are_the_pools(seed: int, n_blocks: int) -> None:
    pairs = _workload(seed)
    served = _served(pairs, n_blocks)
    assert _predicted(pairs, n_blocks) == served
    if n_blocks == 400:
        assert _predicted(pairs, None) == served  # nothing evicted: unbounded is the same
        assert sum(served) > 0


def test_a_small_pool_evicts_what_a_large_one_keeps() -> None:
    pairs = _workload(4)
    assert sum(_predicted(pairs, 12)) < sum(_predicted(pairs, 400))


def test_a_block_is_found_only_once_its_prompt_was_computed() -> None:
    a = block_request(["x", "y", "z"], 48, 1, BLOCK, arrive=0, computed=10, end=20)
    early = block_request(["x", "y", "w"], 48, 1, BLOCK, arrive=5, computed=12, end=22)
    late = block_request(["x", "y", "v"], 48, 1, BLOCK, arrive=11, computed=13, end=23)
    assert predict_hits([a, early, late], None) == [0, 0, 2]


def test_a_cache_goes_on_from_earlier_requests() -> None:
    cache = LruBlockCache(None)
    first = block_request(["x", "y"], 40, 1, BLOCK, 0, 1, 2)
    assert predict_hits([first], None, cache) == [0]
    assert predict_hits([first], None, cache) == [2]


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


def test_a_prompt_longer_than_the_cache_keeps_only_its_head() -> None:
    cache = BlockLru(capacity_blocks=2)
    assert cache.visit([1, 2, 3]) == 0
    assert len(cache) == 2 and cache.hits([1, 2, 3]) == 2
