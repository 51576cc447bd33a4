"""KV-cache bytes by the plain formula (the notebook's view).

    bytes = sum over layers of (row_K + row_V) x cells(layer) x sequences

with ``row = kv_heads x head_dim`` values at the cache type's size, and ``cells`` =
the context length L, or ``min(L, window)`` on sliding-window layers (a rolling
cache that keeps only the window). For a uniform model in a 2-byte type this is the
seed's ``2 x layers x kv_heads x head_dim x L x bytes``. llama.cpp allocates more
cells than this (padding, micro-batch headroom): see :mod:`kvlab.memory.llamacpp`.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvlab.errors import ConfigError
from kvlab.memory.dtypes import get_dtype, row_bytes
from kvlab.memory.shapes import ModelShape

MIB = 1024**2
GIB = 1024**3


@dataclass(frozen=True)
class KvEstimate:
    """Predicted KV bytes of one model at one context length (all sequences)."""

    model: str
    context: int
    n_seq: int
    type_k: str
    type_v: str
    k_bytes: int
    v_bytes: int
    cells_global: int  # cells per global layer and sequence
    cells_swa: int | None  # cells per sliding-window layer and sequence; None: no such layer

    @property
    def total_bytes(self) -> int:
        """K + V bytes."""
        return self.k_bytes + self.v_bytes

    @property
    def mib(self) -> float:
        return self.total_bytes / MIB

    @property
    def gib(self) -> float:
        return self.total_bytes / GIB

    def as_dict(self) -> dict[str, object]:
        """JSON-friendly view with the derived sizes."""
        return {
            "model": self.model,
            "context": self.context,
            "n_seq": self.n_seq,
            "type_k": self.type_k,
            "type_v": self.type_v,
            "cells_global": self.cells_global,
            "cells_swa": self.cells_swa,
            "k_bytes": self.k_bytes,
            "v_bytes": self.v_bytes,
            "bytes": self.total_bytes,
            "mib": self.mib,
            "gib": self.gib,
        }


def check_positive(value: int, what: str) -> int:
    """Return ``value`` or raise ConfigError when it is not a positive integer."""
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ConfigError(f"{what} must be a positive integer, got {value!r}")
    return value


def layer_cells(shape: ModelShape, context: int) -> list[int]:
    """Cells each layer holds for one sequence of ``context`` tokens."""
    check_positive(context, "the context length")
    return [min(context, shape.n_swa) if swa else context for swa in shape.is_swa]


def kv_bytes(
    shape: ModelShape,
    context: int,
    *,
    type_k: str = "bf16",
    type_v: str | None = None,
    n_seq: int = 1,
) -> KvEstimate:
    """KV bytes for ``n_seq`` sequences of ``context`` tokens each.

    ``type_v`` defaults to ``type_k``. Block types need rows that are a whole number of
    blocks (ConfigError otherwise).
    """
    check_positive(n_seq, "the number of sequences")
    dk = get_dtype(type_k)
    dv = get_dtype(type_v) if type_v is not None else dk
    cells = layer_cells(shape, context)
    k_total = v_total = 0
    for il, n_cells in enumerate(cells):
        if shape.kv_heads[il] == 0:
            continue
        k_total += row_bytes(dk, shape.k_width(il)) * n_cells * n_seq
        v_total += row_bytes(dv, shape.v_width(il)) * n_cells * n_seq
    swa_cells = [c for c, s in zip(cells, shape.is_swa, strict=True) if s]
    return KvEstimate(
        model=shape.name,
        context=context,
        n_seq=n_seq,
        type_k=dk.name,
        type_v=dv.name,
        k_bytes=k_total,
        v_bytes=v_total,
        cells_global=context,
        cells_swa=swa_cells[0] if swa_cells else None,
    )


@dataclass(frozen=True)
class MhaComparison:
    """KV bytes of a grouped-query model against the same model with one KV head per query head."""

    gqa: KvEstimate
    mha: KvEstimate

    @property
    def ratio(self) -> float:
        """MHA bytes / GQA bytes (Llama 3.1 8B: 32 KV heads vs 8 -> 4.0)."""
        return self.mha.total_bytes / self.gqa.total_bytes

    def reading(self) -> str:
        """One sentence on what the ratio means."""
        return (
            f"{self.gqa.model}: {self.ratio:g}x more KV bytes with one KV head per query head; "
            "grouped-query attention divides the KV-cache component only, not the whole VRAM "
            "(weights and activations are unchanged)."
        )


def compare_mha(
    shape: ModelShape,
    context: int,
    *,
    type_k: str = "bf16",
    type_v: str | None = None,
    n_seq: int = 1,
) -> MhaComparison:
    """The notebook's exercise: the same d_model and head count with MHA instead of GQA."""
    return MhaComparison(
        gqa=kv_bytes(shape, context, type_k=type_k, type_v=type_v, n_seq=n_seq),
        mha=kv_bytes(shape.with_mha(), context, type_k=type_k, type_v=type_v, n_seq=n_seq),
    )
