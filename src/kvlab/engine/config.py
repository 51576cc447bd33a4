"""The shape of the reference model, validated once, and its named presets.

The default preset ``toy`` is the KV-cache notebook's model (vocab 256, d_model 160,
5 heads of 32, 3 layers, GELU MLP x4) with a longer position table (8192 instead of
512) so the benchmark can reach long contexts. ``toy-gqa`` and ``toy-mqa`` keep
d_model 160 and shrink the KV cache five-fold in two different ways:

- ``toy-gqa``: 10 query heads of 16 sharing 2 KV heads (groups of 5). A head dim of
  32 would need 5 query heads, and 5 has no divisor between 1 and 5, so GQA at
  d_model 160 forces smaller heads.
- ``toy-mqa``: the toy's 5 query heads of 32 sharing a single KV head.

KV values per token per layer (K and V each): toy 5x32=160, toy-gqa 2x16=32,
toy-mqa 1x32=32.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvlab.engine.tokenizer import EOS_ID
from kvlab.errors import ConfigError


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


@dataclass(frozen=True)
class ModelConfig:
    """Shape of a pre-norm causal transformer with learned positions and an untied head.

    ``n_kv_heads`` equal to ``n_heads`` is multi-head attention, 1 is multi-query,
    anything in between that divides ``n_heads`` is grouped-query attention.
    ``max_len`` is the size of the position table: the longest sequence, in tokens.
    """

    vocab_size: int = 256
    d_model: int = 160
    n_heads: int = 5
    n_kv_heads: int = 5
    n_layers: int = 3
    max_len: int = 8192
    mlp_ratio: int = 4

    def __post_init__(self) -> None:
        for name in ("vocab_size", "d_model", "n_heads", "n_kv_heads", "n_layers",
                     "max_len", "mlp_ratio"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise ConfigError(f"{name} must be a positive integer, got {value!r}")
        if self.d_model % self.n_heads != 0:
            raise ConfigError(
                f"d_model ({self.d_model}) must be divisible by n_heads ({self.n_heads}); "
                f"valid n_heads for this d_model: {_divisors(self.d_model)}"
            )
        if self.n_heads % self.n_kv_heads != 0:
            raise ConfigError(
                f"n_kv_heads ({self.n_kv_heads}) must divide n_heads ({self.n_heads}); "
                f"choose one of {_divisors(self.n_heads)}"
            )

    @property
    def head_dim(self) -> int:
        """Width of one attention head."""
        return self.d_model // self.n_heads

    @property
    def mlp_width(self) -> int:
        """Width of the MLP's hidden layer."""
        return self.d_model * self.mlp_ratio

    @property
    def group_size(self) -> int:
        """Query heads that share one KV head (1 for MHA, n_heads for MQA)."""
        return self.n_heads // self.n_kv_heads

    @property
    def layer_windows(self) -> tuple[int | None, ...]:
        """Per layer: its sliding window (None: the toy attends to every earlier token)."""
        return (None,) * self.n_layers

    @property
    def eos_ids(self) -> tuple[int, ...]:
        """Token ids that end a generation: the byte tokenizer's NUL."""
        return (EOS_ID,)

    @property
    def attention_kind(self) -> str:
        """"MHA", "GQA" or "MQA"."""
        if self.n_kv_heads == self.n_heads:
            return "MHA"
        return "MQA" if self.n_kv_heads == 1 else "GQA"


PRESETS: dict[str, ModelConfig] = {
    "toy": ModelConfig(),
    "toy-gqa": ModelConfig(n_heads=10, n_kv_heads=2),
    "toy-mqa": ModelConfig(n_heads=5, n_kv_heads=1),
}


def get_preset(name: str) -> ModelConfig:
    """The preset called ``name``; ConfigError listing the valid names otherwise."""
    try:
        return PRESETS[name]
    except KeyError:
        raise ConfigError(
            f"unknown model preset {name!r}; choose one of: {', '.join(PRESETS)}"
        ) from None
