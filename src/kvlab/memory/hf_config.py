"""Build a :class:`ModelShape` from a Hugging Face ``config.json``.

Keys read: ``num_hidden_layers``, ``num_attention_heads``, ``num_key_value_heads``
(default: the attention head count), ``head_dim`` (default: ``hidden_size /
num_attention_heads``), ``max_position_embeddings``. Multimodal configs that keep
these under ``text_config`` are followed there.

Sliding windows are applied only when the config says which layers slide:
``layer_types`` ("sliding_attention" / "full_attention"), or ``sliding_window_pattern``
(every p-th layer global), or the Gemma families whose layout is fixed (gemma2: even
layers slide; gemma3: pattern 6). A bare ``sliding_window`` with none of these
(Mistral v0.1, Qwen2 with ``use_sliding_window: false``) is not applied: transformers'
default cache and llama.cpp keep every token for those models.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kvlab.errors import ConfigError, ModelFileError
from kvlab.memory.shapes import ModelShape, swa_flags

# model_type -> default sliding-window pattern when the config has no explicit layout.
_DEFAULT_PATTERNS = {"gemma2": 2, "gemma3": 6, "gemma3_text": 6}


def read_config_json(path: str | Path) -> dict[str, Any]:
    """Load a config.json as a dict; ModelFileError when unreadable or not a JSON object."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ModelFileError(f"cannot read config.json {str(p)!r}: {exc}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ModelFileError(f"{str(p)!r} is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise ModelFileError(f"{str(p)!r} holds a JSON {type(data).__name__}, not an object")
    return data


def shape_from_hf_config(path: str | Path, name: str | None = None) -> ModelShape:
    """The KV shape described by a Hugging Face config.json file."""
    p = Path(path)
    return shape_from_hf_dict(
        read_config_json(p), name=name or p.parent.name or p.stem, source=f"config.json {p}"
    )


def shape_from_hf_dict(cfg: dict[str, Any], *, name: str, source: str) -> ModelShape:
    """The KV shape of an already-parsed config.json (see the module docstring)."""
    if "num_hidden_layers" not in cfg and isinstance(cfg.get("text_config"), dict):
        cfg = {**cfg["text_config"], "model_type": cfg["text_config"].get("model_type")}
    missing = [k for k in ("num_hidden_layers", "num_attention_heads") if k not in cfg]
    if "head_dim" not in cfg and "hidden_size" not in cfg:
        missing.append("hidden_size (or head_dim)")
    if missing:
        raise ModelFileError(f"{source}: missing key(s) {', '.join(missing)}")

    n_layers = _int(cfg, "num_hidden_layers", source)
    n_heads = _int(cfg, "num_attention_heads", source)
    kv = cfg.get("num_key_value_heads")
    kv_heads = n_heads if kv is None else _int(cfg, "num_key_value_heads", source)
    if cfg.get("head_dim") is not None:
        head_dim = _int(cfg, "head_dim", source)
    else:
        hidden = _int(cfg, "hidden_size", source)
        if n_heads <= 0 or hidden % n_heads:
            raise ModelFileError(
                f"{source}: hidden_size {hidden} is not a multiple of num_attention_heads "
                f"{n_heads}; add an explicit head_dim"
            )
        head_dim = hidden // n_heads
    hidden_size = cfg.get("hidden_size")
    n_ctx = cfg.get("max_position_embeddings")

    n_swa, is_swa = _sliding_layout(cfg, n_layers, source)
    try:
        return ModelShape(
            name=name,
            n_layers=n_layers,
            n_heads=n_heads,
            kv_heads=(kv_heads,) * n_layers,
            head_dim_k=head_dim,
            head_dim_v=head_dim,
            is_swa=is_swa,
            n_swa=n_swa,
            d_model=hidden_size if isinstance(hidden_size, int) else None,
            n_ctx_train=n_ctx if isinstance(n_ctx, int) else None,
            source=source,
        )
    except ConfigError as exc:
        raise ModelFileError(str(exc)) from None


def _int(cfg: dict[str, Any], key: str, source: str) -> int:
    value = cfg[key]
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ModelFileError(f"{source}: {key} must be a positive integer, got {value!r}")
    return value


def _sliding_layout(
    cfg: dict[str, Any], n_layers: int, source: str
) -> tuple[int, tuple[bool, ...]]:
    """(window, per-layer flags) from layer_types / sliding_window_pattern / model_type."""
    window = cfg.get("sliding_window")
    layer_types = cfg.get("layer_types")
    pattern = cfg.get("sliding_window_pattern", cfg.get("_sliding_window_pattern"))
    if layer_types is not None:
        if not isinstance(layer_types, list) or len(layer_types) != n_layers:
            raise ModelFileError(
                f"{source}: layer_types must list one entry per layer ({n_layers})"
            )
        flags = tuple(t == "sliding_attention" for t in layer_types)
    elif isinstance(pattern, int) and not isinstance(pattern, bool):
        flags = swa_flags(n_layers, pattern)
    elif cfg.get("model_type") in _DEFAULT_PATTERNS:
        flags = swa_flags(n_layers, _DEFAULT_PATTERNS[cfg["model_type"]])
    else:
        return 0, (False,) * n_layers
    if not any(flags):
        return 0, flags
    if isinstance(window, bool) or not isinstance(window, int) or window <= 0:
        raise ModelFileError(
            f"{source}: sliding-window layers need a positive sliding_window, got {window!r}"
        )
    return window, flags
