"""KV memory accounting: model shapes, the plain formula, llama.cpp's allocation, and
the concurrency knee a server's KV budget sets.

from kvlab.memory import shape_from_preset, kv_bytes, predict_llamacpp_kv
kv_bytes(shape_from_preset("llama-3.1-8b"), 8192).gib        # 1.0 (bf16)
predict_llamacpp_kv(shape_from_gguf("model.gguf"), 4096).log_lines()
"""

from kvlab.memory.dtypes import DTYPES, KvDtype, get_dtype, row_bytes
from kvlab.memory.formula import (
    GIB,
    MIB,
    KvEstimate,
    MhaComparison,
    compare_mha,
    kv_bytes,
    layer_cells,
)
from kvlab.memory.gguf_file import read_gguf_metadata, shape_from_gguf, shape_from_gguf_metadata
from kvlab.memory.hf_config import read_config_json, shape_from_hf_config, shape_from_hf_dict
from kvlab.memory.knee import Bound, Knee, Past, Workload, kvlab_knee, llamacpp_knee, vllm_knee
from kvlab.memory.llamacpp import (
    LlamaCppCache,
    LlamaCppKvPrediction,
    ObservedKvCache,
    compare_with_log,
    ctx_size_for,
    llama_mib,
    pad256,
    parse_kv_cache_log,
    predict_llamacpp_kv,
)
from kvlab.memory.presets import PRESETS, preset_names, shape_from_preset
from kvlab.memory.shapes import ModelShape, swa_flags, uniform_shape

__all__ = [
    "DTYPES",
    "GIB",
    "MIB",
    "PRESETS",
    "Bound",
    "Knee",
    "KvDtype",
    "KvEstimate",
    "LlamaCppCache",
    "LlamaCppKvPrediction",
    "MhaComparison",
    "ModelShape",
    "ObservedKvCache",
    "Past",
    "Workload",
    "compare_mha",
    "compare_with_log",
    "ctx_size_for",
    "get_dtype",
    "kv_bytes",
    "kvlab_knee",
    "layer_cells",
    "llama_mib",
    "llamacpp_knee",
    "pad256",
    "parse_kv_cache_log",
    "predict_llamacpp_kv",
    "preset_names",
    "read_config_json",
    "read_gguf_metadata",
    "row_bytes",
    "shape_from_gguf",
    "shape_from_gguf_metadata",
    "shape_from_hf_config",
    "shape_from_hf_dict",
    "shape_from_preset",
    "swa_flags",
    "uniform_shape",
    "vllm_knee",
]
