"""Gemma 3 (text), from scratch: the engine's second architecture, same cache, same loop.

Reads top to bottom: RMSNorm, RoPE, attention, GeGLU MLP, block, model. Shapes: B
batch, T new tokens, P tokens already in the cache, C d_model (640), nh query heads
(4), kvh KV heads (1), hd head dim (256), F the MLP width (2,048), V vocab (262,144).

What differs from the toy (:mod:`kvlab.engine.model`):

- RMSNorm with Gemma's ``1 + weight`` scale, around both sublayers (pre and post);
- QK-norm: queries and keys are RMS-normalised per head before RoPE;
- rotary positions instead of a position table, with one base for the sliding layers
  and another for the global ones;
- a sliding window of 512 tokens on five of every six layers (the cache keeps only
  those 512 for them, see :mod:`kvlab.engine.cache`);
- a GeGLU MLP (tanh-approximated GELU gate times a linear branch);
- embeddings scaled by sqrt(C), and the output head tied to the embeddings.

The cache is passed in explicitly; layers write into it, the caller advances it.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from kvlab.engine.attention import attend
from kvlab.engine.cache import KVStore
from kvlab.engine.gemma_config import GemmaConfig
from kvlab.engine.lm import new_positions
from kvlab.engine.masks import contiguous_mask
from kvlab.engine.phases import NO_CLOCK, layer_group


class RMSNorm(nn.Module):
    """x / rms(x) * (1 + weight), computed in float32 (a zero weight is the identity)."""

    def __init__(self, dim: int, eps: float) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.zeros(dim))
        self.frozen = False  # once fused: 1 + weight is computed once, then kept
        self._scale: torch.Tensor | None = None

    def fuse(self) -> None:
        """For serving: from the next forward on, 1 + weight is computed once (from the
        weight as it is then, in its dtype) and kept, not recomputed at every call."""
        self.frozen, self._scale = True, None

    def scale(self) -> torch.Tensor:
        """1 + weight in float32 (dim,)."""
        if self._scale is not None:
            return self._scale
        scale = 1.0 + self.weight.detach().float()  # (dim,)
        if self.frozen:
            self._scale = scale
        return scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return rms_norm(x, self.scale(), self.eps)  # (..., dim)


def rms_norm(x: torch.Tensor, scale: torch.Tensor, eps: float) -> torch.Tensor:
    """x / sqrt(mean(x²) + eps) * scale over the last dim, in float32, returned in x's
    dtype; ``scale`` (..., dim) broadcasts (one row per head normalises several heads
    with their own weights in one pass). The same operations, in the same order, as
    ``F.rms_norm`` on float32, in fewer torch calls: a decode step makes 108 of them."""
    xf = x.float()  # (..., dim)
    inv = xf.pow(2).mean(-1, keepdim=True).add_(eps).rsqrt_()  # (..., 1)
    return (xf * inv).mul_(scale).to(x.dtype)  # (..., dim)


def rope_angles(positions: torch.Tensor, head_dim: int, base: float,
                dtype: torch.dtype = torch.float32) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin (T, hd) of the rotation at ``positions`` (T,); (B, 1, T, hd) for
    positions (B, T), one row per sequence of a batch (or a flattened batch, B = 1).
    Computed in float32, returned in ``dtype``.

    Pair i of a head (dims i and i + hd/2) turns by position * base^(-2i/hd).
    """
    exponents = torch.arange(0, head_dim, 2, dtype=torch.int64).float() / head_dim  # (hd/2,)
    inv_freq = 1.0 / (base ** exponents)  # (hd/2,)
    angles = positions.float()[..., None] * inv_freq  # (T, hd/2) or (B, T, hd/2)
    angles = torch.cat([angles, angles], dim=-1)  # (T, hd) or (B, T, hd)
    if angles.dim() == 3:
        angles = angles[:, None]  # (B, 1, T, hd): the same angles for every head
    return angles.cos().to(dtype), angles.sin().to(dtype)


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate each (i, i + hd/2) pair of x (B, heads, T, hd) by the angles (T, hd) or
    (B, 1, T, hd)."""
    half = x.shape[-1] // 2
    rotated = torch.cat([-x[..., half:], x[..., :half]], dim=-1)  # (B, heads, T, hd)
    return x * cos + rotated * sin


def rope_tables(positions: torch.Tensor, head_dim: int, base: float,
                dtype: torch.dtype = torch.float32) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and signed sin (T, 1, hd), or (B, T, 1, hd) for positions (B, T), for heads
    laid out (B, T, heads, hd): sin's first half negated, so that :func:`rotate` is
    :func:`apply_rope` with one negation fewer per call (the same numbers: a sign flip
    is exact)."""
    cos, sin = rope_angles(positions, head_dim, base, dtype)  # (T, hd) or (B, 1, T, hd)
    if cos.dim() == 4:
        cos, sin = cos[:, 0], sin[:, 0]  # (B, T, hd)
    half = head_dim // 2
    sin = torch.cat([-sin[..., :half], sin[..., half:]], dim=-1)
    return cos.unsqueeze(-2), sin.unsqueeze(-2)  # (..., T, 1, hd)


