"""Model shapes known by name.

Each entry quotes the ``config.json`` values it relies on (Hugging Face model card of
the named repository). Only KV-relevant keys matter: layers, query heads, KV heads,
head dim, sliding window. ``max_position_embeddings`` becomes ``n_ctx_train``.
"""

from __future__ import annotations

from collections.abc import Callable

from kvlab.errors import ConfigError
from kvlab.memory.shapes import ModelShape, uniform_shape


def _toy() -> ModelShape:
    # kvlab's reference engine (seed 000): vocab 256, d_model 160, 5 heads of 32,
    # 3 layers, max length 512, MHA (one KV head per query head).
    return uniform_shape(
        "toy", n_layers=3, n_heads=5, kv_heads=5, head_dim=32, d_model=160, n_ctx_train=512
    )


def _llama31_8b() -> ModelShape:
    # meta-llama/Llama-3.1-8B: num_hidden_layers 32, num_attention_heads 32,
    # num_key_value_heads 8, hidden_size 4096 (head dim 128), max_position_embeddings 131072.
    return uniform_shape(
        "llama-3.1-8b",
        n_layers=32,
        n_heads=32,
        kv_heads=8,
        head_dim=128,
        d_model=4096,
        n_ctx_train=131072,
    )


def _llama31_70b() -> ModelShape:
    # meta-llama/Llama-3.1-70B: num_hidden_layers 80, num_attention_heads 64,
    # num_key_value_heads 8, hidden_size 8192 (head dim 128), max_position_embeddings 131072.
    return uniform_shape(
        "llama-3.1-70b",
        n_layers=80,
        n_heads=64,
        kv_heads=8,
        head_dim=128,
        d_model=8192,
        n_ctx_train=131072,
    )


def _llama32_1b() -> ModelShape:
    # meta-llama/Llama-3.2-1B: num_hidden_layers 16, num_attention_heads 32,
    # num_key_value_heads 8, hidden_size 2048, head_dim 64, max_position_embeddings 131072.
    return uniform_shape(
        "llama-3.2-1b",
        n_layers=16,
        n_heads=32,
        kv_heads=8,
        head_dim=64,
        d_model=2048,
        n_ctx_train=131072,
    )


def _llama32_3b() -> ModelShape:
    # meta-llama/Llama-3.2-3B: num_hidden_layers 28, num_attention_heads 24,
    # num_key_value_heads 8, hidden_size 3072, head_dim 128, max_position_embeddings 131072.
    return uniform_shape(
        "llama-3.2-3b",
        n_layers=28,
        n_heads=24,
        kv_heads=8,
        head_dim=128,
        d_model=3072,
        n_ctx_train=131072,
    )


def _qwen25_7b() -> ModelShape:
    # Qwen/Qwen2.5-7B: num_hidden_layers 28, num_attention_heads 28, num_key_value_heads 4,
    # hidden_size 3584 (head dim 128), max_position_embeddings 131072;
    # use_sliding_window false, so every layer keeps every token.
    return uniform_shape(
        "qwen2.5-7b",
        n_layers=28,
        n_heads=28,
        kv_heads=4,
        head_dim=128,
        d_model=3584,
        n_ctx_train=131072,
    )


def _qwen25_05b() -> ModelShape:
    # Qwen/Qwen2.5-0.5B: num_hidden_layers 24, num_attention_heads 14, num_key_value_heads 2,
    # hidden_size 896 (head dim 64), max_position_embeddings 32768; use_sliding_window false.
    return uniform_shape(
        "qwen2.5-0.5b",
        n_layers=24,
        n_heads=14,
        kv_heads=2,
        head_dim=64,
        d_model=896,
        n_ctx_train=32768,
    )


