"""Speed of the reference engine: ``engine-speed`` (beside Transformers and
llama-server) and ``engine-batch`` (a decode step's roofline by batch size and weight
format). Benchmarks, never tests: they print what they measured, with the machine's
load average beside it."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import typer
from rich.table import Table

from kvlab.cli._app import STUDIES, app, console, print_json
from kvlab.cli.extras import require_engine
from kvlab.cli.lists import LIST_METAVAR, int_list, list_help


def _load_average() -> str:
    """The 1-, 5- and 15-minute load averages, as ``uptime`` prints them."""
    try:
        return ", ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "unknown"


@app.command("engine-speed", rich_help_panel=STUDIES)
def engine_speed(
    model: str = typer.Option("gemma-3-270m", "--model",
                              help="gemma-3-270m (the bundled GGUF) or a Gemma 3 GGUF path."),
    contexts: list[str] = typer.Option(
        ["512,2048"], "--contexts", metavar=LIST_METAVAR,
        help="Prompt lengths in tokens. " + list_help("--contexts", "512", "2048")),
    new_tokens: int = typer.Option(32, "--new-tokens", help="Tokens generated per run."),
    repeats: int = typer.Option(2, "--repeats", help="Timed runs per runner; medians."),
    threads: int = typer.Option(2, "--threads", help="torch and llama-server threads."),
    dtype: str = typer.Option("float32", "--dtype",
                              help="The engine's weights: float32, bfloat16, int8 or w8a8."),
    against: list[str] = typer.Option(["transformers", "llama-server"], "--against",
                                      help="Other runners beside the engine (none: only "
                                           "the engine)."),
    out: Path = typer.Option(Path("results/engine-speed"), "--out", help="Output directory."),
    json_out: bool = typer.Option(False, "--json", help="Print one JSON document."),
) -> None:
    """Prefill and decode tokens/s of the engine beside Transformers and llama-server,
    one run, same threads, same prompts; and the engine's roofline: bytes a decode step
    reads and the GB/s it achieved, against this machine's copy bandwidth measured
    here (a benchmark, never a test)."""
    require_engine("kvlab engine-speed")
    import json
    import tempfile

    import torch

    from kvlab.engine.models import load_model
    from kvlab.engine.weights import weight_format, weight_nbytes
    from kvlab.errors import ConfigError
    from kvlab.servers.fetch import model_file
    from kvlab.studies import roofline, speed
    from kvlab.studies.prove import gemma_prompt

    against = [a for a in against if a != "none"]
    unknown = sorted(set(against) - {"transformers", "llama-server"})
    if unknown or threads <= 0 or new_tokens < 2 or repeats <= 0:
        raise ConfigError(f"--against takes transformers, llama-server or none (got "
                          f"{unknown}); --threads and --repeats must be positive, "
                          "--new-tokens >= 2")
    weight_format(dtype)
    sizes = sorted(set(int_list(contexts, "--contexts")))
    torch.set_num_threads(threads)
    loaded = load_model(model_file(model), dtype, model)
    prompts = {c: gemma_prompt(loaded.tokenizer, c) for c in sizes}
    runners: dict[str, Any] = {
        "engine": lambda ids, n: speed.time_engine(loaded.model, ids, n)}
    server = None
    if "transformers" in against:
        from kvlab.studies.reference import load_transformers_gemma

        hf = load_transformers_gemma(loaded.path)
        runners["transformers"] = lambda ids, n: speed.time_transformers(hf, ids, n)
    try:
        if "llama-server" in against:
            from kvlab.servers.llamacpp import LlamaCppSettings, LlamaServer

            server = LlamaServer(LlamaCppSettings(model=loaded.path, threads=threads),
                                 max(sizes) + new_tokens)
            server.start(Path(tempfile.mkdtemp(prefix="kvlab-speed-")) / "llama-server.log")
            url = server.base_url
            runners["llama-server"] = lambda ids, n: speed.time_llama_server(url, ids, n)
        results = speed.measure(runners, prompts, new_tokens, repeats)
    finally:
        if server is not None:
            server.stop()
    copy = roofline.copy_bandwidth()
    weights = weight_nbytes(loaded.model)
    roof: list[dict[str, Any]] = [
        {"context": s.context, "bytes_per_step": weights + roofline.kv_nbytes_read(
            loaded.model, s.context + new_tokens // 2)}
        for s in results if s.runner == "engine"]
    for row, s in zip(roof, [s for s in results if s.runner == "engine"], strict=True):
        row["gb_per_s"] = row["bytes_per_step"] * s.decode_tokens_per_s / 1e9
    document = speed.to_dict(results, {"model": model, "threads": threads,
                                       "new_tokens": new_tokens, "repeats": repeats,
                                       "dtype": dtype, "torch": torch.__version__,
                                       "load_average": _load_average()})
    document["roofline"] = {"copy_gb_per_s": copy / 1e9, "weight_bytes": weights,
                            "engine": roof}
    out.mkdir(parents=True, exist_ok=True)
    (out / "engine-speed.json").write_text(json.dumps(document, indent=2) + "\n")
    if json_out:
        print_json(document)
        return
    table = Table(title=f"{model}: tokens/s, {threads} thread(s), {new_tokens} new tokens, "
                        f"median of {repeats}, engine in {dtype}", title_justify="left")
    for column in ("context", "runner", "prefill tok/s", "decode tok/s"):
        table.add_column(column, justify="right")
    for s in results:
        table.add_row(str(s.context), s.runner, f"{s.prefill_tokens_per_s:.0f}",
                      f"{s.decode_tokens_per_s:.1f}")
    console.print(table)
    for ratio in document["ratios"]:
        console.print(f"ctx {ratio['context']}: engine / {ratio['versus']}: decode "
                      f"{ratio['decode_ratio']:.2f}x, prefill {ratio['prefill_ratio']:.2f}x",
                      highlight=False)
    for row in roof:
        console.print(f"roofline ctx {row['context']}: a decode step reads "
                      f"{row['bytes_per_step'] / 1e6:,.0f} MB ({weights / 1e6:,.0f} MB of "
                      f"weights) at {row['gb_per_s']:.1f} GB/s; this machine copies at "
                      f"{copy / 1e9:.1f} GB/s ({row['gb_per_s'] / (copy / 1e9):.0%})",
                      highlight=False)
    console.print(f"load average: {document['settings']['load_average']}", highlight=False)


@app.command("engine-batch", rich_help_panel=STUDIES)
def engine_batch(
    model: str = typer.Option("gemma-3-270m", "--model",
                              help="gemma-3-270m (the bundled GGUF) or a Gemma 3 GGUF path."),
    dtypes: list[str] = typer.Option(
        ["float32,bfloat16,int8,w8a8"], "--dtypes", metavar="NAME[,NAME...]",
        help="Weight formats compared. " + list_help("--dtypes", "float32", "int8")),
    batch_sizes: list[str] = typer.Option(
        ["1,2,4,8,16"], "--batch-sizes", metavar=LIST_METAVAR,
        help="Decode rows per step. " + list_help("--batch-sizes", "1", "8")),
    context: int = typer.Option(64, "--context", help="Tokens each row already holds."),
    fidelity_tokens: int = typer.Option(
        400, "--fidelity-tokens",
        help="Tokens of real text each format is compared with float32 on (0: skip)."),
    repeats: int = typer.Option(5, "--repeats", help="Rounds over the batch sizes; medians."),
    threads: int = typer.Option(1, "--threads", help="torch threads."),
    json_out: bool = typer.Option(False, "--json", help="Print one JSON document."),
) -> None:
    """Decode step time by batch size for each weight format, with the bytes it reads
    and the GB/s achieved against this machine's copy bandwidth: why batching is
    nearly free while a step is memory-bound (a benchmark, never a test). Each format's
    fidelity: how often its greedy token is float32's on real text, and the mean KL."""
    require_engine("kvlab engine-batch")
    import copy

    import torch

    from kvlab.engine.gguf_tokenizer import load_gguf_tokenizer
    from kvlab.engine.gguf_weights import load_gemma
    from kvlab.engine.weights import fidelity, to_format, weight_format
    from kvlab.errors import ConfigError
    from kvlab.servers.fetch import model_file
    from kvlab.studies import roofline
    from kvlab.studies.prove import gemma_prompt

    formats = [weight_format(d.strip()) for value in dtypes for d in value.split(",")
               if d.strip()]
    sizes = sorted(set(int_list(batch_sizes, "--batch-sizes")))
    if threads <= 0 or repeats <= 0 or context <= 0 or min(sizes) <= 0:
        raise ConfigError("--threads, --repeats, --context and --batch-sizes must be "
                          "positive")
    torch.set_num_threads(threads)
    checked = model_file(model)
    base = load_gemma(checked.path, torch.float32)
    tokenizer = load_gguf_tokenizer(checked.path, checked.tokenizer_json)
    text = torch.tensor([gemma_prompt(tokenizer, fidelity_tokens)]) if fidelity_tokens \
        else None
    with torch.inference_mode():
        reference = base(text)[0] if text is not None else None  # (T, V)
    bandwidth = roofline.copy_bandwidth()
    rows: list[dict[str, Any]] = []
    fidelities: dict[str, dict[str, float]] = {}
    for fmt in formats:
        served = to_format(copy.deepcopy(base), fmt.name)
        if text is not None and reference is not None:
            with torch.inference_mode():
                f = fidelity(served(text)[0], reference)
            fidelities[fmt.name] = {"top1": f.top1, "kl": f.kl}
        steps = roofline.time_steps(served, sizes, context, repeats)
        one = steps[0].step_ms
        rows += [{"dtype": fmt.name, "batch": s.batch, "step_ms": s.step_ms,
                  "vs_batch_1": s.step_ms / one, "tokens_per_s": s.tokens_per_s,
                  "bytes_per_step": s.weight_bytes + s.kv_bytes, "gb_per_s": s.gb_per_s}
                 for s in steps]
        del served
    document = {"model": model, "threads": threads, "context": context,
                "repeats": repeats, "copy_gb_per_s": bandwidth / 1e9,
                "load_average": _load_average(), "torch": torch.__version__, "rows": rows,
                "fidelity": {"tokens": fidelity_tokens, "formats": fidelities}}
    if json_out:
        print_json(document)
        return
    table = Table(title=f"{model}: decode step by batch size, {threads} thread(s), "
                        f"context {context}, median of {repeats}", title_justify="left")
    for column in ("dtype", "batch", "step ms", "x batch 1", "tok/s", "MB read",
                   "GB/s", "of copy"):
        table.add_column(column, justify="right")
    for r in rows:
        table.add_row(r["dtype"], str(r["batch"]), f"{r['step_ms']:.1f}",
                      f"{r['vs_batch_1']:.2f}", f"{r['tokens_per_s']:.1f}",
                      f"{r['bytes_per_step'] / 1e6:,.0f}", f"{r['gb_per_s']:.1f}",
                      f"{r['gb_per_s'] / (bandwidth / 1e9):.0%}")
    console.print(table)
    for name, close in fidelities.items():
        console.print(f"{name}: greedy token = float32's at {close['top1']:.1%} of "
                      f"{fidelity_tokens} positions of real text; mean KL "
                      f"{close['kl']:.4f} nats", highlight=False)
    console.print(f"copy bandwidth (STREAM-like, {threads} thread(s)): "
                  f"{bandwidth / 1e9:.1f} GB/s; load average: {document['load_average']}",
                  highlight=False)
