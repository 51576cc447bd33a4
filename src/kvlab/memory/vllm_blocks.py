"""vLLM's KV block pool for a model: its block groups, the bytes of one block, and the
blocks a KV space buys. Rules of vLLM 0.32 (``vllm/v1/core/kv_cache_utils.py``).

- **Groups** (``get_kv_cache_groups``). Layers that share one block table per sequence
  form a group. A model whose layers all keep the same tokens (all full attention, or
  one sliding window everywhere) has one group of every layer. A hybrid model with one
  page size (``_get_kv_cache_groups_uniform_page_size``) buckets its layers by kind
  (full, each window) and splits every bucket into groups of ``group_size`` layers:
  the smallest bucket's size, or the largest's when that is under 1.5 times the
  smallest. Gemma 3 270M (3 full, 15 sliding layers): 1 full group and 5 sliding
  groups of 3 layers each.
- **One shared pool** (``get_kv_cache_config_from_groups``). Every group takes its
  blocks from the same ``num_gpu_blocks``; a block id is one page on each layer of the
  group that holds it, so a block costs ``bytes_per_block`` = the largest group's
  pages, and ``num_gpu_blocks = KV bytes // bytes_per_block``
  (``--num-gpu-blocks-override`` replaces it: ``may_override_num_blocks``). A sequence
  of L tokens shorter than the window holds ``ceil(L / block)`` blocks in *each* group:
  six times as many block ids as its full-attention blocks on Gemma 3.
- **The null block** (``vllm/v1/core/block_pool.py``, ``BlockPool.__init__``): the first
  block is taken at start as the placeholder for freed sliding-window entries, so
  ``num_gpu_blocks - 1`` are usable; ``get_usage`` (``kv_cache_usage_perc``) divides
  by that.
- **A page** (``AttentionSpec.page_size_bytes``) is K and V of ``block`` tokens on one
  layer: ``block x (K width + V width) x bytes per value``, in the model's dtype
  (``--kv-cache-dtype auto``).
"""

from __future__ import annotations

from dataclasses import dataclass

from kvlab.errors import ConfigError
from kvlab.memory.dtypes import get_dtype, row_bytes
from kvlab.memory.formula import GIB, check_positive
from kvlab.memory.shapes import ModelShape


@dataclass(frozen=True)
class BlockGroup:
    """Layers that share one block table per sequence; ``count`` such groups.

    ``window``: the sliding window in tokens (None: full attention); ``layers``: layers
    in the largest of these groups (the block's bytes follow it).
    """

    window: int | None
    layers: int
    count: int = 1

    def describe(self) -> str:
        """E.g. "5 window-512 groups of 3 layers"."""
        kind = "full" if self.window is None else f"window-{self.window}"
        return f"{self.count} {kind} group{'s' if self.count > 1 else ''} of {self.layers} layers"


def _kv_layers(shape: ModelShape) -> list[int]:
    return [il for il in range(shape.n_layers) if shape.kv_heads[il] > 0]


def _window(shape: ModelShape, il: int) -> int | None:
    return shape.n_swa if shape.is_swa[il] and shape.n_swa else None


def vllm_groups(shape: ModelShape) -> tuple[BlockGroup, ...]:
    """vLLM's KV cache groups for ``shape`` (see the module docstring)."""
    buckets: dict[int | None, list[int]] = {}
    for il in _kv_layers(shape):
        buckets.setdefault(_window(shape, il), []).append(il)
    if len(buckets) == 1:
        (window, layers), = buckets.items()
        return (BlockGroup(window, len(layers)),)
    widths = {shape.k_width(il) + shape.v_width(il) for il in _kv_layers(shape)}
    if len(widths) > 1:
        raise ConfigError(
            f"model {shape.name!r} mixes sliding and full layers of different widths "
            f"{sorted(widths)}; vLLM packs such pages side by side, which kvlab does not "
            "model: give --kv-blocks from vLLM's /metrics and a model of one width")
    sizes = [len(layers) for layers in buckets.values()]
    group_size = min(sizes)
    if max(sizes) < group_size * 1.5:
        group_size = max(sizes)
    groups = []
    for window, layers in sorted(buckets.items(), key=lambda kv: kv[0] or 0):
        count = -(-len(layers) // group_size)
        groups.append(BlockGroup(window, -(-len(layers) // count), count))
    return tuple(groups)


def vllm_block_bytes(shape: ModelShape, block_size: int, dtype: str = "bf16") -> int:
    """Bytes one block id takes in vLLM's pool: K and V of ``block_size`` tokens on
    every layer of the largest group."""
    check_positive(block_size, "the block size")
    dt = get_dtype(dtype)

    def page(il: int) -> int:
        return block_size * (row_bytes(dt, shape.k_width(il)) + row_bytes(dt, shape.v_width(il)))

    groups = vllm_groups(shape)
    if len(groups) == 1:  # one group of every layer, each with its own width
        return sum(page(il) for il in _kv_layers(shape))
    return page(_kv_layers(shape)[0]) * max(g.layers for g in groups)  # one width


def vllm_blocks_for_bytes(
    shape: ModelShape, n_bytes: int, block_size: int, dtype: str = "bf16",
) -> int:
    """``num_gpu_blocks`` for a KV space of ``n_bytes`` (VLLM_CPU_KVCACHE_SPACE in GiB,
    or ``--kv-cache-memory-bytes``)."""
    check_positive(n_bytes, "the KV space in bytes")
    return n_bytes // vllm_block_bytes(shape, block_size, dtype)


def vllm_logged_capacity(
    shape: ModelShape, num_blocks: int, block_size: int, max_model_len: int,
    max_num_batched_tokens: int = 2048,
) -> tuple[int, float]:
    """What vLLM logs at start-up: ``KV cache size: N tokens, Maximum concurrency for
    max_model_len tokens per request: X`` (``get_kv_cache_capacity``): the pool's blocks
    over one max-length request's blocks, summed over groups; a sliding group counts
    ``ceil(min(window - 1 + max_num_batched_tokens, max_model_len) / block) + 1``."""
    per_request = 0
    for g in vllm_groups(shape):
        if g.window is None:
            blocks = -(-max_model_len // block_size)
        else:
            tokens = min(g.window - 1 + max_num_batched_tokens, max_model_len)
            blocks = -(-tokens // block_size) + 1
        per_request += g.count * blocks
    concurrency = num_blocks / per_request
    return int(concurrency * max_model_len), concurrency


def kv_space_bytes(gib: float) -> int:
    """Bytes of a KV space given in GiB."""
    if gib <= 0:
        raise ConfigError(f"the KV space must be positive, got {gib:g} GiB")
    return int(gib * GIB)
