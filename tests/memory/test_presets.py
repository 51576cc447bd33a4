import re

import pytest

from kvlab.errors import ConfigError
from kvlab.memory import ModelShape, preset_names, shape_from_preset, swa_flags


def test_every_preset_builds_and_gqa_divides():
    for name in preset_names():
        shape = shape_from_preset(name)
        assert shape.name == name
        assert all(shape.n_heads % kv == 0 for kv in shape.kv_heads)


def test_toy_matches_engine_config():
    from kvlab.engine import get_preset

    cfg, shape = get_preset("toy"), shape_from_preset("toy")
    assert (shape.n_layers, shape.n_heads, shape.kv_heads[0], shape.head_dim_k) == (
        cfg.n_layers, cfg.n_heads, cfg.n_kv_heads, cfg.head_dim,
    )  # fmt: skip


def test_gemma3_layout():
    shape = shape_from_preset("gemma-3-270m")
    assert [il for il, s in enumerate(shape.is_swa) if not s] == [5, 11, 17]
    assert shape.n_swa == 512 and shape.n_swa_layers == 15


def test_swa_flags_follow_llamacpp():
    assert swa_flags(4, 0) == (True,) * 4
    assert swa_flags(4, 1) == (False,) * 4
    assert swa_flags(4, 2) == (True, False, True, False)


def test_unknown_preset_lists_valid_names():
    with pytest.raises(ConfigError, match=re.escape("valid presets: toy, llama-3.1-8b")):
        shape_from_preset("llama-9")


def test_heads_that_do_not_divide_are_refused():
    with pytest.raises(ConfigError, match="does not divide"):
        ModelShape("x", 2, 6, (4, 4), 8, 8, (False, False))
