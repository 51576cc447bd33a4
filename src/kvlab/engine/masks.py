"""Which keys each new query may see: causal, optionally within a sliding window.

Shared by both architectures. The keys passed to attention always end with the new
tokens and are contiguous in position (see :meth:`kvlab.engine.cache.KVCache.update`),
so ``n_keys`` alone says where they start.
"""

from __future__ import annotations

from functools import lru_cache

import torch


@lru_cache(maxsize=16)
def causal_mask(
    n_new: int, past: int, window: int | None = None, n_keys: int | None = None
) -> torch.Tensor:
    """Boolean mask (n_new, n_keys): True where query ``past+i`` may see key ``j``.

    Query ``i`` of the new block sits at position ``past+i``. Keys are the last
    ``n_keys`` positions up to ``past+n_new-1`` (None: all ``past+n_new`` of them).
    A query sees keys at or before its own position and, with a ``window`` W, only
    the W most recent of those (itself included), as llama.cpp and Transformers count
    a sliding window. Cached (lru): the returned tensor must not be modified.
    """
    n_keys = past + n_new if n_keys is None else n_keys
    query_pos = past + torch.arange(n_new)[:, None]  # (n_new, 1)
    key_pos = past + n_new - n_keys + torch.arange(n_keys)[None, :]  # (1, n_keys)
    visible = key_pos <= query_pos  # (n_new, n_keys)
    if window is not None:
        visible &= query_pos - key_pos < window
    return visible
