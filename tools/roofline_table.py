"""The roofline lesson's tables (docs/lessons/roofline.md), generated from the files
the runs wrote: ``kvlab engine-batch --json`` documents (the engine's own step and the
floor) and ``evaluation.json`` of ``kvlab run`` (served ITL, output tokens/s, and the
step-and-floor rows read from each server's /metrics), before and after issue 41.

    python tools/roofline_table.py --batch-before b0.json --batch-after b1.json \\
        --served-before e0.json --served-after e1.json > docs/lessons/roofline-runs/table-run1.txt

Nothing is measured here: every figure is read from those files. With ``--profiles``
(``kvlab engine-profile`` documents, as LABEL=PATH) it prints the step against the floor
phase by phase instead, with ``--kernels`` (``tools/linear_kernels.py`` documents) the
bf16 products kernel by kernel, with ``--ab`` (``tools/engine_ab.py`` documents) their
steps in run order; with ``--served`` (one ``evaluation.json``) every mode of that run in
run order, and ``--ratio A/B`` the output tokens/s of mode A over mode B at each N:

    python tools/roofline_table.py --profiles main=p0.json branch=p1.json --kernels k.json
    python tools/roofline_table.py --served e.json --ratio kvlab-bfloat16/vllm
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any


def _load(path: Path | None) -> dict[str, Any]:
    return json.loads(path.read_text()) if path else {}


def _step(batches: list[dict[str, Any]], dtype: str, n: int) -> tuple[float, float] | None:
    """(step ms, floor ms) of ``dtype`` at batch ``n``: the mean over the engine-batch
    documents given (runs of the same code, e.g. the two halves of an ABBA order)."""
    found = [(row["step_ms"], row["bytes_per_step"] / batch["copy_gb_per_s"] / 1e6)
             for batch in batches for row in batch.get("rows", [])
             if row["dtype"] == dtype and row["batch"] == n]
    if not found:
        return None
    return (sum(f[0] for f in found) / len(found), sum(f[1] for f in found) / len(found))


def _served(evaluation: dict[str, Any], mode: str, n: int) -> tuple[float, float] | None:
    """(mean effective ITL ms, output tokens/s) of ``mode`` at c=n."""
    for s in evaluation.get("summaries", []):
        if s["mode"] == mode and s["load"] == f"c={n}":
            return s["itl_effective_ms"]["mean"], s["system_tokens_per_s"]
    return None


def _f(value: float | None, fmt: str = ".1f") -> str:
    return "—" if value is None else format(value, fmt)


def _pair(before: float | None, after: float | None, fmt: str = ".1f") -> str:
    return f"{_f(before, fmt)} → {_f(after, fmt)}"


def table(args: argparse.Namespace) -> str:
    b0 = [_load(p) for p in args.batch_before or []]
    b1 = [_load(p) for p in args.batch_after or []]
    e0, e1 = _load(args.served_before), _load(args.served_after)
    out = []
    for dtype in ("bfloat16", "int8"):
        mode = f"kvlab-{dtype}"
        out += [f"**{dtype}** (ms; before → after issue 41; vLLM serves bf16 in both):", "",
                "| N | floor | engine step | × floor | kvlab served ITL | vLLM served ITL | "
                "kvlab tok/s | vLLM tok/s | kvlab / vLLM |",
                "|---|---|---|---|---|---|---|---|---|"]
        for n in args.n:
            s0, s1 = _step(b0, dtype, n), _step(b1, dtype, n)
            floor = s1[1] if s1 else (s0[1] if s0 else None)
            k0, k1 = _served(e0, mode, n), _served(e1, mode, n)
            v = _served(e1, "vllm", n)
            ratio = k1[1] / v[1] if k1 and v else None
            out.append(
                f"| {n} | {_f(floor)} | {_pair(s0 and s0[0], s1 and s1[0])} | "
                f"{_pair(s0 and s0[0] / s0[1], s1 and s1[0] / s1[1], '.2f')} | "
                f"{_pair(k0 and k0[0], k1 and k1[0])} | {_f(v and v[0])} | "
                f"{_pair(k0 and k0[1], k1 and k1[1])} | {_f(v and v[1])} | "
                f"{_f(ratio, '.2f')}× |")
        itl = {m: [_served(e1, m, n) for n in (min(args.n), max(args.n))]
               for m in (mode, "vllm")}
        growth = {m: (x[1][0] / x[0][0] if x[0] and x[1] else None) for m, x in itl.items()}
        out += ["", f"ITL at N = {max(args.n)} over N = {min(args.n)} (after): kvlab "
                f"{_f(growth[mode], '.2f')}, vLLM {_f(growth['vllm'], '.2f')}.", ""]
    rows = [p for p in e1.get("step_floor", []) if p["load"] in {f"c={n}" for n in args.n}]
    if rows:
        out += ["Each server's own view, read from its /metrics during the run after "
                "(ms; served/step: the client's ITL over the server's mean step; "
                "kvlab's step includes sampling and streaming):", "",
                "| mode | point | served ITL | server step | rows/step | floor | served/step | "
                "step/floor | vLLM's own ITL |", "|---|---|---|---|---|---|---|---|---|"]
        for p in rows:
            out.append(f"| {p['mode']} | {p['load']} | {_f(p['served_itl_ms'])} | "
                       f"{_f(p['step_ms'])} | {_f(p['rows_per_step'])} | "
                       f"{_f(p['floor_ms'])} | {_f(p['served_over_step'], '.2f')} | "
                       f"{_f(p['step_over_floor'], '.2f')} | {_f(p['server_itl_ms'])} |")
        out.append("")
    return "\n".join(out)


def served_modes(evaluation: dict[str, Any], ns: list[int], ratios: list[str]) -> str:
    """Each mode of one run, in run order: output tokens/s (mean effective ITL, ms) at
    each N, the ITL's growth from the smallest N to the largest; then each ratio A/B."""
    modes = list(dict.fromkeys(s["mode"] for s in evaluation.get("summaries", [])))
    out = ["| mode | " + " | ".join(f"N = {n}" for n in ns)
           + f" | ITL N{max(ns)} / N{min(ns)} |", "|---" * (len(ns) + 2) + "|"]
    for mode in modes:
        cells = [_served(evaluation, mode, n) for n in ns]
        low, high = _served(evaluation, mode, min(ns)), _served(evaluation, mode, max(ns))
        growth = high[0] / low[0] if low and high else None
        out.append(f"| {mode} | " + " | ".join(
            f"{c[1]:.1f} ({c[0]:.1f})" if c else "—" for c in cells)
            + f" | {_f(growth, '.2f')} |")
    out.append("")
    for ratio in ratios:
        a, _, b = ratio.partition("/")
        values = []
        for n in ns:
            x, y = _served(evaluation, a, n), _served(evaluation, b, n)
            values.append(_f(x[1] / y[1] if x and y else None, ".2f"))
        out.append(f"- {a} over {b}, output tok/s at N = {', '.join(map(str, ns))}: "
                   + " / ".join(values))
    steps = [p for p in evaluation.get("step_floor", []) if p["step_ms"]
             and p["load"] in {f"c={n}" for n in ns}]
    if steps:
        out += ["", "| mode | point | served ITL | server's mean step | head | floor at load "
                "| served / step | step / floor |", "|---|---|---|---|---|---|---|---|"]
        out += [f"| {p['mode']} | {p['load']} | {p['served_itl_ms']:.1f} | "
                f"{p['step_ms']:.1f} | {_f(p['phases_ms'].get('head'))} | "
                f"{_f(p['floor_ms'])} | {_f(p['served_over_step'], '.2f')} | "
                f"{_f(p['step_over_floor'], '.2f')} |" for p in steps]
    return "\n".join(out) + "\n"


