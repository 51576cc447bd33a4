from __future__ import annotations

import dataclasses

import pytest

from kvlab.engine import PRESETS, ModelConfig, build_model, get_preset
from kvlab.errors import ConfigError


def test_toy_is_the_notebook_model_with_a_longer_position_table() -> None:
    toy = get_preset("toy")
    assert (toy.vocab_size, toy.d_model, toy.n_heads, toy.n_kv_heads, toy.n_layers) == (
        256, 160, 5, 5, 3)
    assert toy.head_dim == 32 and toy.mlp_ratio == 4 and toy.max_len == 8192
    assert toy.attention_kind == "MHA"


def test_notebook_shape_has_exactly_1_090_080_parameters() -> None:
    model = build_model(dataclasses.replace(get_preset("toy"), max_len=512))
    assert model.num_parameters() == 1_090_080


def test_gqa_and_mqa_presets() -> None:
    gqa, mqa = get_preset("toy-gqa"), get_preset("toy-mqa")
    assert gqa.attention_kind == "GQA" and (gqa.n_heads, gqa.n_kv_heads) == (10, 2)
    assert mqa.attention_kind == "MQA" and mqa.n_kv_heads == 1
    # Both shrink the per-token K (and V) width from 160 to 32 values.
    for cfg in (gqa, mqa):
        assert cfg.n_kv_heads * cfg.head_dim == 32 and cfg.d_model == 160


def test_unknown_preset_lists_valid_names() -> None:
    with pytest.raises(ConfigError) as err:
        get_preset("llama")
    for name in PRESETS:
        assert name in str(err.value)


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        ({"n_heads": 5, "n_kv_heads": 2}, "must divide n_heads (5); choose one of [1, 5]"),
        ({"d_model": 160, "n_heads": 7, "n_kv_heads": 7}, "divisible by n_heads (7)"),
        ({"n_layers": 0}, "n_layers must be a positive integer"),
        ({"max_len": -1}, "max_len must be a positive integer"),
    ],
)
def test_invalid_shapes_say_what_to_fix(kwargs: dict[str, int], fragment: str) -> None:
    with pytest.raises(ConfigError) as err:
        ModelConfig(**kwargs)
    assert fragment in str(err.value)
