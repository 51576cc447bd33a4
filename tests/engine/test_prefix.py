"""Prefix caching: blocks named by content and position chain, shared with reference
counts, kept once free and evicted least recently used first; a shared prefix computed
once gives the logits it gives alone, and no block leaks."""

from __future__ import annotations

import pytest
import torch

from kvlab.engine import build_model, get_preset
from kvlab.engine.gemma import build_gemma
from kvlab.engine.generate import generate, make_sampler
from kvlab.engine.paged import BlockPool
from kvlab.engine.prefix import PrefixIndex, block_names
from kvlab.engine.scheduler import Request, Scheduler
from tests.engine.test_gemma import TINY
from tests.rounding import assert_same_generation

TOY = get_preset("toy")


def _ids(vocab: int, n: int, seed: int) -> list[int]:
    return torch.randint(0, vocab, (n,), generator=torch.Generator().manual_seed(seed)).tolist()


def _accounted(pool: BlockPool) -> None:
    """Every block is free, cached or held, once; held blocks are held as often as
    sequences' tables name them."""
    for g in range(len(pool.windows)):
        held = [b for seq in pool.seqs.values() for b in seq.tables[g] if b is not None]
        assert pool.used(g) + pool.cached(g) + len(pool.free[g]) == pool.n_blocks
        assert len(set(held)) == pool.used(g)
        assert all(pool.refs[g][b] == held.count(b) for b in set(held))
        assert sum(pool.refs[g]) == len(held)


def test_a_name_depends_on_every_token_before() -> None:
    a = block_names(list(range(12)), 4, 12)
    assert len(a) == 3 and len(set(a)) == 3
    assert block_names(list(range(12)), 4, 11) == a[:2]  # only full blocks are named
    changed = block_names([99, *range(1, 12)], 4, 12)  # the first token differs
    assert all(x != y for x, y in zip(a, changed, strict=True))
    assert block_names(list(range(12)), 4, 12, first=2, parent=a[1]) == a[2:]


def test_the_index_forgets_an_evicted_name_least_recent_first() -> None:
    index = PrefixIndex(1)
    index.register(0, 5, b"a")
    index.register(0, 6, b"b")
    index.register(0, 7, b"a")  # the name is cached already: block 7 stays unnamed
    assert index.find(0, b"a") == 5 and not index.park(0, 7)
    assert index.park(0, 6) and index.park(0, 5)
    index.unpark(0, 6)  # held again
    assert index.evict(0) == 5 and index.find(0, b"a") is None
    assert index.evict(0) is None and index.evictions == 1


def _run(pool: BlockPool, prompt: list[int], seq: int) -> None:
    pool.add(seq, prompt)
    pool.match(seq)
    n = len(prompt) - pool.length(seq)
    pool.grow(seq, n)
    pool.advance(seq, n)


def test_a_second_sequence_takes_the_cached_full_blocks() -> None:
    pool = BlockPool(TOY, n_blocks=16, block_size=4, prefix_caching=True)
    prompt = _ids(TOY.vocab_size, 14, 0)
    _run(pool, prompt, 0)
    pool.add(1, [*prompt[:10], 7, 7, 7])
    assert pool.match(1) == 8  # blocks 0 and 1 (positions 0..7); block 2 differs
    assert pool.seqs[1].tables[0] == pool.seqs[0].tables[0][:2]
    assert [pool.refs[0][b] for b in pool.seqs[0].tables[0]] == [2, 2, 1, 1]
    _accounted(pool)
    pool.release(0)
    pool.release(1)
    assert pool.used() == 0 and pool.cached() == 3  # 3 full blocks of seq 0 kept
    _accounted(pool)


def test_at_least_one_token_is_always_computed() -> None:
    pool = BlockPool(TOY, n_blocks=8, block_size=4, prefix_caching=True)
    prompt = _ids(TOY.vocab_size, 8, 1)
    _run(pool, prompt, 0)
    pool.release(0)
    pool.add(1, prompt)  # all 8 tokens cached: only the first block may be taken
    assert pool.match(1) == 4


def test_without_prefix_caching_nothing_is_kept() -> None:
    pool = BlockPool(TOY, n_blocks=8, block_size=4)
    prompt = _ids(TOY.vocab_size, 9, 2)
    _run(pool, prompt, 0)
    pool.release(0)
    pool.add(1, prompt)
    assert pool.match(1) == 0 and pool.cached() == 0 and len(pool.free[0]) == 8


def test_eviction_under_pressure_takes_the_least_recent_cached_blocks() -> None:
    pool = BlockPool(TOY, n_blocks=6, block_size=4, prefix_caching=True)
    old, new = _ids(TOY.vocab_size, 12, 3), _ids(TOY.vocab_size, 12, 4)
    _run(pool, old, 0)
    pool.release(0)
    assert pool.cached() == 3 and pool.available() == 6
    _run(pool, new, 1)  # 3 free blocks, then... none left but the 3 cached ones
    _run(pool, [*new[:8], 1, 2, 3, 4], 2)  # shares 2 blocks with seq 1, needs 1 more
    assert pool.index is not None and pool.index.evictions == 1
    _accounted(pool)
    pool.add(3, old)  # old's last block went first (released last-first), so its
    assert pool.match(3) == 8  # first two blocks are still there
    _accounted(pool)


