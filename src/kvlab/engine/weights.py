"""Weights as the roofline asks: the forms a model's matrices are served in.

A decode step multiplies a few rows of activations by every weight matrix, so it reads
every weight once, and at a few rows that read is the step's cost: bytes of weights /
memory bandwidth is a floor on the step time, and the floor is the same for 1 row as
for 8 as long as the arithmetic keeps up (:mod:`kvlab.studies.roofline` measures
both). Fewer bytes per weight lower the floor; a kernel that keeps up with more rows
keeps it flat. The forms (``FORMATS``), all through torch's own operators:

- ``float32``: ``nn.Linear`` as loaded, the proofs' form (the GGUF's values, exactly);
- ``bfloat16``: half the bytes; the weights are re-laid out once into oneDNN's blocked
  format for its matrix product (``torch.ops.mkldnn._linear_pointwise``, the op
  ``torch.compile`` uses for a frozen CPU linear), which reads them faster than
  ``F.linear`` on a plain bf16 tensor at a few rows;
- ``int8``: a quarter of the bytes; weights rounded to int8 with one scale per output
  row, multiplied by oneDNN's u8 x s8 product (``torch.ops.onednn.qlinear_pointwise``,
  int32 sums, float32 out). Torch's weight-only int8 product
  (``aten._weight_int8pack_mm``) converts every weight back to floating point at each
  use, which costs more than the bytes it saves from 4 rows on; an integer product
  keeps 8 rows at about the cost of 1. Its activations must be integers too, and 8 bits
  per token (llama.cpp's Q8 activations, but with one scale per 640 values, not per 32)
  lose too much on Gemma, so each row is sent twice: its 8-bit rounding and the 8-bit
  rounding of what that missed, about 16 bits in all, for 2 x rows in one product (the
  weights are still read once);
- ``w8a8``: the same int8 weights with each row sent once, in 8 bits: the product of 8
  rows costs nearly what 1 row costs, but about one greedy token in ten differs from
  float32's on real text (``kvlab engine-batch`` measures both). The flat end of the
  trade-off, for the lesson; ``int8`` serves.

On an x86 CPU without VNNI (AVX2 alone, or AVX-512 without VNNI), oneDNN's u8 x s8
product adds each pair of products in int16 with saturation (``vpmaddubsw``): 255 x 127
twice overflows it, and the product is silently wrong (by 10 % of its size on random
data). There each activation part uses 7 bits (-63..63, :func:`activation_levels`
probes the CPU once), so no pair can overflow; the int8 format then carries about 14
bits per activation, w8a8 7.

oneDNN's packed bf16 product needs AVX-512 (BW, VL, DQ) or AVX-NE-CONVERT; without
them ``bfloat16`` multiplies plain bf16 tensors with ``F.linear`` (same numbers, slower).

The output head of Gemma 3 (tied to the 262,144 x 640 embeddings, 63 % of the
weights) is converted like every other matrix: it is the largest read of a decode
step, so its form decides most of the step time. It gets its own converted copy; the
embedding table stays in the activations' dtype, since a step reads only one row of
it per token. Only the rows that sample go through it (``logits_at``).
"""

from __future__ import annotations

import functools
import threading
import time
from dataclasses import dataclass
from typing import TypeVar

import torch
import torch.nn.functional as F
from torch import nn

from kvlab.errors import ConfigError

M = TypeVar("M", bound=nn.Module)


@dataclass(frozen=True)
class WeightFormat:
    """A serving form: the activations' (and KV cache's) dtype, and bytes per weight."""

    name: str
    activations: torch.dtype
    bytes_per_weight: float
    about: str


FORMATS = {
    "float32": WeightFormat("float32", torch.float32, 4, "nn.Linear (the proofs' form)"),
    "bfloat16": WeightFormat("bfloat16", torch.bfloat16, 2,
                             "bf16, packed for oneDNN's matmul"),
    "int8": WeightFormat("int8", torch.float32, 1,
                         "int8 per row, activations in two 8-bit parts (oneDNN u8 x s8)"),
    "w8a8": WeightFormat("w8a8", torch.float32, 1,
                         "int8 per row, activations in one 8-bit part (oneDNN u8 x s8)"),
}


