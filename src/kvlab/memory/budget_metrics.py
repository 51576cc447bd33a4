"""A server's KV budget as its own ``/metrics`` text reports it.

- vLLM: ``vllm:cache_config_info`` is a gauge whose labels are every field of its
  CacheConfig (``vllm/v1/metrics/loggers.py``, ``log_metrics_info``):
  ``num_gpu_blocks`` (the pool, null block included) and ``block_size`` among them.
- kvlab serve: ``kvlab:kv_blocks_total`` (blocks per layer's pool,
  :mod:`kvlab.serve.metrics`).
"""

from __future__ import annotations

import re

from kvlab.errors import ConfigError

_VLLM_INFO = re.compile(r"^vllm:cache_config_info\{(?P<labels>[^}]*)\}", re.MULTILINE)
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')
_KVLAB_TOTAL = re.compile(r"^kvlab:kv_blocks_total(?:\{[^}]*\})?\s+(?P<value>\S+)",
                          re.MULTILINE)


def vllm_cache_config(metrics_text: str) -> dict[str, str]:
    """The labels of ``vllm:cache_config_info``; ConfigError when it is absent."""
    found = _VLLM_INFO.search(metrics_text)
    if found is None:
        raise ConfigError("no vllm:cache_config_info in this /metrics text; give vLLM's "
                          "/metrics (its URL or a saved copy)")
    return dict(_LABEL.findall(found["labels"]))


def vllm_blocks(metrics_text: str) -> tuple[int, int]:
    """(num_gpu_blocks, block_size) from vLLM's /metrics."""
    info = vllm_cache_config(metrics_text)
    try:
        return int(info["num_gpu_blocks"]), int(info["block_size"])
    except (KeyError, ValueError):
        raise ConfigError("vllm:cache_config_info has no whole num_gpu_blocks and "
                          f"block_size (got {info.get('num_gpu_blocks')!r}, "
                          f"{info.get('block_size')!r}); is the engine started?") from None


def kvlab_blocks(metrics_text: str) -> int:
    """``kv_blocks`` from kvlab serve's /metrics (only when it batches)."""
    found = _KVLAB_TOTAL.search(metrics_text)
    if found is None:
        raise ConfigError("no kvlab:kv_blocks_total in this /metrics text; kvlab serve "
                          "reports it with --slots > 1 or --kv-blocks")
    return int(float(found["value"]))
