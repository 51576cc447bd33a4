"""The paged cache's prediction: blocks equal to the engine's pool, bytes from blocks."""

from __future__ import annotations

import pytest

from kvlab.memory import kv_bytes, shape_from_preset
from kvlab.memory.paged import contiguous_bytes, paged_kv_bytes
from kvlab.studies.kv_measure import measure_paged_blocks

LENGTHS = [1, 15, 16, 17, 100, 511, 512, 513, 600, 1000, 4096]


@pytest.mark.parametrize("block", [1, 8, 16, 32])
@pytest.mark.parametrize("model", ["toy", "gemma-3-270m"])
def test_predicted_blocks_equal_the_engine_pool(model: str, block: int) -> None:
    shape = shape_from_preset(model)
    lengths = LENGTHS if model != "toy" else [n for n in LENGTHS if n <= 512]
    est = paged_kv_bytes(shape, lengths, block)
    got = measure_paged_blocks(shape, lengths, block, n_blocks=est.blocks_global)
    assert (got.blocks_global, got.blocks_swa) == (est.blocks_global, est.blocks_swa)


def test_blocks_bytes_and_waste_by_hand() -> None:
    shape = shape_from_preset("toy")  # 3 layers, 5 KV heads x 32: 1,280 B/token/layer in f32
    est = paged_kv_bytes(shape, [17, 32], 16, type_k="f32")
    assert est.blocks_global == 2 + 2 and est.blocks_swa is None
    per_token = 3 * 2 * 5 * 32 * 4
    assert est.bytes == 4 * 16 * per_token
    assert est.token_bytes == 49 * per_token
    assert est.waste == pytest.approx(1 - 49 / 64)


def test_sliding_layers_hold_the_window_only() -> None:
    shape = shape_from_preset("gemma-3-270m")  # window 512 on 15 of 18 layers
    est = paged_kv_bytes(shape, [4096], 16)
    assert est.blocks_global == 256
    assert est.blocks_swa == 32  # positions 3585..4095 lie in blocks 224..255


def test_contiguous_reservation_is_the_plain_formula() -> None:
    shape = shape_from_preset("gemma-3-270m")
    reserved = contiguous_bytes(shape, 4, 4096, type_k="f16")
    assert reserved == kv_bytes(shape, 4096, type_k="f16", n_seq=4).total_bytes
