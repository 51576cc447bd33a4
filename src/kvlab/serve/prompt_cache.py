"""Prompt reuse (``cache_prompt``): how much of the slot's cached prefix a prompt keeps.

The slot remembers which token ids its KV cache holds. A new request that shares a
prefix with them keeps those cells and computes only the remainder, like llama.cpp
(the engine's ``iter_generate(..., reuse_prefix=n)``); at least one prompt token is
always recomputed, so there are logits to sample the first new token from. A
sliding-window layer keeps only its last W tokens, so a prefix whose window the ring
has already overwritten cannot be kept: the prompt is recomputed from the start.
"""

from __future__ import annotations

from typing import Any

from kvlab.errors import EngineError


def reusable_prefix(held: list[int], prompt_ids: list[int]) -> int:
    """Leading tokens ``held`` and ``prompt_ids`` share, at most ``len(prompt_ids) - 1``."""
    n = 0
    for a, b in zip(held, prompt_ids[:-1], strict=False):
        if a != b:
            break
        n += 1
    return n


def keep_prefix(cache: Any, n: int) -> int:
    """Cut ``cache`` (a KVCache) to its first ``n`` tokens and return ``n``; where ``n``
    is 0 or a sliding window lost cells that prefix needs, empty it and return 0."""
    if n > 0:
        try:
            cache.truncate(n)
            return n
        except EngineError:  # the ring overwrote part of the prefix's window
            pass
    cache.reset()
    return 0
