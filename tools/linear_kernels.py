"""The bf16 matrix products of a Gemma 3 270M decode step, kernel against kernel.

Issue 41, item 2: is torch's bf16 product path the gap between the step and its floor?
For each kernel that this CPU and torch offer (decided here at run time, as the engine
would), every product of one decode step is run in model order, at M = 1, 8 and 16
rows: 18 layers x (q|k|v 1536x640, o 640x1024, gate|up 4096x640, down 640x2048), then
the tied head 262,144 x 640. Random weights of the real shapes (the time does not depend
on the values); 72 + 1 distinct matrices, 537 MB, so no product finds its weights in
cache from the previous call of the same kernel. The kernels run in turn within each
repeat (interleaved), one thread. Kernels:

- ``packed``: oneDNN's bf16 product on weights reordered once for it
  (``mkldnn._linear_pointwise``, what ``to_format("bfloat16")`` serves), packed for
  M = 1 (``_reorder_linear_weight(w, 1)``);
- ``packed16``: the same, the weights reordered for M = 16;
- ``linear``: ``F.linear`` on plain bf16 tensors (torch's own dispatch);
- ``mv``: ``torch.mv`` on plain bf16 (M = 1 only: torch's bf16 gemv).

Writes one JSON document: per kernel and M, the median ms of the layers' products and
of the head, the bytes read, the copy bandwidth before and after, the load and the CPU
flags. A benchmark, never a test:

    flock /tmp/kvlab-measure.lock python tools/linear_kernels.py --out kernels.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn.functional as F

from kvlab.engine.weights import copy_bandwidth

LAYER_SHAPES = [(1536, 640), (640, 1024), (4096, 640), (640, 2048)]  # (out, in)
N_LAYERS = 18
HEAD = (262_144, 640)

Product = Callable[[torch.Tensor], torch.Tensor]


def _flags() -> list[str]:
    text = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    wanted = {"avx2", "avx512f", "avx512_bf16", "avx512_vnni", "amx_tile"}
    return sorted(wanted & set(text.split()))


def _kernels(w: torch.Tensor) -> dict[str, Callable[[torch.Tensor], torch.Tensor]]:
    """Each kernel this CPU and torch offer, bound to the weight ``w`` (out, in) bf16."""
    out: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
        "linear": lambda x: F.linear(x, w),
        "mv": lambda x: torch.mv(w, x[0])[None] if x.shape[0] == 1 else F.linear(x, w),
    }
    if torch.ops.mkldnn._is_mkldnn_bf16_supported():
        for name, hint in (("packed", 1), ("packed16", 16)):
            out[name] = _packed(torch.ops.mkldnn._reorder_linear_weight(w, hint))
    return out


def _packed(p: torch.Tensor) -> Callable[[torch.Tensor], torch.Tensor]:
    return lambda x: torch.ops.mkldnn._linear_pointwise(x, p, None, "none", [], "")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", default="1,8,16")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    torch.set_num_threads(1)
    gen = torch.Generator().manual_seed(0)
    shapes = LAYER_SHAPES * N_LAYERS + [HEAD]
    products = [_kernels((torch.randn(s, generator=gen) * 0.02).to(torch.bfloat16))
                for s in shapes]
    names = list(products[0])
    rows = [int(r) for r in args.rows.split(",")]
    xs = {(m, n): torch.randn(m, n, generator=gen).to(torch.bfloat16)
          for m in rows for _, n in shapes}
    load_before, bw_before = os.getloadavg(), copy_bandwidth()
    times: dict[tuple[str, int], list[tuple[float, float]]] = {
        (k, m): [] for k in names for m in rows}
    with torch.inference_mode():
        for rep in range(args.repeats + 1):  # the first round warms up, not kept
            for m in rows:
                for k in names:
                    t0 = time.perf_counter()
                    for kernels, (_, n) in zip(products[:-1], shapes[:-1], strict=True):
                        kernels[k](xs[m, n])
                    t1 = time.perf_counter()
                    products[-1][k](xs[m, HEAD[1]])
                    t2 = time.perf_counter()
                    if rep:
                        times[k, m].append((t1 - t0, t2 - t1))
    layer_bytes = 2 * N_LAYERS * sum(o * i for o, i in LAYER_SHAPES)
    head_bytes = 2 * HEAD[0] * HEAD[1]
    result = {"torch": torch.__version__, "cpu_flags": _flags(), "threads": 1,
              "repeats": args.repeats, "load_before": load_before,
              "load_after": os.getloadavg(), "copy_bandwidth_before": bw_before,
              "copy_bandwidth_after": copy_bandwidth(), "layer_bytes": layer_bytes,
              "head_bytes": head_bytes, "kernels": {}}
    for k in names:
        result["kernels"][k] = [
            {"rows": m,
             "layers_ms": 1e3 * statistics.median(t[0] for t in times[k, m]),
             "head_ms": 1e3 * statistics.median(t[1] for t in times[k, m])}
            for m in rows]
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    for k, per in result["kernels"].items():
        print(f"{k:9s}", "  ".join(f"M={r['rows']}: layers {r['layers_ms']:.1f} "
                                   f"head {r['head_ms']:.1f} ms" for r in per))
    print("copy GB/s", round(bw_before / 1e9, 2), "->",
          round(result["copy_bandwidth_after"] / 1e9, 2), "load", load_before, "->",
          result["load_after"], "flags", result["cpu_flags"])


if __name__ == "__main__":
    main()
