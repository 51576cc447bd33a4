"""The attention shape of a model, as far as its KV cache is concerned.

A :class:`ModelShape` says, layer by layer, how many K/V heads a token writes, how
wide they are, and whether the layer only looks back over a sliding window. It is
built from a preset (:mod:`kvlab.memory.presets`), a Hugging Face ``config.json``
(:mod:`kvlab.memory.hf_config`) or a GGUF file (:mod:`kvlab.memory.gguf_file`), and
validated once here.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields, replace
from typing import Any

from kvlab.errors import ConfigError


@dataclass(frozen=True)
class ModelShape:
    """Per-layer KV geometry of a decoder.

    ``kv_heads[il]``: K/V heads at layer ``il`` (0: the layer keeps no KV cache).
    K rows are ``head_dim_k`` wide, V rows ``head_dim_v``; ``*_swa`` apply on
    sliding-window layers (``None``: same as the global layers). ``is_swa[il]`` marks
    layers that only attend to the last ``n_swa`` tokens (``n_swa`` = 0: no window).
    ``n_heads``: query heads; ``d_model``: hidden size; ``n_ctx_train``: trained
    context in tokens (``None`` when unknown); ``source``: where the values came from.
    """

    name: str
    n_layers: int
    n_heads: int
    kv_heads: tuple[int, ...]
    head_dim_k: int
    head_dim_v: int
    is_swa: tuple[bool, ...]
    n_swa: int = 0
    head_dim_k_swa: int | None = None
    head_dim_v_swa: int | None = None
    d_model: int | None = None
    n_ctx_train: int | None = None
    source: str = "preset"

    def __post_init__(self) -> None:
        where = f"model {self.name!r} ({self.source})"
        if self.n_layers <= 0:
            raise ConfigError(f"{where}: n_layers must be positive, got {self.n_layers}")
        if len(self.kv_heads) != self.n_layers or len(self.is_swa) != self.n_layers:
            raise ConfigError(
                f"{where}: expected {self.n_layers} per-layer values, got {len(self.kv_heads)} "
                f"kv head counts and {len(self.is_swa)} sliding-window flags"
            )
        if self.n_heads <= 0:
            raise ConfigError(f"{where}: the attention head count must be positive")
        if not any(self.kv_heads):
            raise ConfigError(f"{where}: no layer has KV heads, so there is no KV cache")
        for il, kv in enumerate(self.kv_heads):
            # 0 KV heads: a layer without a KV cache (recurrent layers of hybrid models).
            if kv < 0 or (kv and self.n_heads % kv):
                raise ConfigError(
                    f"{where}: layer {il} has {kv} KV heads, which does not divide the "
                    f"{self.n_heads} query heads; fix the head counts"
                )
        dims = (self.head_dim_k, self.head_dim_v, self.head_dim_k_swa, self.head_dim_v_swa)
        if any(d is not None and d <= 0 for d in dims):
            raise ConfigError(f"{where}: head dimensions must be positive, got {dims}")
        if any(self.is_swa) and self.n_swa <= 0:
            raise ConfigError(f"{where}: sliding-window layers need a positive window size")
        if self.n_swa < 0:
            raise ConfigError(f"{where}: the sliding window must be >= 0, got {self.n_swa}")

    # -- per-layer accessors -------------------------------------------------------
    def k_width(self, il: int) -> int:
        """Values one token writes to layer ``il``'s K cache (kv_heads x head_dim_k)."""
        dim = self.head_dim_k_swa if self.is_swa[il] and self.head_dim_k_swa else self.head_dim_k
        return self.kv_heads[il] * dim

    def v_width(self, il: int) -> int:
        """Values one token writes to layer ``il``'s V cache (kv_heads x head_dim_v)."""
        dim = self.head_dim_v_swa if self.is_swa[il] and self.head_dim_v_swa else self.head_dim_v
        return self.kv_heads[il] * dim

    @property
    def n_swa_layers(self) -> int:
        """How many layers use the sliding window."""
        return sum(self.is_swa)

    def with_mha(self) -> ModelShape:
        """The same model with as many K/V heads as query heads (no grouped-query attention)."""
        return replace(
            self,
            name=f"{self.name} (MHA)",
            kv_heads=(self.n_heads,) * self.n_layers,
        )

    def to_dict(self) -> dict[str, Any]:
        """Every field, JSON-ready (a run's manifest keeps a served model's shape so)."""
        return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self).items()}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ModelShape:
        """The shape :meth:`to_dict` wrote; ConfigError for a document that is not one."""
        names = {f.name for f in fields(cls)}
        values: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v
                                  for k, v in data.items() if k in names}
        try:
            return cls(**values)
        except TypeError as exc:
            raise ConfigError(f"not a model shape ({exc})") from None

    def describe(self) -> dict[str, Any]:
        """A JSON-friendly summary (per-layer lists collapsed when uniform)."""
        kv = sorted(set(self.kv_heads))
        return {
            "name": self.name,
            "source": self.source,
            "n_layers": self.n_layers,
            "n_heads": self.n_heads,
            "kv_heads": kv[0] if len(kv) == 1 else list(self.kv_heads),
            "head_dim_k": self.head_dim_k,
            "head_dim_v": self.head_dim_v,
            "head_dim_k_swa": self.head_dim_k_swa,
            "head_dim_v_swa": self.head_dim_v_swa,
            "n_swa": self.n_swa,
            "swa_layers": [il for il, s in enumerate(self.is_swa) if s],
            "d_model": self.d_model,
            "n_ctx_train": self.n_ctx_train,
        }


def uniform_shape(
    name: str,
    *,
    n_layers: int,
    n_heads: int,
    kv_heads: int,
    head_dim: int,
    d_model: int | None = None,
    n_ctx_train: int | None = None,
    n_swa: int = 0,
    swa_pattern: int = 0,
    source: str = "preset",
) -> ModelShape:
    """A shape with the same heads on every layer.

    With ``n_swa`` > 0, ``swa_pattern`` picks the sliding-window layers as in
    :func:`swa_flags` (0: every layer slides; p: every p-th layer is global).
    """
    return ModelShape(
        name=name,
        n_layers=n_layers,
        n_heads=n_heads,
        kv_heads=(kv_heads,) * n_layers,
        head_dim_k=head_dim,
        head_dim_v=head_dim,
        is_swa=swa_flags(n_layers, swa_pattern) if n_swa > 0 else (False,) * n_layers,
        n_swa=n_swa,
        d_model=d_model,
        n_ctx_train=n_ctx_train,
        source=source,
    )


def swa_flags(n_layers: int, pattern: int) -> tuple[bool, ...]:
    """Sliding-window flags for llama.cpp's integer pattern (dense-last layout).

    As llama.cpp's ``set_swa_pattern``: p == 0 means every layer slides; otherwise layer
    ``il`` slides iff ``il % p < p - 1``, so every p-th layer is global and p == 1 means
    no layer slides (Gemma 3: p = 6, layers 5, 11, 17 are global).
    """
    if pattern < 0:
        raise ConfigError(f"a sliding-window pattern must be >= 0, got {pattern}")
    if pattern == 0:
        return (True,) * n_layers
    return tuple(il % pattern < pattern - 1 for il in range(n_layers))
