from __future__ import annotations

from pathlib import Path

import pytest

from kvlab.engine.gemma_config import GemmaConfig, gemma_config_from_metadata, read_gemma_config
from kvlab.errors import ModelFileError

META = {
    "general.architecture": "gemma3",
    "gemma3.block_count": 18,
    "gemma3.context_length": 32768,
    "gemma3.embedding_length": 640,
    "gemma3.feed_forward_length": 2048,
    "gemma3.attention.head_count": 4,
    "gemma3.attention.head_count_kv": 1,
    "gemma3.attention.key_length": 256,
    "gemma3.attention.value_length": 256,
    "gemma3.attention.layer_norm_rms_epsilon": 1e-6,
    "gemma3.attention.sliding_window": 512,
    "gemma3.rope.freq_base": 1_000_000.0,
}


def test_gemma_3_270m_metadata_gives_the_known_shape() -> None:
    config = gemma_config_from_metadata(META, "test")
    assert config == GemmaConfig()
    assert [i for i, w in enumerate(config.layer_windows) if w is None] == [5, 11, 17]
    assert config.rope_base(0) == 10_000.0 and config.rope_base(5) == 1_000_000.0


def test_a_local_rope_base_in_the_file_wins() -> None:
    config = gemma_config_from_metadata(META | {"gemma3.rope.freq_base_swa": 5e4}, "test")
    assert config.rope_base(0) == 5e4


def test_other_architectures_are_named_with_the_supported_ones() -> None:
    with pytest.raises(ModelFileError, match=r"architecture 'llama' .* supported: gemma3"):
        gemma_config_from_metadata(META | {"general.architecture": "llama"}, "test")


def test_a_missing_key_is_named() -> None:
    meta = {k: v for k, v in META.items() if k != "gemma3.feed_forward_length"}
    with pytest.raises(ModelFileError, match="feed_forward_length"):
        gemma_config_from_metadata(meta, "test")


def test_a_truncated_file_is_named(tmp_path: Path) -> None:
    path = tmp_path / "cut.gguf"
    path.write_bytes(b"GGUF\x03\x00\x00\x00\x05")
    with pytest.raises(ModelFileError, match=r"cut\.gguf"):
        read_gemma_config(path)
