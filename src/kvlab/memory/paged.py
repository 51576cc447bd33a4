"""KV memory of a paged cache: blocks and bytes for a mix of sequence lengths.

A paged cache (vLLM's PagedAttention, kvlab's :mod:`kvlab.engine.paged`) hands out
blocks of ``block`` tokens as sequences grow. A sequence of L tokens holds, on a
full-attention layer, the ⌈L / block⌉ blocks that cover its positions 0..L-1. On a
sliding-window layer of window W, the next query (position L) sees only positions
L-W+1..L, so the blocks before the one holding position L-W+1 are given back: it
holds the blocks covering max(0, L-W+1)..L-1. Only the last block of each run is
partly empty, which is the whole of paging's waste.

The contiguous alternative (llama.cpp's ``-np`` slots, one buffer per slot) reserves
``capacity`` cells per sequence whatever it holds; :func:`contiguous_bytes` is that
reservation, for the comparison.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvlab.memory.dtypes import get_dtype, row_bytes
from kvlab.memory.formula import check_positive
from kvlab.memory.shapes import ModelShape


def _blocks(length: int, window: int | None, block: int) -> int:
    """Blocks covering the positions a sequence of ``length`` tokens still needs."""
    if length == 0:
        return 0
    first_needed = 0 if window is None else max(0, length - window + 1)
    return (length - 1) // block - first_needed // block + 1


@dataclass(frozen=True)
class PagedEstimate:
    """Blocks and bytes a paged cache holds for ``lengths`` (tokens per sequence)."""

    model: str
    block: int
    lengths: tuple[int, ...]
    blocks_global: int  # blocks per full-attention layer, all sequences
    blocks_swa: int | None  # blocks per sliding layer, all sequences (None: no window)
    bytes: int  # K + V of those blocks over every layer
    token_bytes: int  # K + V of the tokens themselves (no block rounding)
    type_k: str
    type_v: str

    @property
    def waste(self) -> float:
        """Share of the blocks' bytes that hold no token (the partly filled last blocks)."""
        return 1 - self.token_bytes / self.bytes if self.bytes else 0.0

    def as_dict(self) -> dict[str, object]:
        return {
            "model": self.model, "block": self.block, "lengths": list(self.lengths),
            "blocks_global": self.blocks_global, "blocks_swa": self.blocks_swa,
            "bytes": self.bytes, "token_bytes": self.token_bytes, "waste": self.waste,
            "type_k": self.type_k, "type_v": self.type_v,
        }


def _layer_row_bytes(shape: ModelShape, il: int, type_k: str, type_v: str) -> int:
    """K + V bytes of one token on layer ``il``."""
    return (row_bytes(get_dtype(type_k), shape.k_width(il))
            + row_bytes(get_dtype(type_v), shape.v_width(il)))


def paged_kv_bytes(
    shape: ModelShape, lengths: list[int], block: int = 16, *, type_k: str = "f32",
    type_v: str | None = None,
) -> PagedEstimate:
    """Blocks and bytes for sequences of ``lengths`` tokens in blocks of ``block``."""
    check_positive(block, "the block size")
    for n in lengths:
        check_positive(n, "a sequence length")
    tv = type_v or type_k
    total = tokens = 0
    per_kind: dict[bool, int] = {}
    for il, swa in enumerate(shape.is_swa):
        if shape.kv_heads[il] == 0:
            continue
        window = shape.n_swa if swa and shape.n_swa else None
        n_blocks = sum(_blocks(n, window, block) for n in lengths)
        held = sum(n if window is None else min(n, window - 1) for n in lengths)
        per_kind[window is not None] = n_blocks
        row = _layer_row_bytes(shape, il, type_k, tv)
        total += n_blocks * block * row
        tokens += held * row
    return PagedEstimate(
        model=shape.name, block=block, lengths=tuple(lengths),
        blocks_global=per_kind.get(False, 0), blocks_swa=per_kind.get(True),
        bytes=total, token_bytes=tokens, type_k=get_dtype(type_k).name,
        type_v=get_dtype(tv).name,
    )


def contiguous_bytes(
    shape: ModelShape, n_seqs: int, capacity: int, *, type_k: str = "f32",
    type_v: str | None = None,
) -> int:
    """K + V bytes reserved by ``n_seqs`` contiguous slots of ``capacity`` cells each
    (a sliding layer needs only its window per slot)."""
    check_positive(n_seqs, "the number of sequences")
    check_positive(capacity, "the capacity")
    tv = type_v or type_k
    total = 0
    for il, swa in enumerate(shape.is_swa):
        if shape.kv_heads[il] == 0:
            continue
        cells = min(capacity, shape.n_swa) if swa and shape.n_swa else capacity
        total += n_seqs * cells * _layer_row_bytes(shape, il, type_k, tv)
    return total


def max_sequences(
    shape: ModelShape, lengths: list[int], block: int, budget_bytes: int, *,
    type_k: str = "f32", type_v: str | None = None,
) -> int:
    """How many sequences fit ``budget_bytes`` of paged KV at once, taking ``lengths``
    in order (and round again) until the next one's blocks do not fit."""
    check_positive(budget_bytes, "the KV budget")
    if not lengths:
        return 0
    used = count = 0
    while True:
        length = lengths[count % len(lengths)]
        need = paged_kv_bytes(shape, [length], block, type_k=type_k, type_v=type_v).bytes
        if used + need > budget_bytes:
            return count
        used += need
        count += 1
