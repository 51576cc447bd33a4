"""The reference engine: causal transformers with an explicit KV cache.

Two architectures share one cache interface and one generate loop: the toy
(:class:`TinyLM`, random weights, byte tokenizer) and Gemma 3 (:class:`Gemma3`, read
from a GGUF by :func:`load_model`). The cache is contiguous (:class:`KVCache`, one
sequence or a batch of equal ones) or paged (:class:`BlockPool` hands out blocks, with
prefix caching; :class:`PagedKV` holds their K/V tensors; the flattened
:class:`RaggedBatch` is one step over both), which the continuous-batching
:class:`Scheduler` drives.
"""

from kvlab.engine.cache import KVCache
from kvlab.engine.config import PRESETS, ModelConfig, get_preset
from kvlab.engine.gemma import Gemma3, build_gemma
from kvlab.engine.gemma_config import GemmaConfig
from kvlab.engine.generate import Generation, generate, iter_generate, make_sampler
from kvlab.engine.masks import causal_mask
from kvlab.engine.model import TinyLM, build_model
from kvlab.engine.models import LoadedModel, load_model
from kvlab.engine.paged import BlockPool
from kvlab.engine.paged_kv import PagedKV
from kvlab.engine.ragged import RaggedBatch
from kvlab.engine.scheduler import Request, RequestTooLarge, Scheduler, SchedulerStats
from kvlab.engine.tokenizer import EOS_ID, ByteTokenizer, IncrementalDecoder

__all__ = [
    "EOS_ID",
    "PRESETS",
    "BlockPool",
    "ByteTokenizer",
    "Gemma3",
    "GemmaConfig",
    "Generation",
    "IncrementalDecoder",
    "KVCache",
    "LoadedModel",
    "ModelConfig",
    "PagedKV",
    "RaggedBatch",
    "Request",
    "RequestTooLarge",
    "Scheduler",
    "SchedulerStats",
    "TinyLM",
    "build_gemma",
    "build_model",
    "causal_mask",
    "generate",
    "get_preset",
    "iter_generate",
    "load_model",
    "make_sampler",
]
