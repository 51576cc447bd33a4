"""The rounding bound (kvlab.engine.rounding) is loose enough for another order of the
same sums and tight enough to catch a real bug: a wrong mask, a wrong position or a
wrong block table moves the logits far beyond it."""

from __future__ import annotations

import math

import pytest
import torch

from kvlab.engine import KVCache, build_model, get_preset
from kvlab.engine.gemma import build_gemma
from kvlab.engine.gemma_config import GemmaConfig
from kvlab.engine.generate import generate
from kvlab.engine.paged import BlockPool
from kvlab.engine.paged_kv import PagedKV
from kvlab.engine.ragged import RaggedBatch
from kvlab.engine.rounding import FLOAT32_EPS, ULPS, rounding_bound, summed_terms
from tests.engine.test_gemma import TINY
from tests.rounding import assert_close_up_to_rounding

MODELS = {"toy": lambda: build_model(get_preset("toy"), seed=1),
          "gemma-tiny": lambda: build_gemma(TINY, seed=1)}
PROMPT_LEN, STEPS = 12, 4


def test_the_bound_follows_the_shape_and_the_scale() -> None:
    gemma = GemmaConfig()  # Gemma 3 270M: 18 layers, MLP width 2,048
    assert summed_terms(gemma, n_keys=600) == 18 * 2048
    assert summed_terms(gemma, n_keys=4096) == 18 * 4096  # keys past the widths
    logits = torch.tensor([-32.0, 1.0])
    assert rounding_bound(logits, gemma, 600) == pytest.approx(
        ULPS * FLOAT32_EPS * 32 * math.sqrt(18 * 2048))
    assert rounding_bound(2 * logits, gemma, 600) == pytest.approx(
        2 * rounding_bound(logits, gemma, 600))


class _HiddenFirstKey(KVCache):
    """A mask bug: the oldest key the query should see is hidden."""

    def attn_mask(self, layer: int, n_new: int, n_keys: int) -> torch.Tensor | None:
        mask = super().attn_mask(layer, n_new, n_keys)
        if mask is None:
            mask = torch.ones(n_new, n_keys, dtype=torch.bool).tril(n_keys - n_new)
        mask = mask.clone()
        mask[..., 0] = False
        return mask


class _ShiftedPositions(KVCache):
    """A position bug: decoded tokens are placed one position too far (an off-by-one
    after the prefill; RoPE sees distances, so a shift of every position is no bug)."""

    def positions(self, n_new: int, start_pos: int | None = None) -> torch.Tensor:
        return super().positions(n_new, start_pos) + (1 if n_new == 1 else 0)


def _decode(model, prompt: list[int], cache_class: type[KVCache]) -> torch.Tensor:
    """Logits (STEPS, vocab): a cached prefill, then the reference's tokens one by one."""
    forced = generate(model, prompt, STEPS).tokens
    cache = cache_class(model.config, max_len=PROMPT_LEN + STEPS + 1)
    rows = []
    with torch.inference_mode():
        ids = torch.tensor([prompt])
        for step in range(STEPS):
            rows.append(model(ids, cache, last_only=True)[0, -1])
            cache.advance(ids.shape[1])
            ids = torch.tensor([[forced[step]]])
    return torch.stack(rows)


@pytest.mark.parametrize("name", list(MODELS))
@pytest.mark.parametrize("bug", [_HiddenFirstKey, _ShiftedPositions])
def test_a_wrong_mask_or_position_fails_the_bound(name: str, bug: type[KVCache]) -> None:
    model = MODELS[name]()
    prompt = torch.randint(0, model.config.vocab_size, (PROMPT_LEN,),
                           generator=torch.Generator().manual_seed(0)).tolist()
    reference = generate(model, prompt, STEPS, use_cache=False, keep_logits=True).logits
    n_keys = PROMPT_LEN + STEPS
    # The right cache passes (the control), the buggy one fails.
    assert_close_up_to_rounding(_decode(model, prompt, KVCache), reference, model.config,
                                n_keys)
    with pytest.raises(AssertionError, match="exceeds the rounding bound"):
        assert_close_up_to_rounding(_decode(model, prompt, bug), reference, model.config,
                                    n_keys)


@pytest.mark.parametrize("name", list(MODELS))
@pytest.mark.parametrize("swap", [False, True])
def test_a_wrong_block_table_fails_the_bound(name: str, swap: bool) -> None:
    model = MODELS[name]()
    prompts = [torch.randint(0, model.config.vocab_size, (PROMPT_LEN,),
                             generator=torch.Generator().manual_seed(s)).tolist()
               for s in (0, 1)]
    refs = [generate(model, p, 2, keep_logits=True) for p in prompts]
    pool = BlockPool(model.config, n_blocks=32, block_size=4)
    kv = PagedKV.for_pool(pool)
    with torch.inference_mode():
        for seq, prompt in enumerate(prompts):
            pool.add(seq)
            pool.grow(seq, PROMPT_LEN + 1)
            batch = RaggedBatch(pool, kv, [(seq, PROMPT_LEN)])
            model(torch.tensor([prompt]), batch, last_only=True)
            batch.advance()
        if swap:  # the bug: each sequence's first block points at the other's
            tables = [pool.table(seq, 0) for seq in (0, 1)]
            tables[0][0], tables[1][0] = tables[1][0], tables[0][0]
        batch = RaggedBatch(pool, kv, [(0, 1), (1, 1)])
        logits = model(torch.tensor([[r.tokens[0] for r in refs]]), batch)[0]  # (2, V)
    for seq in (0, 1):
        args = (logits[seq], refs[seq].logits[1], model.config, PROMPT_LEN + 1)
        if swap:
            with pytest.raises(AssertionError, match="exceeds the rounding bound"):
                assert_close_up_to_rounding(*args)
        else:
            assert_close_up_to_rounding(*args)
