"""Element types a KV cache can be stored in, and the bytes one cache row takes.

A *row* is what one token writes into one layer's K (or V) cache: ``kv_heads x
head_dim`` values. Plain types cost a fixed number of bytes per value. llama.cpp's
block types (``-ctk/-ctv q8_0`` ...) pack 32 values into one block of a fixed size
(scales included), and a row must hold a whole number of blocks: llama.cpp's
``ggml_row_size`` asserts ``ne % block_size == 0`` and computes
``type_size * ne / block_size``, so there is no rounding up, only refusal.
Block sizes are those of ``ggml/src/ggml-common.h`` (also ``gguf.GGML_QUANT_SIZES``).
"""

from __future__ import annotations

from dataclasses import dataclass

from kvlab.errors import ConfigError


@dataclass(frozen=True)
class KvDtype:
    """A cache element type: ``block_size`` values are stored in ``block_bytes`` bytes."""

    name: str
    block_size: int
    block_bytes: int

    @property
    def is_block(self) -> bool:
        """True for llama.cpp's block-quantized types (more than one value per block)."""
        return self.block_size > 1

    @property
    def bytes_per_value(self) -> float:
        """Average bytes per value (q8_0: 34/32 = 1.0625)."""
        return self.block_bytes / self.block_size


DTYPES: dict[str, KvDtype] = {
    d.name: d
    for d in (
        KvDtype("f32", 1, 4),
        KvDtype("f16", 1, 2),
        KvDtype("bf16", 1, 2),
        KvDtype("q8_0", 32, 34),  # 32 int8 + one f16 scale
        KvDtype("q4_0", 32, 18),  # 16 bytes of nibbles + f16 scale
        KvDtype("q4_1", 32, 20),  # + f16 min
        KvDtype("q5_0", 32, 22),  # + 4 bytes of fifth bits
        KvDtype("q5_1", 32, 24),
        KvDtype("iq4_nl", 32, 18),  # non-linear 4-bit, same layout size as q4_0
    )
}

# Spellings people use for the plain types (torch / numpy names).
_ALIASES = {"fp32": "f32", "float32": "f32", "fp16": "f16", "float16": "f16", "bfloat16": "bf16"}


def get_dtype(name: str) -> KvDtype:
    """Look a cache type up by name (case-insensitive; ``fp16``/``float16`` accepted)."""
    key = name.strip().lower()
    key = _ALIASES.get(key, key)
    try:
        return DTYPES[key]
    except KeyError:
        valid = ", ".join(DTYPES)
        raise ConfigError(f"unknown cache type {name!r}; valid types: {valid}") from None


def row_bytes(dtype: KvDtype | str, n_values: int) -> int:
    """Bytes of one cache row of ``n_values`` values (llama.cpp's ``ggml_row_size``).

    Raises ConfigError when a block type's row is not a whole number of blocks
    (llama.cpp refuses such a cache as well).
    """
    dt = get_dtype(dtype) if isinstance(dtype, str) else dtype
    if n_values <= 0:
        raise ConfigError(f"a cache row needs a positive number of values, got {n_values}")
    if n_values % dt.block_size:
        raise ConfigError(
            f"cache type {dt.name} packs {dt.block_size} values per block, but a row holds "
            f"{n_values} values (kv_heads x head_dim), not a multiple; pick f16/bf16/f32"
        )
    return n_values // dt.block_size * dt.block_bytes
