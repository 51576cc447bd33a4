"""The reference engine: a small causal transformer with an explicit KV cache."""

from kvlab.engine.cache import KVCache
from kvlab.engine.config import PRESETS, ModelConfig, get_preset
from kvlab.engine.generate import Generation, generate, iter_generate, make_sampler
from kvlab.engine.model import TinyLM, build_model, causal_mask
from kvlab.engine.tokenizer import EOS_ID, ByteTokenizer, IncrementalDecoder

__all__ = [
    "EOS_ID",
    "PRESETS",
    "ByteTokenizer",
    "Generation",
    "IncrementalDecoder",
    "KVCache",
    "ModelConfig",
    "TinyLM",
    "build_model",
    "causal_mask",
    "generate",
    "get_preset",
    "iter_generate",
    "make_sampler",
]
