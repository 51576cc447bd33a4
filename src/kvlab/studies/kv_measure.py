"""Allocate a KV cache for real and count its bytes, to check the formula.

For a shape that is one of the reference engine's presets (``toy``...), or that has
sliding-window layers (Gemma 3: the engine keeps a ring of the window on those), the
engine's own :class:`kvlab.engine.KVCache` is allocated and its ``nbytes`` (element_size
x numel of the real K and V tensors) is the measurement. Any other shape gets one K and
one V tensor per layer, ``[n_seq, kv_heads, cells, head_dim]``, allocated with
``torch.zeros`` (so the pages are really touched). Only plain types (f32, f16, bf16)
can be allocated; shapes over :data:`MAX_MEASURE_BYTES` are refused.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from kvlab.errors import ConfigError
from kvlab.memory.dtypes import get_dtype
from kvlab.memory.formula import GIB, kv_bytes, layer_cells
from kvlab.memory.shapes import ModelShape

if TYPE_CHECKING:  # torch is imported only when the engine measures
    from kvlab.engine.cache import CacheLayout

MAX_MEASURE_BYTES = 1 * GIB


@dataclass(frozen=True)
class Measurement:
    """Bytes held by real tensors, next to the formula's prediction."""

    model: str
    context: int
    n_seq: int
    dtype: str
    measured_bytes: int
    formula_bytes: int
    method: str  # "kvlab.engine.KVCache" or "torch.zeros per layer"

    @property
    def matches(self) -> bool:
        return self.measured_bytes == self.formula_bytes


def measure_kv_bytes(
    shape: ModelShape, context: int, *, dtype: str = "f32", n_seq: int = 1
) -> Measurement:
    """Allocate the cache of ``shape`` for ``n_seq`` x ``context`` tokens and count bytes."""
    import torch

    dt = get_dtype(dtype)
    torch_dtypes = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}
    if dt.name not in torch_dtypes:
        raise ConfigError(
            f"--measure allocates torch tensors, which have no {dt.name} type; use f32, f16 or bf16"
        )
    predicted = kv_bytes(shape, context, type_k=dt.name, n_seq=n_seq).total_bytes
    if predicted > MAX_MEASURE_BYTES:
        raise ConfigError(
            f"{shape.name} at {context} tokens needs {predicted / GIB:.2f} GiB; --measure "
            f"allocates at most {MAX_MEASURE_BYTES / GIB:.0f} GiB (try the toy preset)"
        )
    tdt = torch_dtypes[dt.name]
    engine_cfg = _engine_config(shape)
    if engine_cfg is not None:
        from kvlab.engine import KVCache

        cache = KVCache(engine_cfg, batch=n_seq, max_len=context, dtype=tdt)
        measured, method = cache.nbytes, "kvlab.engine.KVCache"
        del cache
    else:
        measured, method = 0, "torch.zeros per layer"
        for il, cells in enumerate(layer_cells(shape, context)):
            heads = shape.kv_heads[il]
            if heads == 0:
                continue
            for width in (shape.k_width(il), shape.v_width(il)):
                t = torch.zeros((n_seq, heads, cells, width // heads), dtype=tdt)
                measured += t.element_size() * t.numel()
                del t
    return Measurement(shape.name, context, n_seq, dt.name, measured, predicted, method)


def _engine_config(shape: ModelShape) -> CacheLayout | None:
    """The engine's config when ``shape`` is one of its presets with the same geometry,
    or a layout of the engine's cache for a shape with sliding layers."""
    if any(shape.is_swa):
        return _sliding_layout(shape)
    if shape.source != "preset":
        return None
    try:
        from kvlab.engine import PRESETS
    except ImportError:  # the engine is optional for accounting
        return None
    cfg = PRESETS.get(shape.name)
    if cfg is None or any(shape.is_swa):
        return None
    same = (
        cfg.n_layers == shape.n_layers
        and all(kv == cfg.n_kv_heads for kv in shape.kv_heads)
        and cfg.head_dim == shape.head_dim_k == shape.head_dim_v
    )
    return cfg if same else None


@dataclass(frozen=True)
class _SlidingLayout:
    """A cache layout for :class:`kvlab.engine.KVCache` (per-layer windows)."""

    n_layers: int
    n_kv_heads: int
    head_dim: int
    max_len: int
    layer_windows: tuple[int | None, ...]


def _sliding_layout(shape: ModelShape) -> _SlidingLayout | None:
    """The engine cache's layout for a sliding-window shape with one KV head count and
    one head dim (the engine's Gemma 3 cache: rings of the window on sliding layers)."""
    kv = set(shape.kv_heads)
    dims = {shape.head_dim_k, shape.head_dim_v, shape.head_dim_k_swa or shape.head_dim_k,
            shape.head_dim_v_swa or shape.head_dim_v}
    if len(kv) != 1 or len(dims) != 1:
        return None
    windows = tuple(shape.n_swa if swa else None for swa in shape.is_swa)
    # max_len is unused: measure_kv_bytes always passes the context to KVCache.
    return _SlidingLayout(shape.n_layers, kv.pop(), dims.pop(), 1, windows)


@dataclass(frozen=True)
class PagedMeasurement:
    """Blocks the engine's pool hands out for some sequences, per window group."""

    blocks_global: int
    blocks_swa: int | None
    method: str = "kvlab.engine.paged.BlockPool"


def measure_paged_blocks(shape: ModelShape, lengths: list[int], block: int,
                         n_blocks: int) -> PagedMeasurement:
    """Grow one sequence per length in the engine's :class:`BlockPool` of ``n_blocks``
    blocks (each in one step, as a prefill does) and count the blocks it holds (the
    allocator alone: no K/V tensor is allocated)."""
    layout = _engine_config(shape)
    if layout is None:
        raise ConfigError(
            f"--measure with --paged needs a shape the engine can hold (a toy preset or "
            f"a Gemma 3-like sliding layout); {shape.name} is neither"
        )
    from kvlab.engine.paged import BlockPool

    windows = layout.layer_windows
    # No length limit here: every sequence given is held, every window stays a window.
    layout = _SlidingLayout(layout.n_layers, layout.n_kv_heads, layout.head_dim,
                            2**62, tuple(windows))
    pool = BlockPool(layout, n_blocks=n_blocks, block_size=block)
    for seq, length in enumerate(lengths):
        pool.add(seq)
        pool.grow(seq, length)
        pool.advance(seq, length)
    groups = dict(zip(pool.windows, range(len(pool.windows)), strict=True))
    swa = [g for w, g in groups.items() if w is not None]
    return PagedMeasurement(blocks_global=pool.used(groups[None]) if None in groups else 0,
                            blocks_swa=pool.used(swa[0]) if swa else None)
