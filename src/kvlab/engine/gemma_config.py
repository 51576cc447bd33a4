"""The shape of a Gemma 3 text model, validated once, read from a GGUF file's metadata.

Gemma 3 270M: vocab 262,144, d_model 640, 18 layers, 4 query heads sharing 1 KV head
of 256, GeGLU MLP of 2,048, RMS eps 1e-6, context 32,768. Five of every six layers
attend within a sliding window of 512 tokens with RoPE base 10,000; every sixth
(layers 5, 11, 17) attends to everything with RoPE base 1,000,000.

What the GGUF carries and what it does not (the same rules as llama.cpp):

- the global RoPE base is ``gemma3.rope.freq_base``; the local one is
  ``gemma3.rope.freq_base_swa`` when present, else 10,000, which llama.cpp (and
  Transformers) assume for Gemma 3; the bundled file has no such key;
- which layers slide comes from :mod:`kvlab.memory.gguf_file` (pattern 6 for gemma3,
  or the file's ``attention.sliding_window_pattern``), so the engine and the KV memory
  accounting agree;
- the attention scale is 1/sqrt(head_dim): Gemma 3's ``query_pre_attn_scalar`` equals
  the head dim for every size except 27B, and llama.cpp uses the same rule.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kvlab.errors import ConfigError, ModelFileError

SUPPORTED_ARCHITECTURES = ("gemma3",)
LOCAL_ROPE_BASE = 10_000.0  # llama.cpp's and Transformers' value for Gemma 3


@dataclass(frozen=True)
class GemmaConfig:
    """Shape of a Gemma 3 text decoder. ``sliding`` has one flag per layer."""

    vocab_size: int = 262_144
    d_model: int = 640
    n_layers: int = 18
    n_heads: int = 4
    n_kv_heads: int = 1
    head_dim: int = 256
    ffn_dim: int = 2_048
    max_len: int = 32_768
    norm_eps: float = 1e-6
    rope_base_global: float = 1_000_000.0
    rope_base_local: float = LOCAL_ROPE_BASE
    window: int = 512
    sliding: tuple[bool, ...] = (True,) * 5 + (False,) + (True,) * 5 + (False,) + (True,) * 5 + (
        False,)
    bos_id: int = 2
    eos_ids: tuple[int, ...] = (1, 106)  # <eos>, <end_of_turn>

    def __post_init__(self) -> None:
        for name in ("vocab_size", "d_model", "n_layers", "n_heads", "n_kv_heads",
                     "head_dim", "ffn_dim", "max_len", "window"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise ConfigError(f"{name} must be a positive integer, got {value!r}")
        if self.n_heads % self.n_kv_heads != 0:
            raise ConfigError(
                f"n_kv_heads ({self.n_kv_heads}) must divide n_heads ({self.n_heads})"
            )
        if len(self.sliding) != self.n_layers:
            raise ConfigError(
                f"sliding has {len(self.sliding)} flags for {self.n_layers} layers"
            )
        if self.head_dim % 2:
            raise ConfigError(f"RoPE needs an even head_dim, got {self.head_dim}")

    @property
    def layer_windows(self) -> tuple[int | None, ...]:
        """Per layer: the sliding window in tokens, or None for a global layer."""
        return tuple(self.window if s else None for s in self.sliding)

    @property
    def mlp_width(self) -> int:
        """Width of the MLP's hidden layer."""
        return self.ffn_dim

    @property
    def group_size(self) -> int:
        """Query heads that share one KV head."""
        return self.n_heads // self.n_kv_heads

    @property
    def attention_kind(self) -> str:
        """"MHA", "GQA" or "MQA"."""
        if self.n_kv_heads == self.n_heads:
            return "MHA"
        return "MQA" if self.n_kv_heads == 1 else "GQA"

    def rope_base(self, layer: int) -> float:
        """The RoPE base of ``layer``: local for sliding layers, global otherwise."""
        return self.rope_base_local if self.sliding[layer] else self.rope_base_global


def gemma_config_from_metadata(meta: dict[str, Any], source: str) -> GemmaConfig:
    """The config of a GGUF whose metadata is ``meta`` (``source`` names the file).

    ModelFileError for another architecture (naming it and the supported ones) or a
    missing key.
    """
    from kvlab.memory.gguf_file import shape_from_gguf_metadata

    arch = meta.get("general.architecture")
    if arch not in SUPPORTED_ARCHITECTURES:
        raise ModelFileError(
            f"{source}: architecture {arch!r} is not supported by the reference engine; "
            f"supported: {', '.join(SUPPORTED_ARCHITECTURES)}"
        )
    shape = shape_from_gguf_metadata(meta, name=str(meta.get("general.name", arch)),
                                     source=source)

    def need(key: str) -> Any:
        value = meta.get(f"{arch}.{key}")
        if value is None:
            raise ModelFileError(f"{source}: missing key {arch}.{key}")
        return value

    vocab = meta.get("tokenizer.ggml.tokens")  # skipped (too long) by the header reader
    eos = meta.get("tokenizer.ggml.eos_token_id", 1)
    try:
        return GemmaConfig(
            vocab_size=int(meta.get(f"{arch}.vocab_size", len(vocab) if vocab else 262_144)),
            d_model=int(need("embedding_length")),
            n_layers=shape.n_layers,
            n_heads=shape.n_heads,
            n_kv_heads=shape.kv_heads[0],
            head_dim=shape.head_dim_k,
            ffn_dim=int(need("feed_forward_length")),
            max_len=int(need("context_length")),
            norm_eps=float(need("attention.layer_norm_rms_epsilon")),
            rope_base_global=float(need("rope.freq_base")),
            rope_base_local=float(meta.get(f"{arch}.rope.freq_base_swa", LOCAL_ROPE_BASE)),
            window=shape.n_swa if any(shape.is_swa) else int(need("context_length")),
            sliding=shape.is_swa,
            bos_id=int(meta.get("tokenizer.ggml.bos_token_id", 2)),
            eos_ids=tuple(dict.fromkeys((int(eos), 106))),
        )
    except ConfigError as exc:
        raise ModelFileError(f"{source}: {exc}") from None


def read_gemma_config(path: str | Path) -> GemmaConfig:
    """The config of the GGUF file at ``path`` (header only; fast)."""
    from kvlab.memory.gguf_file import read_gguf_metadata

    return gemma_config_from_metadata(read_gguf_metadata(path), f"GGUF file {str(path)!r}")
