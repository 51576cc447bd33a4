"""Serving formats: every matrix converted (the tied head included), the bytes a step
reads counted, and each product within the error its arithmetic allows."""

from __future__ import annotations

import os
import platform
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from kvlab.engine.gemma import build_gemma
from kvlab.engine.generate import generate
from kvlab.engine.weights import (
    FORMATS,
    Int8Linear,
    PackedLinear,
    activation_levels,
    fidelity,
    to_format,
    weight_format,
    weight_nbytes,
)
from kvlab.errors import ConfigError
from tests.engine.test_gemma import TINY

F32_EPS = torch.finfo(torch.float32).eps
BF16_EPS = torch.finfo(torch.bfloat16).eps


def _data(rows: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    w = torch.randn(48, 40, generator=gen) * 0.1  # (out, in)
    x = torch.randn(rows, 40, generator=gen) * torch.linspace(0.1, 8.0, 40)  # skewed
    return w, x


def _levels_this_cpu_sums() -> list[int]:
    """7-bit parts everywhere; 8-bit where this CPU's product does not saturate."""
    return sorted({63, activation_levels()})


@pytest.mark.parametrize("rows", [1, 3, 16])
@pytest.mark.parametrize("parts", [2, 1])
@pytest.mark.parametrize("levels", _levels_this_cpu_sums())
def test_int8_product_is_within_its_activation_rounding(rows: int, parts: int,
                                                         levels: int) -> None:
    # The weights are rounded once (one scale per output row); the activations are
    # sent as step * (hi + lo / 2L), off by at most step / 4L each (step / 2 as hi).
    w, x = _data(rows)
    scale = w.abs().amax(dim=1) / 127
    wq = torch.round(w / scale[:, None]) * scale[:, None]  # the int8 weights, as floats
    got = Int8Linear(w, parts, levels)(x)
    exact = F.linear(x.double(), wq.double())
    error = 1 / (4 * levels) if parts == 2 else 1 / 2
    step = x.abs().amax(dim=1, keepdim=True).double() / levels  # (rows, 1)
    magnitude = x.abs().double() @ wq.abs().double().T  # (rows, out)
    bound = step * error * wq.abs().double().sum(dim=1) + 40 * F32_EPS * magnitude
    assert ((got.double() - exact).abs() <= bound).all()
    assert (w - wq).abs().max() <= scale.max() / 2


def test_activation_levels_sum_without_overflow() -> None:
    # Every activation and weight at its largest: 127 x L summed 256 times, which a
    # product that saturates pairs in int16 (x86 without VNNI) gets wrong at L = 127.
    n = 256
    y = Int8Linear(torch.ones(8, n), parts=1)(torch.ones(2, n))  # (2, 8)
    assert torch.allclose(y, torch.full((2, 8), float(n)), rtol=1e-5)


@pytest.mark.skipif(platform.machine().lower() not in ("x86_64", "amd64"),
                    reason="ONEDNN_MAX_CPU_ISA=AVX2 stands for an x86 CPU without VNNI")
def test_the_formats_hold_on_a_cpu_without_vnni_or_avx512() -> None:
    """This module's tests again, with oneDNN held to AVX2 (an x86 CPU without VNNI or
    AVX-512, where u8 x s8 pairs saturate in int16 and bf16 cannot be packed)."""
    env = {**os.environ, "ONEDNN_MAX_CPU_ISA": "AVX2"}
    probe = ("import torch; from kvlab.engine.weights import activation_levels; "
             "print(activation_levels(), torch.ops.mkldnn._is_mkldnn_bf16_supported())")
    seen = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True,
                          text=True, check=True).stdout.split()
    assert seen == ["63", "False"], f"oneDNN did not take AVX2 as its limit: {seen}"
    done = subprocess.run([sys.executable, "-m", "pytest", __file__, "-q", "-p",
                           "no:cacheprovider", "-k", "not without_vnni"], env=env,
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout[-3000:]


def test_packed_bfloat16_product_is_bfloat16_rounding_of_the_float32_sum() -> None:
    w, x = _data(5)
    wb, xb = w.to(torch.bfloat16), x.to(torch.bfloat16)
    got = PackedLinear(w)(xb)
    assert got.dtype == torch.bfloat16
    exact = F.linear(xb.double(), wb.double())
    magnitude = xb.abs().double() @ wb.abs().double().T
    bound = BF16_EPS * exact.abs() + 40 * F32_EPS * magnitude
    assert ((got.double() - exact).abs() <= bound).all()


@pytest.mark.parametrize("name", ["bfloat16", "int8", "w8a8"])
def test_every_matrix_is_converted_and_its_bytes_counted(name: str) -> None:
    model = to_format(build_gemma(TINY, seed=3), name)
    assert not any(isinstance(m, nn.Linear) for m in model.modules())
    assert isinstance(model.head, PackedLinear | Int8Linear)
    matrices = (TINY.d_model * (TINY.n_heads + 2 * TINY.n_kv_heads) * TINY.head_dim
                + TINY.n_heads * TINY.head_dim * TINY.d_model
                + 3 * TINY.d_model * TINY.ffn_dim) * TINY.n_layers
    matrices += TINY.vocab_size * TINY.d_model  # the head, read at every step
    assert weight_nbytes(model) == matrices * FORMATS[name].bytes_per_weight
    assert model.embed.weight.dtype == FORMATS[name].activations  # the lookup table


def test_float32_is_the_model_as_loaded() -> None:
    model = build_gemma(TINY, seed=3)
    assert to_format(model, "float32") is model and model.head.weight is model.embed.weight
    assert weight_nbytes(model) == 4 * sum(m.weight.numel() for m in model.modules()
                                           if isinstance(m, nn.Linear))


@pytest.mark.parametrize("name", ["bfloat16", "int8"])
def test_a_served_format_generates_through_the_cache(name: str) -> None:
    model = to_format(build_gemma(TINY, seed=3), name)
    out = generate(model, list(range(1, 12)), 5, keep_logits=True)
    assert len(out.tokens) == 5 and out.logits is not None
    assert torch.isfinite(out.logits.float()).all()


def test_fidelity_counts_agreement_and_divergence() -> None:
    ref = torch.tensor([[2.0, 0.0, 0.0], [0.0, 3.0, 0.0]])
    assert fidelity(ref, ref).top1 == 1.0 and fidelity(ref, ref).kl == pytest.approx(0.0)
    swapped = fidelity(ref.flip(-1), ref)
    assert swapped.top1 == 0.5 and swapped.kl > 0


def test_an_unknown_format_names_the_choices() -> None:
    with pytest.raises(ConfigError, match="float32, bfloat16, int8, w8a8"):
        weight_format("fp8")


@pytest.mark.parametrize("name", ["bfloat16", "int8"])
def test_stacked_projections_give_the_same_logits(name: str) -> None:
    """to_format stacks q, k, v and gate, up into one product each: the same numbers
    as the separate products, bit for bit (each output keeps its own row of weights)."""
    import copy

    from tests.engine.test_gemma import TINY

    base = build_gemma(TINY)
    fused = to_format(copy.deepcopy(base), name)
    assert all(b.attn.qkv is not None and b.mlp.gate_up is not None for b in fused.blocks)
    separate = copy.deepcopy(base)
    for module in separate.modules():
        if hasattr(module, "fuse"):
            module.fuse = lambda: None  # type: ignore[method-assign]
    separate = to_format(separate, name)
    ids = torch.randint(0, TINY.vocab_size, (1, 12), generator=torch.Generator().manual_seed(0))
    with torch.inference_mode():
        assert torch.equal(fused(ids), separate(ids))
