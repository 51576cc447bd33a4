"""A/B of the engine's step changes for issue 41, interleaved in one process.

Each variant is the serving scheduler's decode step on the real Gemma 3 270M at batch
sizes 1, 8 and 16 (context 64), timed by the scheduler's own step clock
(kvlab.engine.phases): ``base`` has the projections apart and samples with
torch.argmax per row (main before issue 41), ``fused`` stacks q, k, v and gate, up,
``greedy`` samples every row in one two-level argmax, ``both`` has both. The variants
run in turn within each repeat, so a change in the machine's load hits them alike.
Writes one JSON document (medians per variant and batch size, phases included) with the
load average and CPU flags. A benchmark, never a test:

    flock /tmp/kvlab-measure.lock python tools/engine_ab.py --dtype bfloat16 --out ab.json
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import re
import statistics
from pathlib import Path

import torch

from kvlab.engine.gemma import Gemma3
from kvlab.engine.gguf_weights import load_gemma
from kvlab.engine.weights import to_format
from kvlab.servers.fetch import model_file
from kvlab.studies.step_profile import decoding


def _argmax(logits: torch.Tensor) -> int:
    return int(torch.argmax(logits))


def _unfused(model: Gemma3) -> Gemma3:
    for module in model.modules():
        if hasattr(module, "fuse"):
            setattr(module, "fuse", lambda: None)  # noqa: B010  (the separate products)
    return model


def _flags() -> list[str]:
    text = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    wanted = ("avx2", "avx512f", "avx512_bf16", "avx512_vnni", "amx_tile")
    return sorted({f for f in re.findall(r"\w+", text) if f in wanted})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dtype", default="bfloat16")
    parser.add_argument("--batch-sizes", default="1,8,16")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--variants", default="base,fused,greedy,both",
                        help="Which variants, comma-separated.")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    torch.set_num_threads(1)
    sizes = [int(b) for b in args.batch_sizes.split(",")]
    base = load_gemma(model_file("gemma-3-270m").path, torch.float32)
    models = {"separate": to_format(_unfused(copy.deepcopy(base)), args.dtype),
              "fused": to_format(copy.deepcopy(base), args.dtype)}
    del base
    known = {"base": ("separate", _argmax), "fused": ("fused", _argmax),
             "greedy": ("separate", None), "both": ("fused", None)}
    variants = {v: known[v] for v in args.variants.split(",")}
    load_before = os.getloadavg()
    samples: dict[str, dict[int, list[dict[str, int]]]] = {v: {b: [] for b in sizes}
                                                          for v in variants}
    with torch.inference_mode():
        schedulers = {(v, b): decoding(models[m], b, 64, sampler=s)
                      for v, (m, s) in variants.items() for b in sizes}
        for sched in schedulers.values():
            sched.step()  # warm-up
        for _ in range(args.repeats):
            for b in sizes:
                for v in variants:
                    for _ in range(args.steps):
                        schedulers[v, b].step()
                        samples[v][b].append(dict(schedulers[v, b].clock.last))
    out = {"dtype": args.dtype, "repeats": args.repeats, "steps": args.steps,
           "load_before": load_before, "load_after": os.getloadavg(), "cpu_flags": _flags(),
           "torch": torch.__version__, "variants": {}}
    for v in variants:
        rows = []
        for b in sizes:
            runs = samples[v][b]
            names = list(dict.fromkeys(n for r in runs for n in r if n != "between"))
            rows.append({"batch": b, "step_ms": statistics.median(
                sum(x for k, x in r.items() if k != "between") for r in runs) / 1e6,
                "phases_ms": {n: statistics.median(r.get(n, 0) for r in runs) / 1e6
                              for n in names}})
        out["variants"][v] = rows
    args.out.write_text(json.dumps(out, indent=2) + "\n")
    for v, rows in out["variants"].items():
        print(v, "  ".join(f"B={r['batch']}: {r['step_ms']:.1f} ms (sample "
                           f"{r['phases_ms'].get('sample', 0):.2f})" for r in rows))
    print("load", out["load_before"], "->", out["load_after"], "flags", out["cpu_flags"])


if __name__ == "__main__":
    main()
