"""``engine-profile``: where a decode step of the serving scheduler spends its time,
phase by phase, beside the memory floor, checked against a torch.profiler trace of one
step. A benchmark, never a test: it prints and writes what it measured."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import typer
from rich.table import Table

from kvlab.cli._app import STUDIES, app, console, print_json
from kvlab.cli.extras import require_engine
from kvlab.cli.lists import LIST_METAVAR, int_list, list_help


def _load_average() -> str:
    try:
        return ", ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "unknown"


@app.command("engine-profile", rich_help_panel=STUDIES)
def engine_profile(
    model: str = typer.Option("gemma-3-270m", "--model",
                              help="gemma-3-270m (the bundled GGUF) or a Gemma 3 GGUF path."),
    dtypes: list[str] = typer.Option(
        ["bfloat16,int8"], "--dtypes", metavar="NAME[,NAME...]",
        help="Weight formats profiled. " + list_help("--dtypes", "bfloat16", "int8")),
    batch_sizes: list[str] = typer.Option(
        ["1,8,16"], "--batch-sizes", metavar=LIST_METAVAR,
        help="Decode rows per step. " + list_help("--batch-sizes", "1", "16")),
    context: int = typer.Option(64, "--context", help="Tokens each row already holds."),
    steps: int = typer.Option(7, "--steps", help="Decode steps timed per batch size; medians."),
    trace_batch: int = typer.Option(1, "--trace-batch",
                                    help="Batch size of the step traced by torch.profiler "
                                         "(0: no trace)."),
    threads: int = typer.Option(1, "--threads", help="torch threads."),
    out: Path = typer.Option(Path("results/engine-profile"), "--out",
                             help="Output directory (engine-profile.json)."),
    json_out: bool = typer.Option(False, "--json", help="Print one JSON document."),
) -> None:
    """Each phase of the serving scheduler's decode step (schedule, batch, embed, the
    layers in three groups, gather, head, sample, finish) in ms per step, median over
    --steps, at each batch size and weight format, beside the memory floor (weight
    bytes / copy bandwidth): once measured before the steps, and again after each timed
    step ("x floor, paired": the median of each step over the floor of its own seconds,
    since a shared host's bandwidth moves within a minute); then one step traced by
    torch.profiler, each phase's clock time against the profiler's (within 5 % or 0.25
    ms, + 0.02 ms per range) and the share of it spent inside torch operators."""
    require_engine("kvlab engine-profile")
    import copy

    import torch

    from kvlab.engine.gguf_weights import load_gemma
    from kvlab.engine.weights import copy_bandwidth, to_format, weight_format, weight_nbytes
    from kvlab.errors import ConfigError
    from kvlab.servers.fetch import model_file
    from kvlab.studies.step_profile import profile_steps, trace_step

    formats = [weight_format(d.strip()) for value in dtypes for d in value.split(",")
               if d.strip()]
    sizes = sorted(set(int_list(batch_sizes, "--batch-sizes")))
    if threads <= 0 or steps <= 0 or context <= 0 or min(sizes) <= 0 or trace_batch < 0:
        raise ConfigError("--threads, --steps, --context and --batch-sizes must be "
                          "positive, --trace-batch at least 0")
    torch.set_num_threads(threads)
    base = load_gemma(model_file(model).path, torch.float32)
    bandwidth = copy_bandwidth()
    results: list[dict[str, Any]] = []
    for fmt in formats:
        served = to_format(copy.deepcopy(base), fmt.name)
        weights = weight_nbytes(served)
        found = profile_steps(served, sizes, context, steps, copy_bandwidth, weights)
        trace = trace_step(served, trace_batch, context) if trace_batch else None
        results.append({"dtype": fmt.name, "weight_bytes": weights,
                        "floor_ms": 1e3 * weights / bandwidth,
                        "steps": [s.to_dict() for s in found],
                        "trace": trace.to_dict() if trace else None})
        del served
    document = {"model": model, "threads": threads, "context": context, "steps": steps,
                "copy_gb_per_s": bandwidth / 1e9, "load_average": _load_average(),
                "torch": torch.__version__, "formats": results}
    out.mkdir(parents=True, exist_ok=True)
    (out / "engine-profile.json").write_text(json.dumps(document, indent=2) + "\n")
    if json_out:
        print_json(document)
        return
    _print(document)


def _ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _print(document: dict[str, Any]) -> None:
    for result in document["formats"]:
        steps = result["steps"]
        names = list(dict.fromkeys(n for s in steps for n in s["phases_ms"]))
        table = Table(title=f"{result['dtype']}: ms per decode step by phase, context "
                            f"{document['context']}, median of {document['steps']}; floor "
                            f"{result['floor_ms']:.1f} ms ({result['weight_bytes'] / 1e6:,.0f}"
                            f" MB / {document['copy_gb_per_s']:.1f} GB/s)",
                      title_justify="left")
        for column in ("batch", "step", "x floor", "x floor, paired", *names):
            table.add_column(column, justify="right")
        for s in steps:
            table.add_row(str(s["batch"]), f"{s['step_ms']:.1f}",
                          f"{s['step_ms'] / result['floor_ms']:.2f}",
                          _ratio(s.get("paired_floor_ratio")),
                          *(f"{s['phases_ms'].get(n, 0.0):.2f}" for n in names))
        console.print(table)
        trace = result["trace"]
        if trace:
            verdict = "agrees" if trace["agrees"] else "DISAGREES"
            console.print(f"torch.profiler, steps of batch {trace['batch']}, medians of 3 "
                          f"({verdict} within 5 % or 0.25 ms, + 0.02 ms per range): "
                          "phase clock / profiler / in operators, ms", highlight=False)
            console.print("  " + "; ".join(
                f"{p['phase']} {p['clock_ms']:.2f} / {p['profiler_ms']:.2f} / "
                f"{p['ops_ms']:.2f}" for p in trace["phases"]), highlight=False)
    console.print(f"load average: {document['load_average']}", highlight=False)
