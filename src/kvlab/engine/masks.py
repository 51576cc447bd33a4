"""Which keys each new query may see: causal, optionally within a sliding window.

Shared by both architectures and both caches. With the contiguous cache the keys
passed to attention end with the new tokens and are contiguous in position (see
:meth:`kvlab.engine.cache.KVCache.update`), so ``n_keys`` alone says where they start
(:func:`causal_mask`, :func:`contiguous_mask`). The paged cache gathers each
sequence's keys from its blocks and pads the batch, so it builds its mask from the
positions themselves (:func:`position_mask`).
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


def contiguous_mask(
    n_new: int, past: int, window: int | None, n_keys: int
) -> torch.Tensor | None:
    """The mask for contiguous keys, or None where attention needs none.

    None means: one new token that sees every key it is given, or a block of new
    tokens with no past and no window cut, which is plain causal (``is_causal``).
    """
    if n_new == 1 and (window is None or n_keys <= window):
        return None
    if n_keys == n_new and (window is None or window >= n_new):
        return None
    return causal_mask(n_new, past, window, n_keys)


def position_mask(
    query_pos: torch.Tensor, key_pos: torch.Tensor, window: int | None
) -> torch.Tensor:
    """Boolean mask (B, 1, T, S) from query positions (B, T) and key positions (B, S).

    A key position of -1 is padding and is never seen; otherwise the same rule as
    :func:`causal_mask`: at or before the query, and within the window if any.
    """
    q = query_pos[:, :, None]  # (B, T, 1)
    k = key_pos[:, None, :]  # (B, 1, S)
    visible = (k >= 0) & (k <= q)  # (B, T, S)
    if window is not None:
        visible &= q - k < window
    return visible[:, None]  # (B, 1, T, S)
