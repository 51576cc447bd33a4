from __future__ import annotations

import pytest
import torch

from kvlab.engine import KVCache, ModelConfig
from kvlab.errors import CacheOverflowError, EngineError

CFG = ModelConfig(d_model=32, n_heads=4, n_kv_heads=2, n_layers=2, max_len=64)


def _kv(n: int, fill: float) -> tuple[torch.Tensor, torch.Tensor]:
    shape = (1, CFG.n_kv_heads, n, CFG.head_dim)
    return torch.full(shape, fill), torch.full(shape, -fill)


def test_buffers_are_preallocated_and_counted() -> None:
    cache = KVCache(CFG, batch=3, max_len=10)
    assert cache.k[0].shape == (3, 2, 10, 8) and cache.v[1].shape == (3, 2, 10, 8)
    # 2 (K and V) x layers x batch x kv_heads x max_len x head_dim x 4 bytes
    assert cache.nbytes == 2 * 2 * 3 * 2 * 10 * 8 * 4
    assert KVCache(CFG).max_len == CFG.max_len


def test_update_writes_in_place_and_returns_views_of_the_filled_part() -> None:
    cache = KVCache(CFG, max_len=10)
    for layer in range(CFG.n_layers):
        k, v = cache.update(layer, *_kv(3, 1.0))
        assert k.shape[2] == 3 and v.shape[2] == 3
        # A view into the preallocated buffer, not a copy.
        assert k.data_ptr() == cache.k[layer].data_ptr()
    assert cache.length == 0 and cache.layer_lengths() == [3, 3]
    cache.advance(3)
    assert cache.length == 3
    for layer in range(CFG.n_layers):
        k, v = cache.update(layer, *_kv(1, 2.0))
        assert k.shape[2] == 4
        assert torch.equal(k[:, :, :3], torch.ones(1, 2, 3, 8))
        assert torch.equal(k[:, :, 3], torch.full((1, 2, 8), 2.0))
        assert torch.equal(v[:, :, 3], torch.full((1, 2, 8), -2.0))
    cache.advance(1)
    assert cache.length == 4 and cache.layer_lengths() == [4, 4]


def test_advance_refuses_when_a_layer_did_not_write() -> None:
    cache = KVCache(CFG, max_len=10)
    cache.update(0, *_kv(2, 1.0))
    with pytest.raises(EngineError, match=r"layer\(s\) \[1\]"):
        cache.advance(2)


def test_overflow_and_reset() -> None:
    cache = KVCache(CFG, max_len=4)
    for layer in range(CFG.n_layers):
        cache.update(layer, *_kv(4, 1.0))
    cache.advance(4)
    with pytest.raises(CacheOverflowError, match="holds 4"):
        cache.update(0, *_kv(1, 1.0))
    with pytest.raises(CacheOverflowError):
        cache.advance(1)
    cache.reset()
    assert cache.length == 0 and cache.layer_lengths() == [0, 0]
    k, _ = cache.update(0, *_kv(1, 5.0))
    assert k.shape[2] == 1 and float(k[0, 0, 0, 0]) == 5.0


def test_truncate_keeps_a_prefix_in_place() -> None:
    cache = KVCache(CFG, max_len=8)
    for layer in range(CFG.n_layers):
        cache.update(layer, torch.arange(5.0).view(1, 1, 5, 1).expand(1, 2, 5, 8),
                     torch.zeros(1, 2, 5, 8))
    cache.advance(5)
    cache.truncate(2)
    assert cache.length == 2 and cache.layer_lengths() == [2, 2]
    k, _ = cache.update(0, *_kv(1, 9.0))
    assert k[0, 0, :, 0].tolist() == [0.0, 1.0, 9.0]
    with pytest.raises(EngineError, match=r"0\.\.2"):
        cache.truncate(3)


class _Sliding:
    """Two layers: layer 0 slides with a window of 3, layer 1 is global."""

    n_layers, n_kv_heads, head_dim, max_len = 2, 1, 1, 16
    layer_windows = (3, None)


def _positions(n: int, start: int) -> torch.Tensor:
    return torch.arange(start, start + n, dtype=torch.float32).view(1, 1, n, 1)


def _write(cache: KVCache, n: int) -> list[list[float]]:
    seen = []
    for layer in range(2):
        k, _ = cache.update(layer, _positions(n, cache.length), _positions(n, cache.length))
        seen.append(k[0, 0, :, 0].tolist())
    cache.advance(n)
    return seen


def test_sliding_layer_keeps_a_ring_of_window_cells() -> None:
    cache = KVCache(_Sliding(), max_len=10)
    assert cache.cells == [3, 10] and cache.k[0].shape == (1, 1, 3, 1)
    assert cache.nbytes == 2 * (3 + 10) * 4
    # A prefill of 5: the sliding layer's queries need every key (first one looks back
    # 2), and the ring keeps the last 3.
    assert _write(cache, 5) == [[0, 1, 2, 3, 4], [0, 1, 2, 3, 4]]
    assert sorted(cache.k[0][0, 0, :, 0].tolist()) == [2, 3, 4]
    # One token: the ring (any order) holds exactly the window it may see.
    sliding, full = _write(cache, 1)
    assert sorted(sliding) == [3, 4, 5] and full == [0, 1, 2, 3, 4, 5]
    # Two tokens after a past: positions 4..7 in order (position 6 looks back to 4).
    assert _write(cache, 2)[0] == [4, 5, 6, 7]
    assert cache.layer_lengths() == [8, 8]


def test_a_window_as_long_as_the_cache_never_slides() -> None:
    cache = KVCache(_Sliding(), max_len=3)
    assert cache.windows == [None, None] and cache.cells == [3, 3]


def test_truncating_into_overwritten_cells_is_refused() -> None:
    cache = KVCache(_Sliding(), max_len=10)
    _write(cache, 3)
    cache.truncate(2)  # nothing overwritten yet
    _write(cache, 5)  # positions 2..6; the ring holds 4, 5, 6
    with pytest.raises(EngineError, match="sliding-window layer 0"):
        cache.truncate(4)  # would need positions 2 and 3 again
    cache.truncate(6)  # needs 4 and 5: still there
    assert cache.length == 6


def test_truncating_to_nothing_is_allowed_after_the_ring_wrapped() -> None:
    cache = KVCache(_Sliding(), max_len=10)
    _write(cache, 7)  # the ring of 3 has overwritten positions 0..3
    cache.truncate(0)  # keeps no token, so needs no cell
    assert cache.length == 0 and cache.layer_lengths() == [0, 0]