def _mistral_7b_v01() -> ModelShape:
    # mistralai/Mistral-7B-v0.1: num_hidden_layers 32, num_attention_heads 32,
    # num_key_value_heads 8, hidden_size 4096 (head dim 128), max_position_embeddings 32768,
    # sliding_window 4096. The window is NOT applied here: llama.cpp's llama architecture
    # and transformers' default cache both keep every token for this model.
    return uniform_shape(
        "mistral-7b-v0.1",
        n_layers=32,
        n_heads=32,
        kv_heads=8,
        head_dim=128,
        d_model=4096,
        n_ctx_train=32768,
    )


def _mistral_7b_v03() -> ModelShape:
    # mistralai/Mistral-7B-v0.3: num_hidden_layers 32, num_attention_heads 32,
    # num_key_value_heads 8, hidden_size 4096 (head dim 128), max_position_embeddings 32768,
    # sliding_window null.
    return uniform_shape(
        "mistral-7b-v0.3",
        n_layers=32,
        n_heads=32,
        kv_heads=8,
        head_dim=128,
        d_model=4096,
        n_ctx_train=32768,
    )


def _phi3_mini() -> ModelShape:
    # microsoft/Phi-3-mini-4k-instruct: num_hidden_layers 32, num_attention_heads 32,
    # num_key_value_heads 32 (plain MHA), hidden_size 3072 (head dim 96),
    # max_position_embeddings 4096. Its sliding_window 2047 is ignored, as llama.cpp does
    # ("Phi SWA is currently disabled", src/models/phi3.cpp).
    return uniform_shape(
        "phi-3-mini",
        n_layers=32,
        n_heads=32,
        kv_heads=32,
        head_dim=96,
        d_model=3072,
        n_ctx_train=4096,
    )


def _gemma2_2b() -> ModelShape:
    # google/gemma-2-2b: num_hidden_layers 26, num_attention_heads 8, num_key_value_heads 4,
    # head_dim 256, hidden_size 2304, max_position_embeddings 8192, sliding_window 4096 on
    # every other layer (even layers slide: llama.cpp pattern 2, transformers' gemma2).
    return uniform_shape(
        "gemma-2-2b",
        n_layers=26,
        n_heads=8,
        kv_heads=4,
        head_dim=256,
        d_model=2304,
        n_ctx_train=8192,
        n_swa=4096,
        swa_pattern=2,
    )


def _gemma3_270m() -> ModelShape:
    # google/gemma-3-270m: num_hidden_layers 18, num_attention_heads 4,
    # num_key_value_heads 1, head_dim 256, hidden_size 640, max_position_embeddings 32768,
    # sliding_window 512, layer_types: 5 sliding_attention then 1 full_attention, repeated
    # (layers 5, 11, 17 are global; llama.cpp's gemma3 default pattern 6).
    return uniform_shape(
        "gemma-3-270m",
        n_layers=18,
        n_heads=4,
        kv_heads=1,
        head_dim=256,
        d_model=640,
        n_ctx_train=32768,
        n_swa=512,
        swa_pattern=6,
    )


PRESETS: dict[str, Callable[[], ModelShape]] = {
    "toy": _toy,
    "llama-3.1-8b": _llama31_8b,
    "llama-3.1-70b": _llama31_70b,
    "llama-3.2-1b": _llama32_1b,
    "llama-3.2-3b": _llama32_3b,
    "qwen2.5-0.5b": _qwen25_05b,
    "qwen2.5-7b": _qwen25_7b,
    "mistral-7b-v0.1": _mistral_7b_v01,
    "mistral-7b-v0.3": _mistral_7b_v03,
    "phi-3-mini": _phi3_mini,
    "gemma-2-2b": _gemma2_2b,
    "gemma-3-270m": _gemma3_270m,
}


def preset_names() -> list[str]:
    """The names :func:`shape_from_preset` accepts."""
    return list(PRESETS)


def shape_from_preset(name: str) -> ModelShape:
    """The shape of a named model; ConfigError listing the valid names otherwise."""
    builder = PRESETS.get(name.strip().lower())
    if builder is None:
        raise ConfigError(
            f"unknown model preset {name!r}; valid presets: {', '.join(PRESETS)} "
            "(or pass --config config.json / --gguf model.gguf)"
        )
    return builder()
