"""How far two float32 evaluations of the same model may differ by rounding alone.

Cached vs naive, batched vs alone, paged vs contiguous: each pair computes the same
logits with the same float32 operations, but sums them in another order (another
BLAS blocking, another kernel set, keys gathered in another order, a padded batch).
Rounding then makes the results differ, and by how much depends on the kernels torch
picks for the CPU (``ATEN_CPU_CAPABILITY``, the BLAS code path), not on kvlab's code.
So an equality check needs a bound that follows from the arithmetic, not from what one
machine happened to show.

The bound, written once here:

- A float32 sum of ``n`` terms is off by at most about ``n * u * sum |terms|`` (``u``
  is half an ulp at 1.0) in the worst case; in practice the rounding errors have both
  signs and grow like ``sqrt(n) * u`` (Higham and Mary, "A new approach to
  probabilistic rounding error analysis", 2019). Two orders of the same sum differ by
  at most the sum of their two errors.
- A logit sits at the end of a chain of such sums: in every layer, the projections sum
  over the model width, the MLP's second projection over its width, the output
  projection over the heads' width and attention over the keys; each layer's error
  joins the residual stream and is carried to the logits. With ``L`` layers whose
  longest sum has ``n`` terms, about ``L * n`` rounding errors reach each logit, so
  their spread is about ``sqrt(L * n)`` rounding units.
- The size of what is summed is not known term by term, so the bound takes the largest
  |value| compared as its scale (logits are the end of the chain).

Hence ``|a - b| <= ulps * eps * max|ref| * sqrt(L * n)``, ``eps`` = 2**-23 (one ulp at
1.0), with ``ulps`` a few units. For Gemma 3 270M (18 layers, MLP width 2,048) at logits
of magnitude ~30 that is ``ulps * 7e-4``; for the toy (3 layers, MLP width 640, logits
~1) ``ulps * 5e-6``. A real bug (a wrong mask, position or block table) moves logits by
orders of magnitude more; tests/engine/test_rounding.py shows that it fails the bound.
"""

from __future__ import annotations

import math
from typing import Protocol

import torch

FLOAT32_EPS = float(torch.finfo(torch.float32).eps)  # 2**-23: one ulp at 1.0
ULPS = 2.0  # rounding units allowed per sqrt(summed term); see the module docstring


class ChainShape(Protocol):
    """The widths a logit's chain of sums runs through."""

    n_layers: int
    d_model: int
    n_heads: int

    @property
    def head_dim(self) -> int:
        """Width of one attention head."""
        ...

    @property
    def mlp_width(self) -> int:
        """Width of the MLP's hidden layer."""
        ...


def summed_terms(config: ChainShape, n_keys: int) -> int:
    """Rounding errors behind one logit: layers x the longest sum in a layer (over the
    model width, the MLP width, the attention heads' width or the ``n_keys`` keys)."""
    widest = max(config.d_model, config.mlp_width, config.n_heads * config.head_dim, n_keys)
    return config.n_layers * widest


def rounding_bound(reference: torch.Tensor, config: ChainShape, n_keys: int,
                   ulps: float = ULPS) -> float:
    """The largest |difference| from ``reference`` that rounding alone explains, for
    float32 logits of a model of shape ``config`` that attended to at most ``n_keys``
    keys (see the module docstring)."""
    scale = float(reference.detach().abs().max())
    return ulps * FLOAT32_EPS * scale * math.sqrt(summed_terms(config, n_keys))
