"""The GGUF loader on a tiny Gemma 3 written with gguf's own writer, and on the real
file: names, the stored ``1 + w`` norms, quantized tensors, bad files."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import gguf
import numpy as np
import pytest
import torch

from kvlab.engine.gemma import Gemma3, build_gemma
from kvlab.engine.gemma_config import GemmaConfig
from kvlab.engine.gguf_weights import engine_name, load_gemma, torch_dtype
from kvlab.errors import ConfigError, ModelFileError

TINY = GemmaConfig(vocab_size=64, d_model=32, n_layers=3, n_heads=4, n_kv_heads=1,
                   head_dim=32, ffn_dim=64, max_len=64, window=4,
                   sliding=(True, True, False))
_GGUF_NAME = {engine: name for name, engine in (
    (n, engine_name(n)) for n in
    ["token_embd.weight", "output_norm.weight"] + [
        f"blk.{i}.{part}.weight" for i in range(3) for part in (
            "attn_norm", "attn_q", "attn_k", "attn_v", "attn_output", "attn_q_norm",
            "attn_k_norm", "post_attention_norm", "ffn_norm", "ffn_gate", "ffn_up",
            "ffn_down", "post_ffw_norm")])}


def write_tiny_gguf(path: Path, model: Gemma3, extra: dict[str, np.ndarray] | None = None,
                    arch: str = "gemma3") -> None:
    """``model`` as llama.cpp's converter would store it: norms as 1 + w, the MLP's
    down projection quantized to Q8_0."""
    c = model.config
    writer = gguf.GGUFWriter(str(path), arch)
    writer.add_block_count(c.n_layers)
    writer.add_context_length(c.max_len)
    writer.add_embedding_length(c.d_model)
    writer.add_feed_forward_length(c.ffn_dim)
    writer.add_head_count(c.n_heads)
    writer.add_head_count_kv(c.n_kv_heads)
    writer.add_key_length(c.head_dim)
    writer.add_value_length(c.head_dim)
    writer.add_layer_norm_rms_eps(c.norm_eps)
    writer.add_rope_freq_base(c.rope_base_global)
    writer.add_sliding_window(c.window)
    writer.add_sliding_window_pattern(3)
    for name, param in model.named_parameters():  # the tied head once, as embed.weight
        values = param.float().numpy()
        if name.endswith("norm.weight"):
            values = values + 1.0
        if name.endswith("mlp.down.weight"):
            q = gguf.quants.quantize(values, gguf.GGMLQuantizationType.Q8_0)
            writer.add_tensor(_GGUF_NAME[name], q, raw_dtype=gguf.GGMLQuantizationType.Q8_0)
        else:
            writer.add_tensor(_GGUF_NAME[name], values)
    for name, values in (extra or {}).items():
        writer.add_tensor(name, values)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


@pytest.fixture
def tiny(tmp_path: Path) -> tuple[Gemma3, Path]:
    model = build_gemma(TINY, seed=5)
    path = tmp_path / "tiny.gguf"
    write_tiny_gguf(path, model)
    return model, path


def test_a_written_model_loads_back_with_the_same_outputs(tiny: tuple[Gemma3, Path]) -> None:
    model, path = tiny
    loaded = load_gemma(path)
    assert replace(loaded.config, norm_eps=TINY.norm_eps) == TINY
    assert loaded.config.norm_eps == pytest.approx(TINY.norm_eps)  # stored as float32
    ids = torch.randint(0, 64, (1, 10))
    # Everything but the Q8_0 down projections is exact; those move logits a little.
    assert torch.allclose(loaded(ids), model(ids), atol=0.05)
    assert not torch.equal(loaded.blocks[0].mlp.down.weight, model.blocks[0].mlp.down.weight)
    # Norms come back from the stored 1 + w (to float32 rounding).
    assert torch.allclose(loaded.blocks[2].attn.q_norm.weight,
                          model.blocks[2].attn.q_norm.weight, rtol=0, atol=1e-7)


def test_bfloat16_is_a_setting(tiny: tuple[Gemma3, Path]) -> None:
    _, path = tiny
    assert load_gemma(path, torch_dtype("bfloat16")).embed.weight.dtype == torch.bfloat16
    with pytest.raises(ConfigError, match="float32, bfloat16"):
        torch_dtype("float16x")


def test_unknown_tensors_and_architectures_are_refused(tmp_path: Path) -> None:
    model = build_gemma(TINY, seed=5)
    path = tmp_path / "untied.gguf"
    write_tiny_gguf(path, model, extra={"output.weight": np.zeros((64, 32), np.float32)})
    with pytest.raises(ModelFileError, match=r"output\.weight"):
        load_gemma(path)
    other = tmp_path / "llama.gguf"
    write_tiny_gguf(other, model, arch="llama")
    with pytest.raises(ModelFileError, match=r"'llama' is not supported.*gemma3"):
        load_gemma(other)


def test_a_truncated_file_is_named(tiny: tuple[Gemma3, Path]) -> None:
    _, path = tiny
    data = path.read_bytes()
    path.write_bytes(data[: len(data) - 1000])  # header intact, tensor data cut
    with pytest.raises(ModelFileError, match=r"tiny\.gguf.*truncated or corrupt"):
        load_gemma(path)


def test_the_bundled_gemma_3_270m(gemma_model: Gemma3) -> None:
    config = gemma_model.config
    assert (config.d_model, config.n_layers, config.n_heads, config.n_kv_heads,
            config.head_dim, config.window, config.vocab_size) == (
        640, 18, 4, 1, 256, 512, 262_144)
    assert gemma_model.num_parameters() == 268_098_176  # tied head counted once
    assert gemma_model.embed.weight.dtype == torch.float32
