"""Continuous batching: the same tokens and logits as one-at-a-time generation, for
staggered sequences, with preemptions, and no block left behind."""

from __future__ import annotations

import pytest
import torch

from kvlab.engine import build_model, get_preset
from kvlab.engine.gemma import Gemma3, build_gemma
from kvlab.engine.generate import generate, make_sampler
from kvlab.engine.lm import new_cache
from kvlab.engine.paged import BlockPool
from kvlab.engine.scheduler import Request, RequestTooLarge, Scheduler
from tests.engine.test_gemma import TINY
from tests.rounding import assert_close_up_to_rounding, assert_same_generation

LENGTHS = [3, 10, 33, 50, 16, 70, 5, 90]  # 8 sequences of different prompt lengths


def _prompts(vocab: int, lengths: list[int]) -> list[list[int]]:
    gen = torch.Generator().manual_seed(1)
    return [torch.randint(0, vocab, (n,), generator=gen).tolist() for n in lengths]


def _greedy(prompt: list[int], new: int) -> Request:
    return Request(prompt, new, make_sampler(0.0, None), keep_logits=True)


def _run_staggered(model, prompts: list[list[int]], new: int, n_blocks: int,
                   block_size: int, budget: int) -> tuple[Scheduler, list[Request]]:
    """Submit one request per step (they start at different steps), then run out."""
    pool = BlockPool(model.config, n_blocks=n_blocks, block_size=block_size)
    scheduler = Scheduler(model, pool, max_running=8, token_budget=budget)
    requests = []
    for prompt in prompts:
        requests.append(scheduler.submit(_greedy(prompt, new)))
        scheduler.step()
    scheduler.run()
    return scheduler, requests


def _assert_same_as_alone(model, prompts, requests, new: int) -> None:
    for prompt, req in zip(prompts, requests, strict=True):
        alone = generate(model, prompt, new, keep_logits=True)
        assert_same_generation(req.tokens, torch.stack(req.logits), alone.tokens,
                               alone.logits, model.config, len(prompt) + new)


@pytest.mark.parametrize("preset", ["toy", "toy-gqa", "toy-mqa"])
@pytest.mark.parametrize("n_blocks", [64, 14])  # 14 blocks of 16: preemptions
def test_batched_equals_alone(preset: str, n_blocks: int) -> None:
    config = get_preset(preset)
    model = build_model(config)
    prompts = _prompts(config.vocab_size, LENGTHS)
    scheduler, requests = _run_staggered(model, prompts, 20, n_blocks, 16, budget=32)
    _assert_same_as_alone(model, prompts, requests, 20)
    assert (scheduler.counters.preemptions > 0) == (n_blocks == 14)
    assert any(r.preemptions for r in requests) == (n_blocks == 14)
    assert scheduler.pool.used() == 0 and not scheduler.pool.seqs  # nothing leaked
    assert scheduler.counters.generation_tokens == 8 * 20


def test_batched_equals_alone_on_gemma_windows_with_preemption() -> None:
    model = build_gemma(TINY, seed=1)
    prompts = _prompts(TINY.vocab_size, [3, 9, 14, 5, 20, 7, 12, 4])
    scheduler, requests = _run_staggered(model, prompts, 10, 40, 2, budget=8)
    _assert_same_as_alone(model, prompts, requests, 10)
    assert scheduler.counters.preemptions > 0
    assert all(scheduler.pool.used(g) == 0 for g in range(2))


@pytest.mark.slow
def test_batched_equals_alone_on_gemma_270m(gemma_model: Gemma3) -> None:
    # 8 sequences, one past the 512-token window, a pool small enough to preempt.
    prompts = _prompts(1000, [5, 40, 530, 20, 120, 8, 64, 300])
    scheduler, requests = _run_staggered(gemma_model, prompts, 6, 36, 16, budget=256)
    # Batching moves Gemma's float32 logits by ~1e-4 (BLAS sums a matrix product of 8
    # rows in another order than one row), with the contiguous cache too: rounding,
    # within the bound of kvlab.engine.rounding (test_batching_alone_is_rounding).
    _assert_same_as_alone(gemma_model, prompts, requests, 6)
    assert scheduler.counters.preemptions > 0
    assert all(scheduler.pool.used(g) == 0 for g in range(len(scheduler.pool.windows)))


