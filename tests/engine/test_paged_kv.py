"""The paged cache's K/V tensors, apart from the block allocator: one cell per token of
every block on every layer, and only tensors made for the pool are used with it."""

from __future__ import annotations

import pytest
import torch

from kvlab.engine import get_preset
from kvlab.engine.paged import BlockPool
from kvlab.engine.paged_kv import PagedKV
from kvlab.engine.ragged import RaggedBatch
from kvlab.engine.scheduler import Scheduler
from kvlab.errors import EngineError
from tests.engine.test_gemma import TINY


def test_every_block_has_its_cells_on_every_layer() -> None:
    pool = BlockPool(TINY, n_blocks=10, block_size=2)  # sliding and full layers alike
    kv = PagedKV.for_pool(pool, torch.bfloat16)
    assert len(kv.k) == len(kv.v) == TINY.n_layers
    assert all(t.shape == (20, TINY.n_kv_heads, TINY.head_dim) and t.dtype == torch.bfloat16
               for t in (*kv.k, *kv.v))
    per_cell = TINY.n_kv_heads * TINY.head_dim * 2  # bytes of one token's K (or V)
    assert kv.block_nbytes == 2 * 2 * per_cell
    assert kv.nbytes == TINY.n_layers * 10 * kv.block_nbytes


def test_the_allocator_holds_no_tensor() -> None:
    pool = BlockPool(TINY, n_blocks=10, block_size=2, prefix_caching=True)
    pool.add(0)
    pool.grow(0, 7)
    pool.advance(0, 7)
    assert not [name for name, value in vars(pool).items() if isinstance(value, torch.Tensor)]


def test_tensors_of_another_pool_are_refused() -> None:
    toy = get_preset("toy")
    pool = BlockPool(toy, n_blocks=4, block_size=16)
    pool.add(0)
    pool.grow(0, 3)
    with pytest.raises(EngineError, match="does not match a pool of 4 blocks of 16"):
        RaggedBatch(pool, PagedKV(toy, n_blocks=8, block_size=16), [(0, 3)])
    with pytest.raises(EngineError, match="does not match"):
        PagedKV(TINY, n_blocks=4, block_size=16).check_fits(pool)  # other layers


def test_the_scheduler_allocates_them_in_the_model_dtype() -> None:
    from kvlab.engine import build_model

    model = build_model(get_preset("toy")).to(torch.bfloat16)
    scheduler = Scheduler(model, BlockPool(model.config, n_blocks=4, block_size=16))
    assert scheduler.kv.k[0].dtype == torch.bfloat16 and scheduler.kv.n_cells == 64