def profiles(labelled: list[str]) -> str:
    """The step against the floor, per engine-profile document, format and batch size."""
    out = ["| run | format | batch | floor | step | × floor | × paired floor | "
           "layers + gather | head | rest | copy GB/s | load |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for item in labelled:
        label, _, path = item.partition("=")
        doc = _load(Path(path))
        load = doc["load_average"].split(",")[0]
        for fmt in doc["formats"]:
            for step in fmt["steps"]:
                phases = step["phases_ms"]
                layers = sum(v for k, v in phases.items() if k.startswith("layers")) \
                    + phases.get("gather", 0.0)
                head = phases.get("head", 0.0)
                rest = step["step_ms"] - layers - head
                out.append(
                    f"| {label} | {fmt['dtype']} | {step['batch']} | {fmt['floor_ms']:.1f} | "
                    f"{step['step_ms']:.1f} | {step['step_ms'] / fmt['floor_ms']:.2f} | "
                    f"{_f(step.get('paired_floor_ratio'), '.2f')} | "
                    f"{layers:.1f} | {head:.1f} | {rest:.1f} | "
                    f"{doc['copy_gb_per_s']:.1f} | {load} |")
    return "\n".join(out) + "\n"


def kernels(paths: list[Path]) -> str:
    """The bf16 products of one decode step (ms), per kernel and rows, per document."""
    out = ["| kernel | rows | layers' products | head | load | copy GB/s |",
           "|---|---|---|---|---|---|"]
    for path in paths:
        doc = _load(path)
        load = f"{doc['load_before'][0]:.2f} → {doc['load_after'][0]:.2f}"
        copy = f"{doc['copy_bandwidth_before'] / 1e9:.1f}–{doc['copy_bandwidth_after'] / 1e9:.1f}"
        for name, rows in doc["kernels"].items():
            for r in rows:
                out.append(f"| {name} | {r['rows']} | {r['layers_ms']:.1f} | "
                           f"{r['head_ms']:.1f} | {load} | {copy} |")
    return "\n".join(out) + "\n"


def ab_runs(labelled: list[str]) -> str:
    """tools/engine_ab.py documents in run order: step, layers + gather and head (ms,
    medians) per variant and batch size."""
    out = ["| run | variant | batch | step | layers + gather | head | load |",
           "|---|---|---|---|---|---|---|"]
    for item in labelled:
        label, _, path = item.partition("=")
        doc = _load(Path(path))
        load = f"{doc['load_before'][0]:.2f} → {doc['load_after'][0]:.2f}"
        for variant, rows in doc["variants"].items():
            for r in rows:
                phases = r["phases_ms"]
                layers = sum(v for k, v in phases.items() if k.startswith("layers")) \
                    + phases.get("gather", 0.0)
                out.append(f"| {label} | {variant} | {r['batch']} | {r['step_ms']:.1f} | "
                           f"{layers:.1f} | {phases.get('head', 0.0):.1f} | {load} |")
    return "\n".join(out) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profiles", nargs="+", metavar="LABEL=PATH",
                        help="engine-profile documents: print the step against the floor")
    parser.add_argument("--ab", nargs="+", metavar="LABEL=PATH",
                        help="tools/engine_ab.py documents, in run order")
    parser.add_argument("--kernels", type=Path, nargs="+",
                        help="tools/linear_kernels.py documents: print the products")
    for name in ("batch-before", "batch-after"):
        parser.add_argument(f"--{name}", type=Path, nargs="+",
                            help="engine-batch --json documents (several: their mean)")
    for name in ("served-before", "served-after"):
        parser.add_argument(f"--{name}", type=Path)
    parser.add_argument("--served", type=Path,
                        help="one evaluation.json: every mode in run order")
    parser.add_argument("--ratio", nargs="+", default=[], metavar="A/B",
                        help="with --served: mode A's output tokens/s over mode B's")
    parser.add_argument("--n", type=int, nargs="+", default=[1, 8, 16])
    args = parser.parse_args()
    if args.served:
        print(served_modes(_load(args.served), args.n, args.ratio), end="")
        return
    if args.profiles or args.kernels or args.ab:
        for part in (args.profiles and profiles(args.profiles),
                     args.kernels and kernels(args.kernels), args.ab and ab_runs(args.ab)):
            if part:
                print(part, end="")
        return
    print(table(args))


if __name__ == "__main__":
    main()
