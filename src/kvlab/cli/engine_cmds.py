"""Commands over the reference engine: ``prove`` and ``kv-bench``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer
from rich.table import Table

from kvlab.cli._app import STUDIES, app, console, err_console, print_json
from kvlab.cli.extras import require_engine
from kvlab.cli.lists import LIST_METAVAR, int_list, list_help


def _mark(ok: bool) -> str:
    return "[green]PASS[/]" if ok else "[red]FAIL[/]"


@app.command(rich_help_panel=STUDIES)
def prove(
    preset: str = typer.Option("toy", "--preset", help="Model preset proven first."),
    model: str | None = typer.Option(
        None, "--model", help="A real model instead of the toy presets: gemma-3-270m "
        "(the bundled GGUF) or a Gemma 3 GGUF path."),
    prompt_tokens: int | None = typer.Option(
        None, "--prompt-tokens",
        help="Prompt length (toy: 48 random tokens; --model: 600 tokens of real text)."),
    new_tokens: int | None = typer.Option(
        None, "--new-tokens", help="Tokens generated greedily (toy: 20; --model: 8)."),
    seed: int = typer.Option(42, "--seed", help="Seed of the weights and the prompt."),
    threads: int | None = typer.Option(
        None, "--threads", help="torch intra-op threads (toy: 1; --model: 2)."),
    json_out: bool = typer.Option(False, "--json", help="Print one JSON document."),
) -> None:
    """Prove cached generation equals full recomputation (MHA, GQA, MQA; with --model,
    the sliding-window cache of a real model on a prompt longer than its window);
    exit 1 if not."""
    require_engine("kvlab prove")
    from kvlab.studies.prove import MASK_PAST, mask_reading, prove_gemma, run_proof

    def given(value: int | None, default: int) -> int:
        return default if value is None else value

    if model is not None:
        report = prove_gemma(model, given(prompt_tokens, 600), given(new_tokens, 8), seed,
                             threads=given(threads, 2))
    else:
        report = run_proof(preset, given(prompt_tokens, 48), given(new_tokens, 20), seed,
                           threads=given(threads, 1))
    if json_out:
        print_json(report.to_dict())
    else:
        _print_mask(report.mask, MASK_PAST, mask_reading(report.mask, MASK_PAST))
        for proof in report.proofs:
            console.print(_proof_table(proof))
        verdict = "[green]all checks passed[/]" if report.ok else "[red]a check failed[/]"
        console.print(verdict)
    if not report.ok:
        raise typer.Exit(1)


def _print_mask(mask: list[list[bool]], past: int, reading: str) -> None:
    console.print(f"Causal mask, {len(mask)} new tokens after a cache of {past} "
                  f"(rows: queries, columns: keys 0..{len(mask[0]) - 1}; 1 = visible):")
    for i, row in enumerate(mask):
        console.print(f"  q{past + i}  " + " ".join("1" if v else "." for v in row),
                      highlight=False)
    console.print(reading, highlight=False)


def _proof_table(proof: Any) -> Table:
    at_512 = ("" if proof.parameters_at_512 == proof.parameters
              else f" ({proof.parameters_at_512:,} at max_len 512)")  # the toy's table
    title = (f"{proof.preset}: {proof.attention}, {proof.n_heads} heads / "
             f"{proof.n_kv_heads} KV heads, {proof.parameters:,} parameters{at_512}")
    table = Table(title=title, title_justify="left")
    for column in ("check", "result", "expected", ""):
        table.add_column(column)
    table.add_row("same tokens (naive, cached, chunked prefill)",
                  str(proof.sequences_equal), "True", _mark(proof.sequences_equal))
    delta = max(proof.max_abs_logit_delta, proof.max_abs_logit_delta_chunked)
    table.add_row(
        "max |Δ logit| naive vs cached / chunked",
        f"{proof.max_abs_logit_delta:.3e} / {proof.max_abs_logit_delta_chunked:.3e}",
        f"< {proof.tolerance:.3g}", _mark(delta < proof.tolerance))
    table.add_row("cache length per layer", str(proof.cache_lengths),
                  f"{proof.expected_cache_length} = {proof.prompt_tokens} + "
                  f"{proof.new_tokens} - 1", _mark(proof.cache_length_ok))
    if proof.sliding_layers:
        table.add_row(f"cells per layer (window {proof.window})",
                      _cells(proof.cache_cells), "ring of the window on sliding layers", "")
    table.add_row("cache bytes (K+V, float32)", f"{proof.cache_bytes:,}", "", "")
    return table


def _cells(cells: list[int]) -> str:
    """[512, 512, 607] -> "512 x2, 607 x1" (runs of equal counts)."""
    runs: list[list[int]] = []
    for c in cells:
        if runs and runs[-1][0] == c:
            runs[-1][1] += 1
        else:
            runs.append([c, 1])
    return ", ".join(f"{c} x{n}" for c, n in runs)


@app.command("kv-bench", rich_help_panel=STUDIES)
def kv_bench(
    contexts: list[str] = typer.Option(
        None, "--contexts", metavar=LIST_METAVAR,
        help="Prompt lengths in tokens (default 32 to 4096, doubling). "
        + list_help("--contexts", "512", "2048")),
    new_tokens: int = typer.Option(16, "--new-tokens", help="Tokens generated per run (N)."),
    repeats: int = typer.Option(3, "--repeats", help="Timed runs per path; medians reported."),
    threads: int = typer.Option(2, "--threads", help="torch intra-op threads."),
    preset: str = typer.Option("toy", "--preset", help="Model preset."),
    model: str | None = typer.Option(
        None, "--model", help="A real model instead of the preset: gemma-3-270m or a "
        "Gemma 3 GGUF path (prompts of real text; naive decode is slow: try "
        "--new-tokens 4 --repeats 1)."),
    seed: int = typer.Option(42, "--seed", help="Seed of the weights and prompts."),
    out: Path = typer.Option(Path("results/kv-bench"), "--out", help="Output directory."),
    json_out: bool = typer.Option(False, "--json", help="Print one JSON document."),
) -> None:
    """Time naive vs cached generation across contexts; write JSON, CSV and a PNG."""
    require_engine("kvlab kv-bench")
    from rich.progress import Progress

    from kvlab.studies.bench_files import write_outputs
    from kvlab.studies.timing import DEFAULT_CONTEXTS, BenchSettings, run_kv_bench

    settings = BenchSettings(preset=preset, model=model,
                             contexts=tuple(sorted(set(int_list(contexts, "--contexts"))))
                             or DEFAULT_CONTEXTS,
                             new_tokens=new_tokens, repeats=repeats, threads=threads, seed=seed)
    with Progress(console=err_console, transient=True,
                  disable=not err_console.is_terminal) as progress:
        task = progress.add_task("kv-bench", total=settings.steps())
        result = run_kv_bench(
            settings, on_step=lambda label: progress.update(task, advance=1, description=label))
    paths = write_outputs(result, out)
    if json_out:
        print_json(result.to_dict() | {"files": [str(p) for p in paths]})
        return
    console.print(_bench_table(result))
    n = settings.new_tokens
    console.print(
        f"Total-time speedup cannot exceed about N = {n}: the cached path still pays one "
        f"full pass over the prompt, the naive one pays {n}. The per-token decode speedup "
        f"is the one that grows with the context.", highlight=False)
    console.print("Wrote " + ", ".join(str(p) for p in paths), highlight=False)


def _bench_table(result: Any) -> Table:
    from rich import box

    s = result.settings
    console.print(f"kv-bench: {s.label} ({result.parameters:,} parameters), "
                  f"N = {s.new_tokens}, {s.threads} thread(s), median of {s.repeats}",
                  highlight=False)
    table = Table(caption=("prefill: first pass over the prompt (ms); decode: per generated "
                           "token after it (ms); total: prompt + N tokens (s)"),
                  caption_justify="left", box=box.SIMPLE_HEAD,
                  padding=(0, 0), pad_edge=False)
    for column in ("ctx", "naive\nprefill", "naive\ndecode", "naive\ntotal",
                   "cached\nprefill", "cached\ndecode", "cached\ntotal",
                   "speedup\ndecode", "speedup\ntotal"):
        table.add_column(column, justify="right", min_width=max(map(len, column.split())))
    for row in result.rows:
        table.add_row(
            str(row.context),
            f"{row.naive.prefill_s * 1e3:.1f}", f"{row.naive.decode_s_per_token * 1e3:.2f}",
            f"{row.naive.total_s:.2f}",
            f"{row.cached.prefill_s * 1e3:.1f}", f"{row.cached.decode_s_per_token * 1e3:.2f}",
            f"{row.cached.total_s:.2f}",
            f"{row.decode_speedup:.1f}x", f"{row.total_speedup:.2f}x")
    return table


@app.command("engine-check", rich_help_panel=STUDIES)
def engine_check(
    model: str = typer.Option("gemma-3-270m", "--model",
                              help="gemma-3-270m (the bundled GGUF) or a Gemma 3 GGUF path."),
    against: list[str] = typer.Option(
        ["transformers", "llama-server"], "--against",
        help="Reference(s): transformers (logits) and/or llama-server (tokens, decoding)."),
    queries: int = typer.Option(30, "--queries", help="Protocol queries (1..30)."),
    capacities: list[str] = typer.Option(
        ["512,2048,4096"], "--capacities", metavar=LIST_METAVAR,
        help="Capacities whose prompts are tokenized by both. "
        + list_help("--capacities", "512", "2048")),
    decode_capacity: int = typer.Option(512, "--decode-capacity",
                                        help="Capacity whose prompts are decoded by both."),
    new_tokens: int = typer.Option(64, "--new-tokens", help="Greedy tokens per prompt."),
    threads: int = typer.Option(2, "--threads", help="torch and llama-server threads."),
    numerics: list[str] = typer.Option(
        ["float32"], "--numerics",
        help="Teacher-forced top-1 of the engine in float32 (always) and, with "
        "llamacpp, also under an emulation of llama.cpp's CPU numerics (Q8 activations, "
        "F16 KV cache, flash attention, F16 GELU table), reported beside it."),
    out: Path = typer.Option(Path("results/engine-check"), "--out", help="Output directory."),
    json_out: bool = typer.Option(False, "--json", help="Print one JSON document."),
) -> None:
    """The engine against Transformers (logits, float32) and llama-server (tokenization,
    greedy decoding, teacher-forced top-1) on the same GGUF; exit 1 if a check fails.

    With both references, Transformers is also teacher-forced on llama-server's tokens
    and scored beside the engine. The pass mark (99 %) applies to the engine in float32.
    """
    require_engine("kvlab engine-check")
    import json
    from functools import partial

    import torch

    from kvlab.bench.plan.workload import builtin_queries
    from kvlab.engine.models import load_model
    from kvlab.errors import ConfigError
    from kvlab.servers.fetch import model_file
    from kvlab.studies.agreement import run_agreement
    from kvlab.studies.reference import (
        compare_logits,
        load_transformers_gemma,
        reference_prompts,
        transformers_forced_logits,
    )

    unknown = sorted(set(against) - {"transformers", "llama-server"})
    odd_numerics = sorted(set(numerics) - {"float32", "llamacpp"})
    if unknown or odd_numerics or threads <= 0 or new_tokens <= 1:
        raise ConfigError(f"--against takes transformers or llama-server (got {unknown}); "
                          f"--numerics takes float32 or llamacpp (got {odd_numerics}); "
                          f"--threads must be positive and --new-tokens at least 2")
    chosen = builtin_queries(queries)
    caps = sorted(set(int_list(capacities, "--capacities")))
    torch.set_num_threads(threads)
    loaded = load_model(model_file(model), name=model)
    document: dict[str, Any] = {"model": model, "sha256": loaded.sha256, "threads": threads}
    ok = True
    forcers: dict[str, Any] = {}
    if "transformers" in against:
        reference = load_transformers_gemma(loaded.path)
        prompts = {n: loaded.tokenizer.encode(t) for n, t in reference_prompts().items()}
        logits = compare_logits(loaded.model, reference, prompts)
        document["transformers"] = [r.to_dict() for r in logits]
        ok = ok and all(r.ok for r in logits)
        if "llama-server" in against:
            forcers["transformers"] = partial(transformers_forced_logits, reference)
        else:
            del reference
    if "llama-server" in against:
        if "llamacpp" in numerics:
            from kvlab.studies.llamacpp_numerics import (
                llamacpp_teacher_forced_logits,
                weight_types,
            )

            forcers["engine (llama.cpp numerics)"] = partial(
                llamacpp_teacher_forced_logits, loaded.model, weight_types(loaded.path),
                threads=threads)
        out.mkdir(parents=True, exist_ok=True)
        agreement = run_agreement(loaded, queries=chosen, capacities=caps,
                                  decode_capacity=decode_capacity, n_predict=new_tokens,
                                  server_threads=threads, log_dir=out, forcers=forcers)
        document["llama_server"] = agreement.to_dict()
        summary = agreement.summary()
        ok = ok and summary["tokenizer_equal"] == summary["tokenizer_total"] and (
            summary["teacher_forced_top1"] or 0.0) >= 0.99
    document["ok"] = ok
    out.mkdir(parents=True, exist_ok=True)
    (out / "engine-check.json").write_text(json.dumps(document, indent=2) + "\n")
    if json_out:
        print_json(document)
    else:
        _print_engine_check(document)
        console.print(f"Wrote {out / 'engine-check.json'}", highlight=False)
    if not ok:
        raise typer.Exit(1)


def _print_engine_check(document: dict[str, Any]) -> None:
    for row in document.get("transformers", []):
        console.print(
            f"transformers  {row['name']:<13} {row['tokens']:>4} tokens  max |Δ logit| "
            f"{row['max_abs_diff']:.3e} (≤ {row['tolerance']:g})  top-1 same at "
            f"{row['argmax_agreement']:.0%} of positions  {_mark(row['ok'])}", highlight=False)
    if "llama_server" in document:
        s = document["llama_server"]["summary"]
        console.print(
            f"llama-server  tokenization equal on {s['tokenizer_equal']}/"
            f"{s['tokenizer_total']} prompts (capacities {s['capacities']})  "
            f"{_mark(s['tokenizer_equal'] == s['tokenizer_total'])}", highlight=False)
        console.print(
            f"llama-server  greedy, {s['queries_decoded']} prompts x {s['n_predict']} tokens:"
            f" agree before the first divergence median {s['agreed_median']}, min "
            f"{s['agreed_min']}; teacher-forced top-1 {s['teacher_forced_top1']:.2%} "
            f"(≥ 99%)  {_mark((s['teacher_forced_top1'] or 0) >= 0.99)}", highlight=False)
        for name, f in s.get("teacher_forced", {}).items():
            misses = (f"; misses: llama-server's token ranked {_ranks(f['miss_ranks'])}, "
                      f"{f['median_margin']:.3f} logits behind (median), at most "
                      f"{f['max_margin']:.3f}" if f["misses"] else "")
            console.print(f"llama-server  teacher-forced top-1, {name}: {f['top1']:.2%} "
                          f"({f['agree']:,}/{f['steps']:,}){misses}", highlight=False)


def _ranks(counts: dict[int, int]) -> str:
    """{2: 42, 3: 4} -> "2nd x42, 3rd x4"."""
    nth = {1: "st", 2: "nd", 3: "rd"}
    return ", ".join(f"{r}{nth.get(r if r < 20 else r % 10, 'th')} x{n}"
                     for r, n in counts.items())