def rotate(x: torch.Tensor, cos: torch.Tensor, signed_sin: torch.Tensor) -> torch.Tensor:
    """:func:`apply_rope` for x (B, T, heads, hd) and :func:`rope_tables`' angles."""
    half = x.shape[-1] // 2
    return x * cos + torch.cat([x[..., half:], x[..., :half]], dim=-1) * signed_sin


class Attention(nn.Module):
    """Grouped-query attention with QK-norm and RoPE; local (windowed) or global."""

    def __init__(self, config: GemmaConfig, layer: int) -> None:
        super().__init__()
        self.n_heads, self.n_kv_heads = config.n_heads, config.n_kv_heads
        self.head_dim = config.head_dim
        self.window = config.layer_windows[layer]  # None: a global layer
        self.scale = 1.0 / math.sqrt(config.head_dim)
        self.q = nn.Linear(config.d_model, config.n_heads * config.head_dim, bias=False)
        self.k = nn.Linear(config.d_model, config.n_kv_heads * config.head_dim, bias=False)
        self.v = nn.Linear(config.d_model, config.n_kv_heads * config.head_dim, bias=False)
        self.o = nn.Linear(config.n_heads * config.head_dim, config.d_model, bias=False)
        self.q_norm = RMSNorm(config.head_dim, config.norm_eps)
        self.k_norm = RMSNorm(config.head_dim, config.norm_eps)
        self.qkv: nn.Linear | None = None  # q, k and v in one product, once fused
        self._qk_scale: torch.Tensor | None = None  # see qk_scale

    def fuse(self) -> None:
        """Stack q, k and v into one (nh + 2 kvh) * hd x C matrix: one product reads
        the same weights in one call (vLLM's QKVParallelLinear); each output keeps its
        own row of weights, so its value is the same."""
        if self.qkv is not None:
            return
        self.qkv = _stacked(self.q, self.k, self.v)
        del self.q, self.k, self.v

    def qk_scale(self) -> torch.Tensor:
        """(nh + kvh, hd) float32: q_norm's 1 + weight on each query head, then k_norm's
        on each key head (kept once both norms are fused)."""
        if self._qk_scale is not None:
            return self._qk_scale
        nh, kvh, hd = self.n_heads, self.n_kv_heads, self.head_dim
        scale = torch.cat([self.q_norm.scale().expand(nh, hd),
                           self.k_norm.scale().expand(kvh, hd)])  # (nh + kvh, hd)
        if self.q_norm.frozen and self.k_norm.frozen:
            self._qk_scale = scale
        return scale

    def forward(
        self, x: torch.Tensor, layer: int, cache: KVStore | None,
        rope: tuple[torch.Tensor, torch.Tensor],
    ) -> torch.Tensor:
        B, T, _ = x.shape
        nh, kvh, hd = self.n_heads, self.n_kv_heads, self.head_dim
        if self.qkv is not None:  # q, k and v heads side by side: (B, T, nh + 2 kvh, hd)
            heads = self.qkv(x).view(B, T, nh + 2 * kvh, hd)
        else:
            heads = torch.cat([self.q(x), self.k(x), self.v(x)], -1).view(B, T, -1, hd)
        # QK-norm and RoPE on the query and key heads together, each head by its own
        # norm's scale: one pass instead of two (the same numbers, element by element)
        qk = rms_norm(heads[:, :, :nh + kvh], self.qk_scale(), self.q_norm.eps)
        qk = rotate(qk, *rope)  # (B, T, nh + kvh, hd); rope: (T, 1, hd) or (B, T, 1, hd)
        q = qk[:, :, :nh].transpose(1, 2)  # (B, nh, T, hd)
        k = qk[:, :, nh:].transpose(1, 2)  # (B, kvh, T, hd)
        v = heads[:, :, nh + kvh:].transpose(1, 2)  # (B, kvh, T, hd)
        if cache is not None:  # stores k, v; attends over what each query may see
            y = cache.attend(layer, q, k, v, scale=self.scale)  # (B, nh, T, hd)
        else:  # the new tokens only: causal, cut by the window if it is shorter
            y = attend(q, k, v, contiguous_mask(T, 0, self.window, T), scale=self.scale)
        y = y.transpose(1, 2).reshape(B, T, self.n_heads * self.head_dim)  # (B, T, nh*hd)
        return self.o(y)  # (B, T, C)