@pytest.mark.slow
def test_batching_alone_is_rounding(gemma_model: Gemma3) -> None:
    # One decode step as 1 row vs as 8 identical rows, contiguous cache both times.
    prompt = _prompts(1000, [40])[0]
    ids = torch.tensor([prompt])
    with torch.inference_mode():
        one, eight = new_cache(gemma_model, 41), new_cache(gemma_model, 41, 8)
        gemma_model(ids, one)
        gemma_model(ids.expand(8, -1), eight)
        one.advance(40)
        eight.advance(40)
        step = torch.tensor([[prompt[0]]])
        alone = gemma_model(step, one)[0]
        batched = gemma_model(step.expand(8, 1), eight)
    for row in range(8):
        assert_close_up_to_rounding(batched[row], alone, gemma_model.config, 41)


def test_a_request_that_fits_alone_is_never_refused() -> None:
    model = build_model(get_preset("toy"))
    pool = BlockPool(model.config, n_blocks=5, block_size=16)  # 80 tokens: one at a time
    scheduler = Scheduler(model, pool, token_budget=64)
    requests = [scheduler.submit(_greedy(p, 30)) for p in _prompts(256, [50, 45, 40])]
    scheduler.run()
    assert [len(r.tokens) for r in requests] == [30, 30, 30]
    assert pool.used() == 0


def test_a_request_larger_than_the_pool_is_refused_at_once() -> None:
    model = build_model(get_preset("toy"))
    scheduler = Scheduler(model, BlockPool(model.config, n_blocks=4, block_size=16))
    with pytest.raises(RequestTooLarge, match="needs 5 KV blocks of 16 tokens, the pool has 4"):
        scheduler.submit(_greedy(list(range(60)), 20))  # 79 tokens: 5 blocks
    assert scheduler.idle


def test_a_cancelled_request_gives_its_blocks_back_at_the_next_step() -> None:
    model = build_model(get_preset("toy"))
    pool = BlockPool(model.config, n_blocks=16, block_size=16)
    scheduler = Scheduler(model, pool)
    gone = scheduler.submit(_greedy(list(range(40)), 50))
    stays = scheduler.submit(_greedy(list(range(10)), 5))
    scheduler.step()
    assert pool.used() == 4  # 3 blocks for 40 tokens, 1 for 10
    gone.cancelled = True
    ended = scheduler.step()
    assert gone in ended and gone.stop_type == "cancelled"
    assert pool.used() == 1 and gone.id not in pool.seqs
    scheduler.run()
    assert stays.stop_type == "limit" and pool.used() == 0


def test_generation_stops_at_a_stop_token() -> None:
    model = build_model(get_preset("toy"))
    prompt = _prompts(256, [12])[0]
    alone = generate(model, prompt, 8)
    stop = alone.tokens[3]
    scheduler = Scheduler(model, BlockPool(model.config, n_blocks=8, block_size=16))
    req = scheduler.submit(Request(prompt, 8, make_sampler(0.0, None), stop_ids=(stop,)))
    scheduler.run()
    first = alone.tokens.index(stop)
    assert req.tokens == alone.tokens[:first + 1] and req.stop_type == "eos"


class _Counting:
    """A model that counts its forwards and the tokens of each."""

    def __init__(self, model) -> None:
        self.model, self.config, self.calls = model, model.config, []

    def __call__(self, ids, cache=None, **kwargs):
        self.calls.append(ids.shape)
        return self.model(ids, cache, **kwargs)

    def parameters(self):
        return self.model.parameters()


