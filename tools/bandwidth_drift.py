"""Does a process's decode step move with time, or with the process? (issue 41)

The bf16 step at one row fell in two groups across separate processes (1.25-1.38x the
floor, or 1.61-1.66x). This asks whether the group belongs to a process (where its
weights landed in memory) or to the moment (what else on the host reads memory): in ONE
process, for --seconds, it times all bf16 products of a Gemma 3 270M decode step at one
row (72 layer matrices + the tied head, 537 MB, random weights of the real shapes,
packed for oneDNN as ``to_format("bfloat16")`` serves them; median of --repeats), then
measures the copy bandwidth (``kvlab.engine.weights.copy_bandwidth``), again and again.
Each pair gives the products' time and the floor of the same seconds (bytes / that
bandwidth). Writes one JSON document with every pair, the load and the CPU flags. A
benchmark, never a test:

    flock /tmp/kvlab-measure.lock python tools/bandwidth_drift.py --out drift.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path

import torch

from kvlab.engine.weights import copy_bandwidth

SHAPES = [(1536, 640), (640, 1024), (4096, 640), (640, 2048)] * 18 + [(262_144, 640)]


def _flags() -> list[str]:
    text = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    return sorted({"avx2", "avx512f", "avx512_bf16", "avx512_vnni", "amx_tile"}
                  & set(text.split()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    torch.set_num_threads(1)
    gen = torch.Generator().manual_seed(0)
    weights = [torch.ops.mkldnn._reorder_linear_weight(
        (torch.randn(s, generator=gen) * 0.02).to(torch.bfloat16), 1) for s in SHAPES]
    nbytes = 2 * sum(o * i for o, i in SHAPES)
    xs = {n: torch.randn(1, n, generator=gen).to(torch.bfloat16) for _, n in SHAPES}
    load_before = os.getloadavg()
    pairs: list[dict[str, float]] = []
    start = time.perf_counter()
    with torch.inference_mode():
        while time.perf_counter() - start < args.seconds:
            times = []
            for _ in range(args.repeats):
                t0 = time.perf_counter()
                for w, (_, n) in zip(weights, SHAPES, strict=True):
                    torch.ops.mkldnn._linear_pointwise(xs[n], w, None, "none", [], "")
                times.append(time.perf_counter() - t0)
            bandwidth = copy_bandwidth()
            products = statistics.median(times)
            pairs.append({"at_s": round(time.perf_counter() - start, 2),
                          "products_ms": 1e3 * products, "copy_gb_per_s": bandwidth / 1e9,
                          "over_floor": products / (nbytes / bandwidth)})
    ms = [p["products_ms"] for p in pairs]
    ratios = [p["over_floor"] for p in pairs]
    flags, load_after = _flags(), os.getloadavg()
    result: dict[str, object] = {"torch": torch.__version__, "cpu_flags": flags, "threads": 1,
              "pid": os.getpid(), "bytes": nbytes, "load_before": load_before,
              "load_after": load_after, "pairs": pairs,
              "products_ms": {"min": min(ms), "median": statistics.median(ms), "max": max(ms)},
              "over_floor": {"min": min(ratios), "median": statistics.median(ratios),
                             "max": max(ratios)}}
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"{len(pairs)} pairs in {args.seconds:.0f} s, one process: products "
          f"{min(ms):.1f}-{max(ms):.1f} ms (median {statistics.median(ms):.1f}); over the "
          f"floor of the same seconds {min(ratios):.2f}-{max(ratios):.2f} (median "
          f"{statistics.median(ratios):.2f}); load {load_before[0]:.2f} -> "
          f"{load_after[0]:.2f}; flags {' '.join(flags)}")


if __name__ == "__main__":
    main()
