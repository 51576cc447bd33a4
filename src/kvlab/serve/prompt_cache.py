"""Prompt reuse (``cache_prompt``): keep the slot's cached prefix, compute the rest.

The slot remembers which token ids its KV cache holds. A new request that shares a
prefix with them keeps those cells and computes only the remainder, like llama.cpp;
at least one prompt token is always recomputed, so there are logits to sample the
first new token from. Sampling uses the engine's own sampler, so on the same seed the
tokens are those of a full recomputation.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any


def reusable_prefix(held: list[int], prompt_ids: list[int]) -> int:
    """Leading tokens ``held`` and ``prompt_ids`` share, at most ``len(prompt_ids) - 1``."""
    n = 0
    for a, b in zip(held, prompt_ids[:-1], strict=False):
        if a != b:
            break
        n += 1
    return n


def keep_prefix(cache: Any, n: int) -> None:
    """Cut ``cache`` back to its first ``n`` tokens (their K/V are kept in place).

    Uses the cache's public interface only: reset, then write the kept cells back.
    """
    import torch

    with torch.inference_mode():
        kept = [(cache.k[i, :, :, :n].clone(), cache.v[i, :, :, :n].clone())
                for i in range(cache.config.n_layers)]
        cache.reset()
        for layer, (k, v) in enumerate(kept):
            cache.update(layer, k, v)
        cache.advance(n)


def steps_after_prefix(
    model: Any, cache: Any, prompt_ids: list[int], max_new_tokens: int,
    temperature: float, seed: int,
) -> Iterator[int]:
    """Like the engine's cached generation, but the cache already holds a prefix.

    Computes ``prompt_ids[cache.length:]``, then yields up to ``max_new_tokens`` ids,
    feeding each one back before the next (the last one is never fed).
    """
    import torch

    from kvlab.engine import make_sampler

    sample = make_sampler(temperature, seed)
    with torch.inference_mode():
        rest = torch.tensor([prompt_ids[cache.length:]], dtype=torch.long)  # (1, n_rest)
        last = model(rest, cache, start_pos=cache.length)[0, -1]  # (vocab,)
        cache.advance(rest.shape[1])
        step_ids = torch.zeros((1, 1), dtype=torch.long)
    for step in range(max_new_tokens):
        with torch.inference_mode():
            token = sample(last)
        yield token
        if step + 1 == max_new_tokens:
            return
        with torch.inference_mode():
            step_ids[0, 0] = token
            last = model(step_ids, cache, start_pos=cache.length)[0, -1]  # (vocab,)
            cache.advance(1)