class GeGLU(nn.Module):
    """Gated MLP: down(gelu_tanh(gate(x)) * up(x)), C -> F -> C."""

    def __init__(self, config: GemmaConfig) -> None:
        super().__init__()
        self.gate = nn.Linear(config.d_model, config.ffn_dim, bias=False)
        self.up = nn.Linear(config.d_model, config.ffn_dim, bias=False)
        self.down = nn.Linear(config.ffn_dim, config.d_model, bias=False)
        self.gate_up: nn.Linear | None = None  # gate and up in one product, once fused

    def fuse(self) -> None:
        """Stack gate and up into one 2F x C matrix (vLLM's MergedColumnParallelLinear)."""
        if self.gate_up is not None:
            return
        self.gate_up = _stacked(self.gate, self.up)
        del self.gate, self.up

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.gate_up is not None:
            gate, up = self.gate_up(x).chunk(2, dim=-1)  # (B, T, F) each
        else:
            gate, up = self.gate(x), self.up(x)
        hidden = F.gelu(gate, approximate="tanh") * up  # (B, T, F)
        return self.down(hidden)  # (B, T, C)


def _stacked(*linears: nn.Linear) -> nn.Linear:
    """One bias-free linear whose output is the outputs of ``linears``, in order."""
    weight = torch.cat([lin.weight.detach() for lin in linears])  # (sum of outs, in)
    fused = nn.Linear(weight.shape[1], weight.shape[0], bias=False,
                      dtype=weight.dtype, device=weight.device)
    fused.weight = nn.Parameter(weight, requires_grad=False)
    return fused


class Block(nn.Module):
    """x + post_norm(attn(pre_norm(x))), then x + post_norm(mlp(pre_norm(x)))."""

    def __init__(self, config: GemmaConfig, layer: int) -> None:
        super().__init__()
        self.pre_attn_norm = RMSNorm(config.d_model, config.norm_eps)
        self.attn = Attention(config, layer)
        self.post_attn_norm = RMSNorm(config.d_model, config.norm_eps)
        self.pre_mlp_norm = RMSNorm(config.d_model, config.norm_eps)
        self.mlp = GeGLU(config)
        self.post_mlp_norm = RMSNorm(config.d_model, config.norm_eps)

    def forward(
        self, x: torch.Tensor, layer: int, cache: KVStore | None,
        rope: tuple[torch.Tensor, torch.Tensor],
    ) -> torch.Tensor:
        x = x + self.post_attn_norm(self.attn(self.pre_attn_norm(x), layer, cache, rope))
        return x + self.post_mlp_norm(self.mlp(self.pre_mlp_norm(x)))  # (B, T, C)


