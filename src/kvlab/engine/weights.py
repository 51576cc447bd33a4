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
  rows costs nearly what 1 row costs, but about one greedy token in five differs from
  float32's on real text (``kvlab engine-batch`` measures both). The flat end of the
  trade-off, for the lesson; ``int8`` serves.

The output head of Gemma 3 (tied to the 262,144 x 640 embeddings, 63 % of the
weights) is converted like every other matrix: it is the largest read of a decode
step, so its form decides most of the step time. It gets its own converted copy; the
embedding table stays in the activations' dtype, since a step reads only one row of
it per token. Only the rows that sample go through it (``logits_at``).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import TypeVar

import torch
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
        self.packed = torch.ops.mkldnn._reorder_linear_weight(bf16, 1)  # opaque (out, in)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.ops.mkldnn._linear_pointwise(
            x.to(torch.bfloat16), self.packed, None, "none", [], "")  # (..., out)


class Int8Linear(nn.Module):
    """y = x Wᵀ with W in int8 (one scale per output row) and x in ``parts`` 8-bit parts
    per token (2: ~16 bits, 1: 8 bits; see the module docstring): an integer product,
    rescaled to float32."""

    def __init__(self, weight: torch.Tensor, parts: int = 2) -> None:
        super().__init__()
        self.parts = parts
        self.out_features, self.in_features = weight.shape
        self.weight_nbytes = weight.numel()
        w = weight.detach().float()
        self.scale = w.abs().amax(dim=1).clamp(min=1e-12) / 127  # (out,)
        q = torch.round(w / self.scale[:, None]).to(torch.int8)  # (out, in)
        self.packed = torch.ops.onednn.qlinear_prepack(q, None)
        self.zero = torch.zeros(self.out_features, dtype=torch.long)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        qx, step = _split_rows(x, self.parts)  # (parts*M, in) uint8, (M, 1)
        M = step.shape[0]
        y = torch.ops.onednn.qlinear_pointwise(
            qx, 1.0, 128, self.packed, self.scale, self.zero, None, 1.0, 0,
            torch.float32, "none", [], "")  # (parts*M, out): W·hi, then W·lo
        if self.parts == 2:
            y = y[:M].add_(y[M:], alpha=1 / 254)
        y = y.mul_(step)  # (M, out): W·x
        return y.to(x.dtype).reshape(*x.shape[:-1], self.out_features)


# q, k and v (and gate and up) read the same x: split it once. Keyed by the tensor
# object (kept alive here, so never reused); inference tensors have no version counter,
# and the models never change a linear's input in place.
_last_split = threading.local()


def _split_rows(x: torch.Tensor, n_parts: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Each row of x (..., in) as ``n_parts`` 8-bit parts, stacked (n_parts*M, in) and
    offset by 128 as oneDNN's uint8 wants: hi = round(x / step) and, with 2 parts,
    lo = round((x - hi*step) * 254 / step), with step = max|row| / 127, so
    x = step * (hi + lo / 254) to about 16 bits (8 with hi alone)."""
    seen = getattr(_last_split, "entry", None)
    if seen is not None and seen[0] is x and seen[1] == n_parts:
        return seen[2], seen[3]
    rows = x.reshape(-1, x.shape[-1]).float()  # (M, in)
    step = rows.abs().amax(dim=-1, keepdim=True).clamp_(min=1e-30).div_(127)  # (M, 1)
    M = rows.shape[0]
    parts = torch.empty((n_parts * M, rows.shape[1]))  # hi above lo
    t = rows / step  # (M, in) in -127..127
    hi = torch.round(t, out=parts[:M])  # (M, in)
    if n_parts == 2:
        torch.round(t.sub_(hi).mul_(254), out=parts[M:])  # lo: (M, in) in -127..127
    qx = parts.add_(128).to(torch.uint8)  # (n_parts*M, in)
    _last_split.entry = (x, n_parts, qx, step)
    return qx, step


def _converted(linear: nn.Linear, fmt: WeightFormat) -> nn.Module:
    if fmt.name == "bfloat16":
        return PackedLinear(linear.weight)
    return Int8Linear(linear.weight, parts=1 if fmt.name == "w8a8" else 2)


def to_format(model: M, name: str) -> M:
    """``model`` (in eval mode, on the CPU) served in the format ``name``: every
    ``nn.Linear`` without bias (the tied head included) replaced in place, the rest
    (embeddings, norms) cast to the format's activation dtype. float32 changes nothing.
    """
    fmt = weight_format(name)
    if fmt.name == "float32":
        return model
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
