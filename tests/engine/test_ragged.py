"""One flattened forward: decode rows and prefill chunks of several sequences in one row
of tokens give each sequence the logits it gets alone, whatever the order."""

from __future__ import annotations

import pytest
import torch

from kvlab.engine import build_model, get_preset
from kvlab.engine.gemma import build_gemma
from kvlab.engine.generate import generate
from kvlab.engine.paged import BlockPool
from kvlab.engine.paged_kv import PagedKV
from kvlab.engine.ragged import RaggedBatch
from kvlab.errors import EngineError
from tests.engine.test_gemma import TINY
from tests.rounding import assert_close_up_to_rounding

MODELS = {"toy-gqa": lambda: build_model(get_preset("toy-gqa"), seed=3),
          "gemma-tiny": lambda: build_gemma(TINY, seed=2)}


def _prompt(vocab: int, n: int, seed: int) -> list[int]:
    return torch.randint(0, vocab, (n,), generator=torch.Generator().manual_seed(seed)).tolist()


def _prefill(model, pool: BlockPool, kv: PagedKV, seq: int, ids: list[int]) -> None:
    pool.add(seq)
    pool.grow(seq, len(ids))
    batch = RaggedBatch(pool, kv, [(seq, len(ids))])
    model(torch.tensor([ids]), batch, last_only=True)
    batch.advance()


@pytest.mark.parametrize("name", list(MODELS))
@pytest.mark.parametrize("chunks_first", [False, True])
def test_rows_and_chunks_in_one_forward_equal_each_alone(name: str, chunks_first: bool
                                                         ) -> None:
    # Four sequences at four stages, in one forward: two decode their next token, one
    # computes the second chunk of its prompt (past the window of 4 on gemma-tiny's
    # sliding layers), one its whole prompt.
    model = MODELS[name]()
    vocab = model.config.vocab_size
    prompts = [_prompt(vocab, n, seed) for seed, n in enumerate((9, 14, 13, 6))]
    refs = [generate(model, p, 2, keep_logits=True) for p in prompts]
    pool = BlockPool(model.config, n_blocks=32, block_size=4)
    kv = PagedKV.for_pool(pool)
    with torch.inference_mode():
        _prefill(model, pool, kv, 0, prompts[0])
        _prefill(model, pool, kv, 1, prompts[1])
        _prefill(model, pool, kv, 2, prompts[2][:5])  # the first chunk of sequence 2
        work = [(0, [refs[0].tokens[0]]), (1, [refs[1].tokens[0]]),
                (2, prompts[2][5:]), (3, prompts[3])]
        if chunks_first:
            work = work[2:] + work[:2]
        pool.add(3)
        for seq, ids in work:
            pool.grow(seq, len(ids))
        batch = RaggedBatch(pool, kv, [(seq, len(ids)) for seq, ids in work])
        row = torch.tensor([[t for _, ids in work for t in ids]])  # (1, N)
        lasts = torch.tensor([s.last for s in batch.segments])
        logits = model(row, batch, logits_at=lasts)[0]  # (4, V)
        batch.advance()
    expected = {0: refs[0].logits[1], 1: refs[1].logits[1], 2: refs[2].logits[0],
                3: refs[3].logits[0]}
    for (seq, _), got in zip(work, logits, strict=True):
        assert_close_up_to_rounding(got, expected[seq], model.config, 16)
    assert [pool.length(s) for s in range(4)] == [10, 15, 13, 6]


def test_positions_follow_each_sequence() -> None:
    pool = BlockPool(get_preset("toy"), n_blocks=8, block_size=4)
    kv = PagedKV.for_pool(pool)
    for seq, n in ((0, 5), (1, 2)):
        pool.add(seq)
        pool.grow(seq, n)
        pool.advance(seq, n)
    pool.add(2)
    for seq, n in ((0, 1), (2, 3), (1, 1)):
        pool.grow(seq, n)
    batch = RaggedBatch(pool, kv, [(0, 1), (2, 3), (1, 1)])
    assert batch.positions(5).tolist() == [[5, 0, 1, 2, 2]]
    assert [s.last for s in batch.segments] == [0, 3, 4]
    with pytest.raises(EngineError, match="planned for 5 tokens"):
        batch.positions(4)


def test_an_empty_segment_is_refused() -> None:
    pool = BlockPool(get_preset("toy"), n_blocks=4, block_size=4)
    kv = PagedKV.for_pool(pool)
    pool.add(0)
    with pytest.raises(EngineError, match="at least one token"):
        RaggedBatch(pool, kv, [(0, 0)])