class Gemma3(nn.Module):
    """Scaled embeddings, blocks, final RMSNorm, output head tied to the embeddings."""

    def __init__(self, config: GemmaConfig) -> None:
        super().__init__()
        self.config = config
        self.embed = nn.Embedding(config.vocab_size, config.d_model)
        self.blocks = nn.ModuleList(Block(config, i) for i in range(config.n_layers))
        self.norm = RMSNorm(config.d_model, config.norm_eps)
        self.head = nn.Linear(config.d_model, config.vocab_size, bias=False)
        self.head.weight = self.embed.weight  # tied: one (V, C) matrix for both
        self.positions: torch.Tensor  # (max_len,) 0, 1, 2, ...
        self.register_buffer("positions", torch.arange(config.max_len), persistent=False)
        self._groups = [layer_group(i, config.n_layers) for i in range(config.n_layers)]

    def num_parameters(self) -> int:
        """Number of weights (the tied head is counted once, as the embeddings)."""
        return sum(p.numel() for p in self.parameters())

    def forward(
        self, ids: torch.Tensor, cache: KVStore | None = None, start_pos: int | None = None,
        last_only: bool = False, logits_at: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Logits (B, T, V) for token ids (B, T) placed where the cache says.

        Same contract as the toy's :meth:`kvlab.engine.model.TinyLM.forward`: the new
        tokens follow the cache (a flattened paged batch gives each token its own
        position); advancing it is the caller's job. ``last_only``: logits (B, 1, V) of
        the last position only; ``logits_at`` (K,): of those token indices only,
        (B, K, V). The head is a 640 x 262,144 product, the largest in the model.
        """
        clock = getattr(cache, "clock", None) or NO_CLOCK  # a step's phases, if timed
        clock.phase("embed")
        T = ids.shape[1]  # ids: (B, T)
        positions = new_positions(cache, start_pos, T, self.positions)  # (T,) or (B, T)
        x = self.embed(ids)  # (B, T, C)
        x = x * torch.tensor(math.sqrt(self.config.d_model), dtype=x.dtype)  # (B, T, C)
        c = self.config  # the rotation's cos and sin, once per base for every layer
        rope = {base: rope_tables(positions, c.head_dim, base, x.dtype)
                for base in (c.rope_base_local, c.rope_base_global)}
        for layer, block in enumerate(self.blocks):
            clock.phase(self._groups[layer])
            x = block(x, layer, cache, rope[c.rope_base(layer)])  # (B, T, C)
        clock.phase("head")
        if logits_at is not None:
            x = x[:, logits_at]  # (B, K, C): the tokens that sample
        elif last_only:
            x = x[:, -1:]  # (B, 1, C)
        return self.head(self.norm(x))  # (B, T, V)


def build_gemma(config: GemmaConfig, seed: int = 42, dtype: torch.dtype = torch.float32
                ) -> Gemma3:
    """A Gemma3 with random weights drawn from ``seed``, in eval mode, no gradients.

    For tests and proofs on small shapes; :func:`kvlab.engine.gguf_weights.load_gemma`
    gives the real weights. Norm weights are random too, so they are not the identity.
    """
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = Gemma3(config)
        for module in model.modules():
            if isinstance(module, RMSNorm):
                nn.init.normal_(module.weight, std=0.1)
    model.to(dtype)
    model.eval()
    model.requires_grad_(False)
    return model