def weight_format(name: str) -> WeightFormat:
    """The format called ``name``; ConfigError naming the choices otherwise."""
    try:
        return FORMATS[name]
    except KeyError:
        raise ConfigError(
            f"unknown weight format {name!r}; choose one of: {', '.join(FORMATS)}"
        ) from None


class PackedLinear(nn.Module):
    """y = x Wᵀ with W (out, in) in bfloat16, laid out once for oneDNN's product."""

    def __init__(self, weight: torch.Tensor) -> None:
        super().__init__()
        self.out_features, self.in_features = weight.shape
        self.weight_nbytes = weight.numel() * 2
        bf16 = weight.detach().to(torch.bfloat16).contiguous()
        # oneDNN's bf16 product needs AVX-512 (BW, VL, DQ) or AVX-NE-CONVERT; else plain
        self.packed = torch.ops.mkldnn._reorder_linear_weight(bf16, 1) \
            if torch.ops.mkldnn._is_mkldnn_bf16_supported() else None  # opaque (out, in)
        self.plain = bf16 if self.packed is None else None  # (out, in)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.plain is not None:
            return F.linear(x.to(torch.bfloat16), self.plain)  # (..., out)
        return torch.ops.mkldnn._linear_pointwise(
            x.to(torch.bfloat16), self.packed, None, "none", [], "")  # (..., out)


@functools.cache
def activation_levels() -> int:
    """Levels each side of zero an activation part uses on this CPU: 127 (8 bits), or
    63 (7 bits) where oneDNN's u8 x s8 product saturates pairs of products in int16 (x86
    without VNNI), so that no pair can overflow. Probed once: 255 x 127, 64 times."""
    n, out = 64, 8
    packed = torch.ops.onednn.qlinear_prepack(torch.full((out, n), 127, dtype=torch.int8),
                                              None)
    x = torch.full((1, n), 255, dtype=torch.uint8)  # 127 above the zero point 128
    y = torch.ops.onednn.qlinear_pointwise(
        x, 1.0, 128, packed, torch.ones(out), torch.zeros(out, dtype=torch.long), None,
        1.0, 0, torch.float32, "none", [], "")  # (1, out)
    return 127 if float(y[0, 0]) == 127 * 127 * n else 63


class Int8Linear(nn.Module):
    """y = x Wᵀ with W in int8 (one scale per output row) and x in ``parts`` 8-bit parts
    per token (2: ~16 bits, 1: 8 bits; see the module docstring): an integer product,
    rescaled to float32. ``levels``: an activation part's range, -levels..levels (None:
    :func:`activation_levels`, what this CPU's product can sum without overflow)."""

    def __init__(self, weight: torch.Tensor, parts: int = 2, levels: int | None = None
                 ) -> None:
        super().__init__()
        self.parts = parts
        self.levels = levels or activation_levels()
        self.out_features, self.in_features = weight.shape
        self.weight_nbytes = weight.numel()
        w = weight.detach().float()
        self.scale = w.abs().amax(dim=1).clamp(min=1e-12) / 127  # (out,)
        q = torch.round(w / self.scale[:, None]).to(torch.int8)  # (out, in)
        self.packed = torch.ops.onednn.qlinear_prepack(q, None)
        self.zero = torch.zeros(self.out_features, dtype=torch.long)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        L = self.levels
        qx, step = _split_rows(x, self.parts, L)  # (parts*M, in) uint8, (M, 1)
        M = step.shape[0]
        y = torch.ops.onednn.qlinear_pointwise(
            qx, 1.0, L + 1, self.packed, self.scale, self.zero, None, 1.0, 0,
            torch.float32, "none", [], "")  # (parts*M, out): W·hi, then W·lo
        if self.parts == 2:
            y = y[:M].add_(y[M:], alpha=1 / (2 * L))
        y = y.mul_(step)  # (M, out): W·x
        return y.to(x.dtype).reshape(*x.shape[:-1], self.out_features)


# q, k and v (and gate and up) read the same x: split it once. Keyed by the tensor
# object (kept alive here, so never reused); inference tensors have no version counter,
# and the models never change a linear's input in place.
_last_split = threading.local()


