"""The reference model: a small pre-norm causal transformer with an explicit KV cache.

Reads top to bottom: attention (MHA/GQA/MQA, masked as the cache says, computed by
attention.py), MLP, block, model, and a deterministic constructor. Shapes: B batch, T new tokens,
P tokens already in the cache, C d_model, nh query heads, kvh KV heads, hd head dim.

The cache is passed in explicitly; layers write into it, the caller advances it.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from kvlab.engine.attention import attend
from kvlab.engine.cache import KVStore
from kvlab.engine.config import ModelConfig
from kvlab.engine.lm import new_positions


class CausalSelfAttention(nn.Module):
    """Multi-head attention whose KV heads may be shared by groups of query heads."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.n_heads = config.n_heads
        self.n_kv_heads = config.n_kv_heads
        self.head_dim = config.head_dim
        # One fused projection for q, k and v; no biases (as in the notebook's model,
        # which is how the toy has exactly 1,090,080 parameters at max_len 512).
        q_width = config.n_heads * config.head_dim
        kv_width = config.n_kv_heads * config.head_dim
        self.split = (q_width, kv_width, kv_width)
        self.qkv = nn.Linear(config.d_model, q_width + 2 * kv_width, bias=False)
        self.out = nn.Linear(config.d_model, config.d_model, bias=False)

    def forward(self, x: torch.Tensor, layer: int, cache: KVStore | None) -> torch.Tensor:
        B, T, C = x.shape
        q, k, v = self.qkv(x).split(self.split, dim=-1)
        q = q.view(B, T, self.n_heads, self.head_dim).transpose(1, 2)  # (B, nh, T, hd)
        k = k.view(B, T, self.n_kv_heads, self.head_dim).transpose(1, 2)  # (B, kvh, T, hd)
        v = v.view(B, T, self.n_kv_heads, self.head_dim).transpose(1, 2)  # (B, kvh, T, hd)
        # The cache stores k, v and attends over what each query may see; without one,
        # plain causal attention over the new tokens.
        y = cache.attend(layer, q, k, v) if cache is not None else attend(q, k, v, None)
        y = y.transpose(1, 2).reshape(B, T, C)  # (B, T, C)
        return self.out(y)  # (B, T, C)


class MLP(nn.Module):
    """Position-wise feed-forward: C -> ratio*C -> GELU -> C."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        hidden = config.mlp_ratio * config.d_model
        self.up = nn.Linear(config.d_model, hidden)
        self.down = nn.Linear(hidden, config.d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(F.gelu(self.up(x)))  # (B, T, C)


class Block(nn.Module):
    """Pre-norm residual block: x + attn(LN(x)), then x + mlp(LN(x))."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.norm_attn = nn.LayerNorm(config.d_model)
        self.attn = CausalSelfAttention(config)
        self.norm_mlp = nn.LayerNorm(config.d_model)
        self.mlp = MLP(config)

    def forward(self, x: torch.Tensor, layer: int, cache: KVStore | None) -> torch.Tensor:
        x = x + self.attn(self.norm_attn(x), layer, cache)  # (B, T, C)
        return x + self.mlp(self.norm_mlp(x))  # (B, T, C)


class TinyLM(nn.Module):
    """Token + learned position embeddings, blocks, final LayerNorm, untied LM head."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.config = config
        self.tok_emb = nn.Embedding(config.vocab_size, config.d_model)
        self.pos_emb = nn.Embedding(config.max_len, config.d_model)
        self.blocks = nn.ModuleList(Block(config) for _ in range(config.n_layers))
        self.norm = nn.LayerNorm(config.d_model)
        self.lm_head = nn.Linear(config.d_model, config.vocab_size, bias=False)
        # Positions sliced from one buffer: no new tensor per decoded token.
        self.positions: torch.Tensor  # (max_len,) 0, 1, 2, ...
        self.register_buffer("positions", torch.arange(config.max_len), persistent=False)

    def num_parameters(self) -> int:
        """Number of trainable values (the position table counts max_len rows)."""
        return sum(p.numel() for p in self.parameters())

    def forward(
        self, ids: torch.Tensor, cache: KVStore | None = None, start_pos: int | None = None,
        last_only: bool = False, logits_at: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Logits (B, T, vocab) for token ids (B, T) placed where the cache says.

        With a cache the new tokens follow the cached ones (``start_pos``, if given,
        must equal ``cache.length``); a paged batch gives each row its own positions.
        The layers write their K/V into the cache; advancing it is the caller's job.
        Without a cache, positions start at ``start_pos`` (0 if None). ``last_only``:
        logits (B, 1, vocab) of the last position only; ``logits_at`` (K,): of those
        token indices only, (B, K, vocab) (a flattened batch's sampling tokens).
        """
        T = ids.shape[1]  # ids: (B, T)
        pos = new_positions(cache, start_pos, T, self.positions)  # (T,) or (B, T)
        x = self.tok_emb(ids) + self.pos_emb(pos)  # (B, T, C)
        for layer, block in enumerate(self.blocks):
            x = block(x, layer, cache)  # (B, T, C)
        if logits_at is not None:
            x = x[:, logits_at]  # (B, K, C): the tokens that sample
        elif last_only:
            x = x[:, -1:]  # (B, 1, C)
        return self.lm_head(self.norm(x))  # (B, T, vocab)


def build_model(config: ModelConfig, seed: int = 42) -> TinyLM:
    """A TinyLM with weights drawn from ``seed`` (same seed, same weights), in eval mode.

    Uses PyTorch's default initialisation under a forked RNG, so the global random
    state is left untouched. Gradients are disabled on every parameter.
    """
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = TinyLM(config)
    model.eval()
    model.requires_grad_(False)
    return model
