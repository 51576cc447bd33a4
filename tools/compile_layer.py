"""torch.compile (inductor, CPU, freezing) on one Gemma 3 270M layer's work without
attention, against the same work eager on oneDNN-packed weights (issue 41, item 2's
Python overhead). Prints the compile time and the time per call of each, twice in turn,
500 calls, one thread. Random weights of the real shapes; one layer's 11 MB, so this
times the calls, not the memory. A benchmark, never a test:

    flock /tmp/kvlab-measure.lock python tools/compile_layer.py
"""

from __future__ import annotations

import copy
import os
import time

import torch
import torch._inductor.config as inductor_config
import torch.nn.functional as F
from torch import nn

from kvlab.engine.gemma import rms_norm, rope_tables, rotate
from kvlab.engine.weights import to_format

C, HD, FFN = 640, 256, 2048
BF16 = torch.bfloat16


class LayerWork(nn.Module):
    """Pre-norm, q|k|v, QK-norm and RoPE; o, post-norm, the GeGLU MLP and its norms."""

    def __init__(self, gen: torch.Generator) -> None:
        super().__init__()
        self.qkv = nn.Linear(C, 1536, bias=False, dtype=BF16)
        self.o = nn.Linear(1024, C, bias=False, dtype=BF16)
        self.gate_up = nn.Linear(C, 2 * FFN, bias=False, dtype=BF16)
        self.down = nn.Linear(FFN, C, bias=False, dtype=BF16)
        self.scale: torch.Tensor
        self.qk_scale: torch.Tensor
        self.register_buffer("scale", 1 + 0.1 * torch.randn(C, generator=gen))
        self.register_buffer("qk_scale", 1 + 0.1 * torch.randn(5, HD, generator=gen))

    def forward(self, x: torch.Tensor, y: torch.Tensor, cos: torch.Tensor,
                sin: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        B, T, _ = x.shape
        heads = self.qkv(rms_norm(x, self.scale, 1e-6)).view(B, T, 6, HD)
        qk = rotate(rms_norm(heads[:, :, :5], self.qk_scale, 1e-6), cos, sin)
        x = x + rms_norm(self.o(y), self.scale, 1e-6)
        gate, up = self.gate_up(rms_norm(x, self.scale, 1e-6)).chunk(2, dim=-1)
        hidden = F.gelu(gate, approximate="tanh") * up
        return qk, x + rms_norm(self.down(hidden), self.scale, 1e-6)


def main() -> None:
    torch.set_num_threads(1)
    inductor_config.freezing = True  # weights as constants, packed for oneDNN by inductor
    gen = torch.Generator().manual_seed(0)
    model = LayerWork(gen).eval().requires_grad_(False)
    cos, sin = rope_tables(torch.arange(1) + 60, HD, 1e4, BF16)
    x = torch.randn(1, 1, C, generator=gen).to(BF16)
    y = torch.randn(1, 1, 1024, generator=gen).to(BF16)
    with torch.inference_mode():
        start = time.perf_counter()
        compiled = torch.compile(model, dynamic=True)
        compiled(x, y, cos, sin)
        print("compile s", time.perf_counter() - start)
        packed = to_format(copy.deepcopy(model), "bfloat16")
        for name, f in (("compiled", compiled), ("eager-packed", packed)) * 2:
            for _ in range(50):
                f(x, y, cos, sin)
            start = time.perf_counter()
            for _ in range(500):
                f(x, y, cos, sin)
            print(name, f"{(time.perf_counter() - start) / 500 * 1e6:.1f} us/call")
    print("load", os.getloadavg())


if __name__ == "__main__":
    main()