def _split_rows(x: torch.Tensor, n_parts: int, levels: int = 127
                ) -> tuple[torch.Tensor, torch.Tensor]:
    """Each row of x (..., in) as ``n_parts`` parts of -L..L (L = ``levels``), stacked
    (n_parts*M, in) and offset by L + 1 as oneDNN's uint8 wants: hi = round(x / step)
    and, with 2 parts, lo = round((x - hi*step) * 2L / step), with step = max|row| / L,
    so x = step * (hi + lo / 2L): about 16 bits at L = 127 (8 with hi alone)."""
    seen = getattr(_last_split, "entry", None)
    if seen is not None and seen[0] is x and seen[1] == (n_parts, levels):
        return seen[2], seen[3]
    rows = x.reshape(-1, x.shape[-1]).float()  # (M, in)
    step = rows.abs().amax(dim=-1, keepdim=True).clamp_(min=1e-30).div_(levels)  # (M, 1)
    M = rows.shape[0]
    parts = torch.empty((n_parts * M, rows.shape[1]))  # hi above lo
    t = rows / step  # (M, in) in -L..L
    hi = torch.round(t, out=parts[:M])  # (M, in)
    if n_parts == 2:
        torch.round(t.sub_(hi).mul_(2 * levels), out=parts[M:])  # lo: (M, in) in -L..L
    qx = parts.add_(levels + 1).to(torch.uint8)  # (n_parts*M, in)
    _last_split.entry = (x, (n_parts, levels), qx, step)
    return qx, step


def _converted(linear: nn.Linear, fmt: WeightFormat) -> nn.Module:
    if fmt.name == "bfloat16":
        return PackedLinear(linear.weight)
    return Int8Linear(linear.weight, parts=1 if fmt.name == "w8a8" else 2)


def to_format(model: M, name: str) -> M:
    """``model`` (in eval mode, on the CPU) served in the format ``name``: the
    products that read the same input stacked into one where the model offers it
    (``fuse()``: Gemma's q, k, v and gate, up, as vLLM serves them: fewer calls, the same
    weights read), every ``nn.Linear`` without bias (the tied head included) replaced in
    place, the rest (embeddings, norms) cast to the format's activation dtype. float32
    changes nothing.
    """
    fmt = weight_format(name)
    if fmt.name == "float32":
        return model
    for module in list(model.modules()):  # q, k, v and gate, up stacked where a model can
        fuse = getattr(module, "fuse", None)
        if callable(fuse):
            fuse()
    targets = [(parent, child_name, child) for parent in model.modules()
               for child_name, child in parent.named_children()]
    for parent, child_name, child in targets:
        if isinstance(child, nn.Linear) and child.bias is None:
            setattr(parent, child_name, _converted(child, fmt))
    return model.to(fmt.activations)


def weight_nbytes(model: nn.Module) -> int:
    """Bytes of the matrices a forward multiplies by (each tied matrix counted where
    it is multiplied, the embedding lookup left out): what a decode step reads."""
    total = 0
    for module in model.modules():
        if isinstance(module, (PackedLinear, Int8Linear)):
            total += module.weight_nbytes
        elif isinstance(module, nn.Linear):
            total += module.weight.numel() * module.weight.element_size()
    return total


COPY_BYTES = 256 * 2**20  # per array: far beyond any CPU cache


def copy_bandwidth(nbytes: int = COPY_BYTES, repeats: int = 5) -> float:
    """STREAM-like copy on this thread count: (read + written) bytes / s, best run. The
    floor of a decode step is :func:`weight_nbytes` / this."""
    a = torch.ones(nbytes // 4, dtype=torch.float32)
    b = torch.empty_like(a)
    b.copy_(a)  # pages touched before the clock
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        b.copy_(a)
        best = min(best, time.perf_counter() - start)
    return 2 * a.numel() * 4 / best


@dataclass(frozen=True)
class Fidelity:
    """How close a format's logits stay to float32's on the same tokens."""

    top1: float  # fraction of positions whose greedy token is float32's
    kl: float  # mean KL(float32 || format) per position, in nats


def fidelity(logits: torch.Tensor, reference: torch.Tensor) -> Fidelity:
    """Compare logits (T, V) of a served format with the float32 ``reference`` (T, V)
    computed on the same tokens (teacher-forced: each position sees the same past)."""
    got, ref = logits.float().log_softmax(-1), reference.float().log_softmax(-1)
    top1 = float((got.argmax(-1) == ref.argmax(-1)).float().mean())
    kl = float((ref.exp() * (ref - got)).sum(-1).mean())
    return Fidelity(top1, kl)
