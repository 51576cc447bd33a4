import gguf
import pytest

from kvlab.errors import ConfigError
from kvlab.memory.dtypes import DTYPES, get_dtype, row_bytes


def test_block_sizes_agree_with_ggml():
    # gguf.GGML_QUANT_SIZES is llama.cpp's own table: (values per block, bytes per block)
    for name, dt in DTYPES.items():
        ggml_type = gguf.GGMLQuantizationType[name.upper()]
        assert gguf.GGML_QUANT_SIZES[ggml_type] == (dt.block_size, dt.block_bytes), name


def test_row_bytes_plain_and_block():
    assert row_bytes("f32", 160) == 640
    assert row_bytes("bf16", 1024) == 2048
    assert row_bytes("q8_0", 256) == 8 * 34
    assert row_bytes("q4_0", 1024) == 32 * 18
    assert row_bytes("iq4_nl", 32) == 18


def test_row_not_whole_blocks_is_refused():
    with pytest.raises(ConfigError, match="multiple"):
        row_bytes("q8_0", 48)  # e.g. 3 KV heads x 16


def test_aliases_and_unknown():
    assert get_dtype("float16").name == "f16"
    assert get_dtype("BF16").name == "bf16"
    with pytest.raises(ConfigError, match="valid types: f32, f16"):
        get_dtype("int3")
