"""Scaled dot-product attention over what a cache returns: one function, both models.

Shapes: B sequences, nh query heads, kvh KV heads (nh is a multiple of kvh), T new
tokens, S keys, hd head dim. The mask comes from the cache
(:meth:`kvlab.engine.cache.KVCache.attn_mask`, or one row group of the flattened
paged batch, :mod:`kvlab.engine.ragged`): None means one new token that sees every
key, or plain causal attention without a past.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def attend(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None,
    scale: float | None = None,
) -> torch.Tensor:
    """softmax(q kᵀ · scale + mask) v: (B, nh, T, hd) from q (B, nh, T, hd) and k, v
    (B, kvh, S, hd). ``mask`` is boolean, (T, S) or (B, 1, T, S); ``scale`` None is
    1/sqrt(hd)."""
    B, n_heads, T, head_dim = q.shape
    n_kv_heads = k.shape[1]
    if T == 1 and n_kv_heads != n_heads:
        # Decoding one token with shared KV heads: a group's query heads become the
        # rows of one query against their KV head, so each cached K/V head is read
        # once as a small matrix product instead of once per query head.
        grouped = q.reshape(B, n_kv_heads, n_heads // n_kv_heads, head_dim)  # (B,kvh,grp,hd)
        y = F.scaled_dot_product_attention(grouped, k, v, attn_mask=mask, scale=scale)
        return y.view(B, n_heads, 1, head_dim)  # (B, nh, 1, hd)
    return F.scaled_dot_product_attention(
        q, k, v, attn_mask=mask, is_causal=mask is None and T > 1, scale=scale,
        enable_gqa=n_kv_heads != n_heads,
    )  # (B, nh, T, hd)
