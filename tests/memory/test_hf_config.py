import json

import pytest

from kvlab.errors import ModelFileError
from kvlab.memory import kv_bytes, shape_from_hf_config, shape_from_preset

LLAMA_31_8B = {
    "model_type": "llama", "num_hidden_layers": 32, "num_attention_heads": 32,
    "num_key_value_heads": 8, "hidden_size": 4096, "max_position_embeddings": 131072,
}  # fmt: skip


def _cfg(tmp_path, data, name="model"):
    d = tmp_path / name
    d.mkdir()
    p = d / "config.json"
    p.write_text(json.dumps(data) if not isinstance(data, str) else data)
    return p


def test_llama_config_matches_preset(tmp_path):
    shape = shape_from_hf_config(_cfg(tmp_path, LLAMA_31_8B, "Llama-3.1-8B"))
    assert shape.name == "Llama-3.1-8B"
    assert (shape.head_dim_k, shape.kv_heads[0], shape.n_ctx_train) == (128, 8, 131072)
    preset = shape_from_preset("llama-3.1-8b")
    assert kv_bytes(shape, 8192).total_bytes == kv_bytes(preset, 8192).total_bytes


def test_defaults_kv_heads_and_explicit_head_dim(tmp_path):
    mha = dict(LLAMA_31_8B)
    del mha["num_key_value_heads"]
    assert shape_from_hf_config(_cfg(tmp_path, mha, "a")).kv_heads == (32,) * 32
    explicit = {**LLAMA_31_8B, "head_dim": 64}
    assert shape_from_hf_config(_cfg(tmp_path, explicit, "b")).head_dim_k == 64


def test_gemma3_layer_types_and_pattern(tmp_path):
    types = ["sliding_attention"] * 5 + ["full_attention"]
    gemma = {
        "model_type": "gemma3_text", "num_hidden_layers": 18, "num_attention_heads": 4,
        "num_key_value_heads": 1, "head_dim": 256, "hidden_size": 640,
        "sliding_window": 512, "layer_types": types * 3, "max_position_embeddings": 32768,
    }  # fmt: skip
    shape = shape_from_hf_config(_cfg(tmp_path, gemma, "a"))
    assert shape.is_swa == shape_from_preset("gemma-3-270m").is_swa
    no_types = {k: v for k, v in gemma.items() if k != "layer_types"}
    assert shape_from_hf_config(_cfg(tmp_path, no_types, "b")).n_swa_layers == 15  # default 6
    pattern = {**no_types, "sliding_window_pattern": 2}
    assert shape_from_hf_config(_cfg(tmp_path, pattern, "c")).n_swa_layers == 9


def test_bare_sliding_window_is_not_applied(tmp_path):
    mistral = {**LLAMA_31_8B, "model_type": "mistral", "sliding_window": 4096}
    assert shape_from_hf_config(_cfg(tmp_path, mistral)).n_swa == 0


def test_multimodal_text_config(tmp_path):
    wrapped = {"model_type": "llava", "text_config": LLAMA_31_8B}
    assert shape_from_hf_config(_cfg(tmp_path, wrapped)).n_layers == 32


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", "not valid JSON"),
        ("[1, 2]", "not an object"),
        ({"num_attention_heads": 8}, "missing key.*num_hidden_layers.*hidden_size"),
        ({**LLAMA_31_8B, "num_key_value_heads": 5}, "does not divide"),
        ({**LLAMA_31_8B, "hidden_size": 4000, "num_attention_heads": 48}, "not a multiple"),
        ({**LLAMA_31_8B, "num_hidden_layers": "32"}, "positive integer"),
        ({**LLAMA_31_8B, "layer_types": ["full_attention"]}, "one entry per layer"),
    ],
)
def test_bad_configs(tmp_path, content, message):
    with pytest.raises(ModelFileError, match=message):
        shape_from_hf_config(_cfg(tmp_path, content))


def test_unreadable_file(tmp_path):
    with pytest.raises(ModelFileError, match="cannot read"):
        shape_from_hf_config(tmp_path / "missing" / "config.json")
