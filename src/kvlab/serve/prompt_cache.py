"""Prompt reuse (``cache_prompt``): how much of the slot's cached prefix a prompt keeps.

The slot remembers which token ids its KV cache holds. A new request that shares a
prefix with them keeps those cells and computes only the remainder, like llama.cpp
(the engine's ``iter_generate(..., reuse_prefix=n)``); at least one prompt token is
always recomputed, so there are logits to sample the first new token from.
"""

from __future__ import annotations


def reusable_prefix(held: list[int], prompt_ids: list[int]) -> int:
    """Leading tokens ``held`` and ``prompt_ids`` share, at most ``len(prompt_ids) - 1``."""
    n = 0
    for a, b in zip(held, prompt_ids[:-1], strict=False):
        if a != b:
            break
        n += 1
    return n
