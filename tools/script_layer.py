"""How much of a decode layer's time is Python between operators? (issue 41)

One Gemma 3 270M decode layer's work (norms, q|k|v, QK-norm and RoPE, writing K/V into
a paged pool and reading it back, grouped attention, o, the gated MLP; packed bf16
weights of the real shapes, random values) written once as a plain function, then run
18 times per step three ways: eagerly from Python; compiled by ``torch.jit.script``
(the same operators, run by TorchScript's interpreter: no Python frame between them;
deprecated in torch 2.13); and with each stretch between two products compiled by
``torch.compile`` (inductor, dynamic rows; the packed oneDNN weights stay out of the
graphs, which dynamo cannot trace). Checks the scripted step gives eager's numbers bit
for bit and reports how far the compiled one lands, then times steps of each in turn,
median of 15, at the rows given. With ``--profile``, it also lists the operators of
five eager steps by their own time (torch.profiler), per step. A benchmark, never a test:

    flock /tmp/kvlab-measure.lock python tools/script_layer.py 1 8 16
    flock /tmp/kvlab-measure.lock python tools/script_layer.py --profile 16
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from typing import Any

import torch
import torch.nn.functional as F

NH, KVH, HD, C, FFN, LAYERS, CONTEXT = 4, 1, 256, 640, 2048, 18, 64


def rms(x: torch.Tensor, scale: torch.Tensor, eps: float) -> torch.Tensor:
    xf = x.float()
    inv = xf.pow(2).mean(-1, keepdim=True).add_(eps).rsqrt_()
    return (xf * inv).mul_(scale).to(x.dtype)


def lin(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return torch.ops.mkldnn._linear_pointwise(x.to(torch.bfloat16), w, None, "none", [], "")


def layer(x: torch.Tensor, w_qkv: torch.Tensor, w_o: torch.Tensor, w_gu: torch.Tensor,
          w_down: torch.Tensor, s_pre: torch.Tensor, s_qk: torch.Tensor, s_post: torch.Tensor,
          s_pre_mlp: torch.Tensor, s_post_mlp: torch.Tensor, cos: torch.Tensor,
          sin: torch.Tensor, pool_k: torch.Tensor, pool_v: torch.Tensor, write: torch.Tensor,
          read: torch.Tensor, mask: torch.Tensor, eps: float, nh: int, kvh: int, hd: int,
          scale: float) -> torch.Tensor:
    """One decode layer for R rows x (1, R, C): the operators kvlab's Block runs."""
    b, t = x.shape[0], x.shape[1]
    heads = lin(rms(x, s_pre, eps), w_qkv).view(b, t, nh + 2 * kvh, hd)
    qk = rms(heads[:, :, :nh + kvh], s_qk, eps)
    half = hd // 2
    qk = qk * cos + torch.cat([qk[..., half:], qk[..., :half]], dim=-1) * sin
    q = qk[:, :, :nh].transpose(1, 2)
    k = qk[:, :, nh:].transpose(1, 2)
    v = heads[:, :, nh + kvh:].transpose(1, 2)
    pool_k.index_copy_(0, write, k[0].transpose(0, 1))
    pool_v.index_copy_(0, write, v[0].transpose(0, 1))
    q_rows = q[0].transpose(0, 1)[:, :, None]  # (R, nh, 1, hd)
    r, s = read.shape[0], read.shape[1]
    cells = read.view(-1)
    keys = pool_k.index_select(0, cells).view(r, s, kvh, hd).transpose(1, 2)
    values = pool_v.index_select(0, cells).view(r, s, kvh, hd).transpose(1, 2)
    grouped = q_rows.reshape(r, kvh, nh // kvh, hd)
    y = F.scaled_dot_product_attention(grouped, keys, values, attn_mask=mask, scale=scale)
    y = y.view(r, nh, 1, hd).transpose(0, 2).transpose(1, 2).reshape(b, t, nh * hd)
    x = x + rms(lin(y, w_o), s_post, eps)
    gate, up = lin(rms(x, s_pre_mlp, eps), w_gu).chunk(2, dim=-1)
    return x + rms(lin(F.gelu(gate, approximate="tanh") * up, w_down), s_post_mlp, eps)


def _norm_qk_rope(heads: torch.Tensor, s_qk: torch.Tensor, cos: torch.Tensor,
                  sin: torch.Tensor, eps: float, nh: int, kvh: int, hd: int) -> torch.Tensor:
    qk = rms(heads[:, :, :nh + kvh], s_qk, eps)
    half = hd // 2
    return qk * cos + torch.cat([qk[..., half:], qk[..., :half]], dim=-1) * sin


def _residual_norm(x: torch.Tensor, a: torch.Tensor, s_post: torch.Tensor,
                   s_next: torch.Tensor, eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    x = x + rms(a, s_post, eps)
    return x, rms(x, s_next, eps)


def _gated(gate_up: torch.Tensor) -> torch.Tensor:
    gate, up = gate_up.chunk(2, dim=-1)
    return F.gelu(gate, approximate="tanh") * up


def _residual(x: torch.Tensor, d: torch.Tensor, s: torch.Tensor, eps: float) -> torch.Tensor:
    return x + rms(d, s, eps)


PIECES: dict[str, Any] = {f.__name__: torch.compile(f, dynamic=True, fullgraph=True)
          for f in (rms, _norm_qk_rope, _residual_norm, _gated, _residual)}


def regions(x: torch.Tensor, w_qkv: torch.Tensor, w_o: torch.Tensor, w_gu: torch.Tensor,
            w_down: torch.Tensor, s_pre: torch.Tensor, s_qk: torch.Tensor,
            s_post: torch.Tensor, s_pre_mlp: torch.Tensor, s_post_mlp: torch.Tensor,
            cos: torch.Tensor, sin: torch.Tensor, pool_k: torch.Tensor,
            pool_v: torch.Tensor, write: torch.Tensor, read: torch.Tensor,
            mask: torch.Tensor, eps: float, nh: int, kvh: int, hd: int,
            scale: float) -> torch.Tensor:
    """:func:`layer` with the work between products in compiled pieces."""
    b, t = x.shape[0], x.shape[1]
    heads = lin(PIECES["rms"](x, s_pre, eps), w_qkv).view(b, t, nh + 2 * kvh, hd)
    qk = PIECES["_norm_qk_rope"](heads, s_qk, cos, sin, eps, nh, kvh, hd)
    k = qk[:, :, nh:].transpose(1, 2)
    v = heads[:, :, nh + kvh:].transpose(1, 2)
    pool_k.index_copy_(0, write, k[0].transpose(0, 1))
    pool_v.index_copy_(0, write, v[0].transpose(0, 1))
    q_rows = qk[:, :, :nh].transpose(1, 2)[0].transpose(0, 1)[:, :, None]
    r, s = read.shape[0], read.shape[1]
    keys = pool_k.index_select(0, read.view(-1)).view(r, s, kvh, hd).transpose(1, 2)
    values = pool_v.index_select(0, read.view(-1)).view(r, s, kvh, hd).transpose(1, 2)
    y = F.scaled_dot_product_attention(q_rows.reshape(r, kvh, nh // kvh, hd), keys, values,
                                       attn_mask=mask, scale=scale)
    y = y.view(r, nh, 1, hd).transpose(0, 2).transpose(1, 2).reshape(b, t, nh * hd)
    x, h = PIECES["_residual_norm"](x, lin(y, w_o), s_post, s_pre_mlp, eps)
    return PIECES["_residual"](x, lin(PIECES["_gated"](lin(h, w_gu)), w_down), s_post_mlp,
                               eps)


def main(rows: int, profile: bool = False) -> None:
    torch.set_num_threads(1)
    scripted = torch.jit.script(layer)
    gen = torch.Generator().manual_seed(0)

    def packed(o: int, i: int) -> torch.Tensor:
        w = (torch.randn(o, i, generator=gen) * 0.02).to(torch.bfloat16)
        return torch.ops.mkldnn._reorder_linear_weight(w, 1)

    def norm(*shape: int) -> torch.Tensor:
        return 1 + 0.1 * torch.randn(*shape, generator=gen)

    weights = [(packed((NH + 2 * KVH) * HD, C), packed(C, NH * HD), packed(2 * FFN, C),
                packed(C, FFN)) for _ in range(LAYERS)]
    scales = [(norm(C), norm(NH + KVH, HD), norm(C), norm(C), norm(C)) for _ in range(LAYERS)]
    per_row = CONTEXT + 16
    pools = [(torch.zeros(rows * per_row, KVH, HD, dtype=torch.bfloat16),
              torch.zeros(rows * per_row, KVH, HD, dtype=torch.bfloat16))
             for _ in range(LAYERS)]
    write = torch.arange(rows) * per_row + CONTEXT
    read = torch.stack([torch.arange(per_row) + r * per_row for r in range(rows)])
    mask = torch.zeros(rows, 1, 1, per_row, dtype=torch.bool)
    mask[..., :CONTEXT + 1] = True
    angles = torch.randn(1, rows, 1, HD, generator=gen)
    cos, sin = angles.cos().to(torch.bfloat16), angles.sin().to(torch.bfloat16)
    x0 = torch.randn(1, rows, C, generator=gen).to(torch.bfloat16)

    def step(fn) -> torch.Tensor:  # type: ignore[no-untyped-def]
        x = x0
        for n in range(LAYERS):
            x = fn(x, *weights[n], *scales[n], cos, sin, *pools[n], write, read, mask,
                   1e-6, NH, KVH, HD, 1 / 16)
        return x

    with torch.inference_mode():
        reference = step(layer)
        same = torch.equal(reference, step(scripted))
        started = time.perf_counter()
        off = float((step(regions).float() - reference.float()).abs().max()
                    / reference.float().abs().max())
        compile_s = time.perf_counter() - started
        for _ in range(3):
            step(scripted)
            step(regions)
        times: dict[str, list[float]] = {"eager": [], "script": [], "regions": []}
        for _ in range(15):
            for name, fn in (("eager", layer), ("script", scripted), ("regions", regions)):
                t0 = time.perf_counter()
                step(fn)
                times[name].append(1e3 * (time.perf_counter() - t0))
        if profile:
            with torch.profiler.profile() as prof:
                for _ in range(5):
                    step(layer)
    eager, script, compiled = (statistics.median(times[k])
                               for k in ("eager", "script", "regions"))
    print(f"rows {rows}: 18 layers eager {eager:.2f} ms; scripted {script:.2f} ms "
          f"({script - eager:+.2f} ms, bit for bit: {same}); compiled pieces {compiled:.2f} "
          f"ms ({compiled - eager:+.2f} ms, first step {compile_s:.1f} s, output off by "
          f"{off:.1%} of its largest); load {os.getloadavg()[0]:.2f}")
    if profile:
        ops = sorted(prof.key_averages(), key=lambda e: -e.self_cpu_time_total)[:12]
        print(f"  eager, ms per step by operator (own time, {rows} rows): " + "; ".join(
            f"{e.key} {e.self_cpu_time_total / 5e3:.2f} ({e.count // 5} calls)" for e in ops))


if __name__ == "__main__":
    values = [v for v in sys.argv[1:] if v != "--profile"]
    for value in values or ["1"]:
        main(int(value), profile="--profile" in sys.argv[1:])
