"""``kvlab memory``: KV-cache bytes per model and context, by formula or llama.cpp's rule;
with ``--knee``, the concurrency a server's KV budget holds."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer
from rich.markup import escape
from rich.table import Table

from kvlab.cli._app import MEMORY, app, console, print_json
from kvlab.cli.extras import require_engine
from kvlab.cli.lists import LIST_METAVAR, int_list, list_help
from kvlab.cli.memory_knee import knee_document
from kvlab.cli.memory_paged import lengths_from_records, paged_view, seq_lengths
from kvlab.errors import ConfigError
from kvlab.memory import (
    ModelShape,
    compare_mha,
    kv_bytes,
    llama_mib,
    predict_llamacpp_kv,
    shape_from_gguf,
    shape_from_hf_config,
    shape_from_preset,
)

DEFAULT_PRESETS = ["llama-3.1-8b", "qwen2.5-7b"]  # the notebook's two projections
DEFAULT_CONTEXTS = [2048, 8192, 32768]


@app.command("memory", rich_help_panel=MEMORY)
def memory(
    preset: list[str] = typer.Option(
        None,
        "--preset",
        "-p",
        help="Model preset (repeatable). Default: llama-3.1-8b and "
        "qwen2.5-7b, or none when --config/--gguf is given.",
    ),
    config: list[Path] = typer.Option(None, "--config", help="Hugging Face config.json."),
    gguf: list[Path] = typer.Option(None, "--gguf", help="GGUF model file (metadata only)."),
    dtype: str = typer.Option(
        None,
        "--dtype",
        help="Cache type for K and V: f32, f16, bf16, q8_0, q4_0, q4_1, "
        "q5_0, q5_1, iq4_nl. Default bf16 (the formula, as HF models run), f16 with "
        "--llamacpp (llama.cpp's default).",
    ),
    type_k: str = typer.Option(None, "--type-k", help="K cache type (overrides --dtype)."),
    type_v: str = typer.Option(None, "--type-v", help="V cache type (overrides --dtype)."),
    context: list[str] = typer.Option(
        None,
        "-L",
        "--context",
        metavar=LIST_METAVAR,
        help="Context lengths in tokens (with --llamacpp the -c value). Default 2048, "
        "8192, 32768. " + list_help("-L", "2048", "8192"),
    ),
    seqs: list[str] = typer.Option(
        None, "--seqs", "--slots", metavar=LIST_METAVAR,
        help="Sequences (llama.cpp: -np): one number is a count, each as long as the "
        "context (default 1); with --paged, several are their lengths in tokens (e.g. "
        "300,1800,4000). " + list_help("--seqs", "300", "1800"),
    ),
    paged: int = typer.Option(
        None, "--paged", metavar="BLOCK",
        help="Predict a paged cache with blocks of BLOCK tokens (vLLM-style): blocks and "
        "bytes held, the part of them no token fills, and the contiguous reservation "
        "it replaces. With --measure, checked against the engine's block pool.",
    ),
    llamacpp: bool = typer.Option(False, "--llamacpp", help="Use llama.cpp's cell rule."),
    unified: bool = typer.Option(False, "--unified", help="llama.cpp -kvu (one shared pool)."),
    ubatch: int = typer.Option(512, "--ubatch", help="llama.cpp -ub."),
    batch: int = typer.Option(2048, "--batch", help="llama.cpp -b."),
    swa_full: bool = typer.Option(False, "--swa-full", help="llama.cpp --swa-full."),
    records: Path = typer.Option(
        None, "--records",
        help="With --paged: take the sequence lengths (prompt + output - 1 tokens) from a "
        "run's records.jsonl, one row per capacity (or the -L ones).",
    ),
    budget_mib: float = typer.Option(
        None, "--budget-mib",
        help="With --paged: how many sequences fit this much KV memory at once, paged "
        "vs one contiguous slot of the capacity each.",
    ),
    measure: bool = typer.Option(
        False, "--measure", help="Allocate the cache with torch and compare with the formula."
    ),
    mha: bool = typer.Option(
        False, "--compare-mha", help="Compare with the same model using one KV head per query head."
    ),
    knee: str = typer.Option(
        None, "--knee", metavar="SERVER",
        help="Predict the concurrency knee on SERVER, a server kind with a KV pool (vllm, "
        "llamacpp or embedded; the old spelling kvlab still reads): the most requests "
        "of --prompt-tokens + --output-tokens that run at once in the server's "
        "KV budget with no queueing and no preemption, and what the next one meets "
        "(preempt, queue or error). Budget: vllm --kv-blocks (num_gpu_blocks of /metrics' "
        "cache_config_info, or --num-gpu-blocks-override), --kv-space-gib or --metrics; "
        "embedded --kv-blocks or --metrics; llamacpp -L (its -c) with --slots (-np) and "
        "--unified (-kvu). --slots is also vLLM's max_num_seqs (default 128) and the "
        "embedded server's --slots (default 16).",
    ),
    prompt_tokens: int = typer.Option(
        None, "--prompt-tokens", help="With --knee: prompt tokens per request, as the "
        "server counts them (chat template included)."),
    output_tokens: int = typer.Option(
        None, "--output-tokens", help="With --knee: tokens generated per request."),
    kv_blocks: list[str] = typer.Option(
        None, "--kv-blocks", metavar=LIST_METAVAR,
        help="With --knee vllm or embedded: the pool's blocks (vLLM: num_gpu_blocks, the "
        "null block included; embedded: kvlab serve --kv-blocks). "
        + list_help("--kv-blocks", "79", "121")),
    kv_space_gib: list[str] = typer.Option(
        None, "--kv-space-gib", metavar=LIST_METAVAR,
        help="With --knee vllm: the KV space in GiB (VLLM_CPU_KVCACHE_SPACE, which vLLM "
        "reads as whole GiB; --kv-cache-memory-bytes / 2^30), turned into blocks as vLLM "
        "does."),
    metrics: str = typer.Option(
        None, "--metrics", metavar="URL|FILE",
        help="With --knee vllm or embedded: read the budget from the server's /metrics "
        "(vLLM: cache_config_info's num_gpu_blocks and block_size; embedded: "
        "kv_blocks_total)."),
    block_size: int = typer.Option(
        None, "--block-size", help="With --knee: tokens per KV block (default: vLLM-CPU's "
        "128, the embedded server's 16)."),
    prefill_budget: int = typer.Option(
        None, "--prefill-budget", help="With --knee: prompt tokens one step computes "
        "(vLLM's max_num_batched_tokens, default 2048 on CPU; the embedded server's "
        "--prefill-budget, default 256)."),
    out: Path = typer.Option(
        None, "--out", metavar="FILE",
        help="Also write the JSON document (with the machine and its load average) to "
        "FILE, e.g. results/memory/toy.json; kvlab summary reads it."),
    json_out: bool = typer.Option(False, "--json", help="Print one JSON document last."),
) -> None:
    """Predict KV-cache bytes per model and context length.

    Examples: kvlab memory -p gemma-3-270m -L 512,4096 --llamacpp;
    kvlab memory -p toy -L 192 --dtype f32 --measure --out results/memory/toy.json;
    kvlab memory -p gemma-3-270m --knee vllm --kv-blocks 79,121 --prompt-tokens 192
    --output-tokens 64
    """
    knee_options = (prompt_tokens, output_tokens, kv_blocks, kv_space_gib, metrics,
                    block_size, prefill_budget)
    if knee is not None:
        document = knee_document(
            knee, _load_shapes(preset or [], config or [], gguf or []),
            bad=[flag for flag, on in (("--llamacpp", llamacpp), ("--paged", paged is not None),
                                       ("--measure", measure), ("--compare-mha", mha),
                                       ("--records", records is not None),
                                       ("--budget-mib", budget_mib is not None),
                                       ("--type-k/--type-v", bool(type_k or type_v))) if on],
            args=dict(prompt_tokens=prompt_tokens, output_tokens=output_tokens,
                      kv_blocks=kv_blocks, kv_space_gib=kv_space_gib, metrics=metrics,
                      block_size=block_size, prefill_budget=prefill_budget, seqs=seqs,
                      context=context, unified=unified, ubatch=ubatch, batch=batch,
                      dtype=dtype),
            json_out=json_out, title=_title)
        if out is not None:
            write_document(out, document)
        if json_out:
            print_json(document)
        return
    if any(v is not None and v != [] for v in knee_options):
        raise ConfigError("--prompt-tokens, --output-tokens, --kv-blocks, --kv-space-gib, "
                          "--metrics, --block-size and --prefill-budget go with --knee SERVER")
    if measure and llamacpp:
        raise ConfigError("--measure checks the plain formula; drop --llamacpp")
    if measure:
        require_engine("kvlab memory --measure")
    if paged is not None and llamacpp:
        raise ConfigError("--paged predicts kvlab's and vLLM's block pool; drop --llamacpp")
    shapes = _load_shapes(preset or [], config or [], gguf or [])
    if (records or budget_mib is not None) and paged is None:
        raise ConfigError("--records and --budget-mib go with --paged BLOCK")
    if budget_mib is not None and budget_mib <= 0:
        raise ConfigError(f"--budget-mib must be positive, got {budget_mib:g}")
    asked = int_list(context, "-L/--context")
    seq_numbers = int_list(seqs, "--seqs") or [1]
    lengths = seq_lengths(seq_numbers, paged is not None)
    from_records = lengths_from_records(records, asked) if records else {}
    n_seqs = len(lengths) if lengths else seq_numbers[0]
    contexts = (asked or sorted(from_records)
                or ([max(lengths)] if lengths else DEFAULT_CONTEXTS))
    for n in [*contexts, n_seqs, ubatch, batch]:
        if n <= 0:
            raise ConfigError(
                f"context lengths, --seqs, --ubatch and --batch must be positive, got {n}"
            )
    base = dtype or ("f16" if llamacpp else "bf16")
    tk, tv = type_k or base, type_v or base

    docs = []
    for shape in shapes:
        if paged is not None:
            doc = paged_view(shape, paged, contexts, n_seqs, lengths, tk, tv, measure,
                             from_records, budget_mib)
        elif llamacpp:
            doc = _llamacpp_view(shape, contexts, n_seqs, unified, tk, tv, ubatch, batch,
                                 swa_full)
        else:
            doc = _formula_view(shape, contexts, n_seqs, tk, tv, measure)
        if mha:
            doc["compare_mha"] = _mha_view(shape, contexts, n_seqs, tk, tv)
        docs.append(doc)
        if not json_out:
            console.print(doc.pop("_table"))
            if "compare_mha" in doc:
                console.print(doc["compare_mha"].pop("_table"))
                console.print(doc["compare_mha"]["reading"])
    for d in docs:
        d.pop("_table", None)
        if "compare_mha" in d:
            d["compare_mha"].pop("_table", None)
    document = {
        "mode": "paged" if paged is not None else "llamacpp" if llamacpp else "formula",
        "type_k": tk,
        "type_v": tv,
        "models": docs,
    }
    if out is not None:
        write_document(out, document)
    if json_out:
        print_json(document)


def write_document(path: Path, document: dict[str, Any]) -> None:
    """``--out``: the document, the command line and the machine, as one JSON file."""
    import json
    import sys

    from kvlab.servers.preflight import machine_snapshot

    saved = {**document, "argv": ["kvlab", *sys.argv[1:]], "machine": machine_snapshot()}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(saved, indent=2) + "\n", encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"--out {path}: cannot write ({exc.strerror or exc}); choose "
                          "another file") from None


def _load_shapes(presets: list[str], configs: list[Path], ggufs: list[Path]) -> list[ModelShape]:
    if not (presets or configs or ggufs):
        presets = DEFAULT_PRESETS
    shapes = [shape_from_preset(p) for p in presets]
    shapes += [shape_from_hf_config(c) for c in configs]
    shapes += [shape_from_gguf(g) for g in ggufs]
    return shapes


def _title(shape: ModelShape) -> str:
    kv = sorted(set(shape.kv_heads))
    heads = str(kv[0]) if len(kv) == 1 else "/".join(map(str, kv))
    window = f", window {shape.n_swa} on {shape.n_swa_layers} layers" if shape.n_swa else ""
    return escape(
        f"{shape.name}: {shape.n_layers} layers, {heads} KV heads x {shape.head_dim_k}"
        f"{window} [{shape.source}]"
    )


def _formula_view(
    shape: ModelShape, contexts: list[int], seqs: int, tk: str, tv: str, measure: bool
) -> dict[str, Any]:
    table = Table(title=_title(shape))
    for col in ("tokens", "seqs", "cells/layer", "K/V type", "bytes", "MiB", "GiB"):
        table.add_column(col, justify="right")
    if measure:
        table.add_column("measured bytes", justify="right")
        table.add_column("match", justify="center")
    rows = []
    for n in contexts:
        est = kv_bytes(shape, n, type_k=tk, type_v=tv, n_seq=seqs)
        row: dict[str, Any] = est.as_dict()
        cells = f"{est.cells_global}" + (f" / {est.cells_swa} swa" if est.cells_swa else "")
        cells_row = [
            str(n),
            str(seqs),
            cells,
            f"{est.type_k}/{est.type_v}",
            f"{est.total_bytes:,}",
            f"{est.mib:.2f}",
            f"{est.gib:.3f}",
        ]
        if measure:
            if tk != tv:
                raise ConfigError("--measure allocates one type for K and V; drop --type-k/-v")
            from kvlab.studies.kv_measure import measure_kv_bytes

            m = measure_kv_bytes(shape, n, dtype=tk, n_seq=seqs)
            row.update(measured_bytes=m.measured_bytes, measure_method=m.method, matches=m.matches)
            cells_row += [f"{m.measured_bytes:,}", "==" if m.matches else "DIFFERS"]
        table.add_row(*cells_row)
        rows.append(row)
    return {"shape": shape.describe(), "rows": rows, "_table": table}


def _llamacpp_view(
    shape: ModelShape,
    contexts: list[int],
    seqs: int,
    unified: bool,
    tk: str,
    tv: str,
    ubatch: int,
    batch: int,
    swa_full: bool,
) -> dict[str, Any]:
    table = Table(title=f"{_title(shape)} - llama.cpp allocation, K {tk}, V {tv}")
    for col in ("-c", "cache", "cells", "layers", "seqs", "K MiB", "V MiB", "size MiB", "bytes"):
        table.add_column(col, justify="right")
    rows = []
    for n in contexts:
        pred = predict_llamacpp_kv(
            shape,
            n,
            n_seq=seqs,
            kv_unified=unified,
            type_k=tk,
            type_v=tv,
            n_ubatch=ubatch,
            n_batch=batch,
            swa_full=swa_full,
        )
        for c in pred.caches:
            table.add_row(
                str(n),
                c.kind,
                str(c.cells),
                str(c.n_layers),
                f"{c.n_seq_max}/{c.n_stream}",
                llama_mib(c.k_bytes),
                llama_mib(c.v_bytes),
                llama_mib(c.size_bytes),
                f"{c.size_bytes:,}",
            )
        if len(pred.caches) > 1:
            table.add_row(
                str(n),
                "total",
                "",
                "",
                "",
                "",
                "",
                llama_mib(pred.total_bytes),
                f"{pred.total_bytes:,}",
                end_section=True,
            )
        rows.append(pred.as_dict())
    return {"shape": shape.describe(), "rows": rows, "_table": table}


def _mha_view(
    shape: ModelShape, contexts: list[int], seqs: int, tk: str, tv: str
) -> dict[str, Any]:
    table = Table(title=f"{shape.name}: grouped-query vs multi-head attention (same d_model)")
    for col in ("tokens", "KV heads", "GQA GiB", "MHA KV heads", "MHA GiB", "ratio"):
        table.add_column(col, justify="right")
    rows = []
    cmp = None
    for n in contexts:
        cmp = compare_mha(shape, n, type_k=tk, type_v=tv, n_seq=seqs)
        kv = max(shape.kv_heads)
        table.add_row(
            str(n),
            str(kv),
            f"{cmp.gqa.gib:.3f}",
            str(shape.n_heads),
            f"{cmp.mha.gib:.3f}",
            f"{cmp.ratio:g}",
        )
        rows.append(
            {
                "context": n,
                "gqa_bytes": cmp.gqa.total_bytes,
                "mha_bytes": cmp.mha.total_bytes,
                "ratio": cmp.ratio,
            }
        )
    assert cmp is not None  # contexts is never empty
    return {"rows": rows, "reading": cmp.reading(), "_table": table}