def test_each_step_is_one_forward_of_rows_and_chunks() -> None:
    model = _Counting(build_model(get_preset("toy")))
    scheduler = Scheduler(model, BlockPool(model.config, n_blocks=32, block_size=16),
                          token_budget=16)
    first = scheduler.submit(_greedy(_prompts(256, [5])[0], 4))
    scheduler.step()  # its whole prompt
    second = scheduler.submit(_greedy(_prompts(256, [40])[0], 4))
    steps = 0
    while not scheduler.idle:
        scheduler.step()
        steps += 1
    assert len(model.calls) == steps + 1  # one forward per step, never one per sequence
    # Step 2: first's decode row and second's first chunk of 16 tokens, flattened.
    assert model.calls[1] == (1, 17)
    assert first.n_out == second.n_out == 4


class _FailingAt(_Counting):
    """A model whose forward number ``fail_at`` (from 0) raises, as a broken step would."""

    def __init__(self, model, fail_at: int) -> None:
        super().__init__(model)
        self.fail_at = fail_at

    def __call__(self, ids, cache=None, **kwargs):
        if len(self.calls) == self.fail_at:
            self.calls.append(ids.shape)
            raise RuntimeError("the forward failed")
        return super().__call__(ids, cache, **kwargs)


def test_abort_all_after_a_failed_step_ends_everything_and_empties_the_pool() -> None:
    model = _FailingAt(build_model(get_preset("toy")), fail_at=2)
    pool = BlockPool(model.config, n_blocks=6, block_size=16)
    scheduler = Scheduler(model, pool, max_running=2, token_budget=32)
    requests = [scheduler.submit(_greedy(p, 10)) for p in _prompts(256, [20, 30, 12])]
    scheduler.step()
    scheduler.step()  # the first two run, the third waits for a place
    with pytest.raises(RuntimeError, match="the forward failed"):
        scheduler.step()  # blocks were taken for this step; nothing was committed
    assert pool.used() > 0
    ended = scheduler.abort_all()
    assert ended == requests  # running first (in admission order), then waiting
    assert all(r.stop_type == "aborted" for r in ended) and scheduler.idle
    assert pool.used() == 0 and not pool.seqs
    # The scheduler serves on: a new request gets the tokens it gets alone.
    prompt = _prompts(256, [25])[0]
    req = scheduler.submit(_greedy(prompt, 6))
    scheduler.run()
    alone = generate(model.model, prompt, 6, keep_logits=True)
    assert_same_generation(req.tokens, torch.stack(req.logits), alone.tokens, alone.logits,
                           model.config, 31)


def test_stats_are_a_snapshot_of_requests_blocks_and_counters() -> None:
    model = build_model(get_preset("toy"))
    pool = BlockPool(model.config, n_blocks=8, block_size=16, prefix_caching=True)
    scheduler = Scheduler(model, pool, max_running=1)
    for prompt in _prompts(256, [20, 10]):
        scheduler.submit(_greedy(prompt, 4))
    scheduler.step()  # the first one's whole prompt and first token; the second waits
    stats = scheduler.stats()
    assert (stats.running, stats.waiting, stats.blocks_total) == (1, 1, 8)
    assert stats.blocks_used == {None: 2} and stats.blocks_cached == {None: 0}
    assert (stats.counters.prompt_tokens, stats.counters.generation_tokens) == (20, 1)
    scheduler.run()
    assert stats.counters.generation_tokens == 1  # a copy, not the live counters
    after = scheduler.stats()
    assert (after.running, after.waiting, after.blocks_used) == (0, 0, {None: 0})
    assert after.blocks_cached == {None: 1}  # the first's one full block, kept for a hit
    assert after.counters.generation_tokens == 8 and after.counters.finished == 2
    without = Scheduler(model, BlockPool(model.config, n_blocks=8, block_size=16)).stats()
    assert without.blocks_cached is None