def test_a_sliding_group_keeps_only_the_window_and_still_hits() -> None:
    # TINY: window 4 on two layers (blocks of 2), full attention on the third.
    pool = BlockPool(TINY, n_blocks=32, block_size=2, prefix_caching=True)
    prompt = _ids(TINY.vocab_size, 15, 5)
    _run(pool, prompt, 0)
    full, sliding = pool.windows.index(None), pool.windows.index(4)
    assert pool.used(full) == 8 and pool.used(sliding) == 2  # positions 12..15
    assert pool.cached(sliding) == 6  # the 6 full blocks that left the window: kept
    pool.add(1, [*prompt[:13], 0, 0])
    assert pool.match(1) == 12  # next query at 12 sees 9..12: sliding blocks 4, 5 only
    table = pool.seqs[1].tables[sliding]
    assert table[:4] == [None] * 4 and None not in table[4:6]
    _accounted(pool)


def _greedy(prompt: list[int], new: int, cache_prompt: bool = True) -> Request:
    return Request(prompt, new, make_sampler(0.0, None), keep_logits=True,
                   cache_prompt=cache_prompt)


@pytest.mark.parametrize("name", ["toy", "gemma-tiny"])
def test_a_shared_prefix_computed_once_gives_the_logits_of_alone(name: str) -> None:
    model = build_model(TOY, seed=4) if name == "toy" else build_gemma(TINY, seed=4)
    vocab = model.config.vocab_size
    shared = _ids(vocab, 21, 6)  # past gemma-tiny's window of 4
    prompts = [shared + _ids(vocab, n, 10 + n) for n in (1, 5, 9)] + [shared[:11]]
    pool = BlockPool(model.config, n_blocks=64, block_size=4, prefix_caching=True)
    scheduler = Scheduler(model, pool, max_running=4, token_budget=64)
    first = scheduler.submit(_greedy(prompts[0], 6))
    scheduler.run()  # the shared prefix is computed once, here
    later = [scheduler.submit(_greedy(p, 6)) for p in prompts[1:]]
    scheduler.run()  # three at once, each starting from the cached blocks
    assert first.prompt_hit == 0
    assert [r.prompt_hit for r in later] == [20, 20, 8]
    assert scheduler.counters.prefix_hits == 48
    for req, prompt in zip([first, *later], prompts, strict=True):
        alone = generate(model, prompt, 6, keep_logits=True)
        assert_same_generation(req.tokens, torch.stack(req.logits), alone.tokens,
                               alone.logits, model.config, len(prompt) + 6)
    assert pool.used(0) == 0 and not pool.seqs
    _accounted(pool)


def test_cache_prompt_false_never_starts_from_cached_blocks() -> None:
    model = build_model(TOY, seed=4)
    prompt = _ids(TOY.vocab_size, 20, 7)
    pool = BlockPool(model.config, n_blocks=32, block_size=4, prefix_caching=True)
    scheduler = Scheduler(model, pool)
    scheduler.submit(_greedy(prompt, 3))
    scheduler.run()
    again = scheduler.submit(_greedy(prompt, 3, cache_prompt=False))
    scheduler.run()
    assert again.prompt_hit == 0 and scheduler.counters.prefix_queries == 20
    assert scheduler.counters.prompt_tokens == 40  # both computed every prompt token


def test_a_preempted_request_recomputes_from_its_own_cached_blocks() -> None:
    model = build_gemma(TINY, seed=7)
    prompts = [_ids(TINY.vocab_size, n, 20 + n) for n in (9, 14, 5, 11)]
    pool = BlockPool(model.config, n_blocks=14, block_size=2, prefix_caching=True)
    scheduler = Scheduler(model, pool, max_running=4, token_budget=8)
    requests = [scheduler.submit(_greedy(p, 10)) for p in prompts]
    scheduler.run()
    assert scheduler.counters.preemptions > 0 and scheduler.counters.prefix_hits > 0
    for req, prompt in zip(requests, prompts, strict=True):
        alone = generate(model, prompt, 10, keep_logits=True)
        assert_same_generation(req.tokens, torch.stack(req.logits), alone.tokens,
                               alone.logits, model.config, len(prompt) + 10)
    _accounted(pool)
    assert all(pool.used(g) == 0 for g in range(2))


@pytest.mark.slow
def test_a_shared_prefix_past_the_window_on_gemma_270m(gemma_model) -> None:  # type: ignore[no-untyped-def]
    # 600 shared tokens: past the 512-token window, so the second request takes every
    # full-attention block below 592 but only the sliding blocks its window still sees.
    shared = _ids(1000, 600, 8)
    prompts = [shared + _ids(1000, 7, 9), shared + _ids(1000, 20, 10)]
    pool = BlockPool(gemma_model.config, n_blocks=96, block_size=16, prefix_caching=True)
    scheduler = Scheduler(gemma_model, pool, token_budget=256)
    requests = []
    for prompt in prompts:
        requests.append(scheduler.submit(_greedy(prompt, 4)))
        scheduler.run()
    assert [r.prompt_hit for r in requests] == [0, 592]
    sliding = pool.windows.index(512)
    assert pool.cached(sliding) > 0  # blocks that left the window were kept, not freed
    for req, prompt in zip(requests, prompts, strict=True):
        alone = generate(gemma_model, prompt, 4, keep_logits=True)
        assert_same_generation(req.tokens, torch.stack(req.logits), alone.tokens,
                               alone.logits, gemma_model.config, len(prompt) + 4)
    _accounted(pool)
