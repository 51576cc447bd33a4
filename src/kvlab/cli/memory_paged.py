"""``kvlab memory --paged BLOCK``: the paged cache's blocks and bytes, beside the
contiguous reservation it replaces."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.table import Table

from kvlab.errors import ConfigError
from kvlab.memory import ModelShape
from kvlab.memory.formula import MIB
from kvlab.memory.paged import contiguous_bytes, max_sequences, paged_kv_bytes


def seq_lengths(numbers: list[int], paged: bool) -> list[int]:
    """``--seqs``: one number N gives [] (N sequences as long as each context); several
    are the sequences' lengths, which only a paged cache can hold as they are."""
    if len(numbers) == 1:
        return []
    if not paged:
        raise ConfigError("--seqs with a list of lengths needs --paged BLOCK")
    return numbers


def lengths_from_records(path: Path, capacities: list[int] | None) -> dict[int, list[int]]:
    """Per capacity, the KV length each completed request reached: prompt + output - 1
    tokens (the last token is never fed back). Warm-ups and failures are left out."""
    from kvlab.rundir import Outcome, measured, read_records

    if not path.is_file():
        raise ConfigError(f"--records {path}: no such file; give a run's records.jsonl")
    out: dict[int, list[int]] = {}
    for rec in measured(read_records(path)):
        if rec.outcome != Outcome.OK or not rec.prompt_tokens or not rec.output_tokens:
            continue
        if capacities and rec.capacity not in capacities:
            continue
        out.setdefault(rec.capacity, []).append(rec.prompt_tokens + rec.output_tokens - 1)
    if not out:
        raise ConfigError(f"--records {path}: no completed request with token counts"
                          + (f" at capacity {capacities}" if capacities else ""))
    return out


def paged_view(
    shape: ModelShape, block: int, contexts: list[int], n_seqs: int, lengths: list[int],
    tk: str, tv: str, measure: bool, from_records: dict[int, list[int]] | None = None,
    budget_mib: float | None = None,
) -> dict[str, Any]:
    """One row per context: ``n_seqs`` sequences of that length, the ``lengths`` mix,
    or the lengths the records reached at that capacity, reserved at that capacity."""
    table = Table(title=f"{shape.name}: paged KV cache, blocks of {block} tokens, "
                        f"K {tk}, V {tv}")
    columns = ["seqs", "cap.", "blocks/layer", "paged MiB", "unfilled", "contig. MiB",
               "contig. unused"]
    if measure:
        columns += ["pool blocks", "match"]
    if budget_mib:
        columns += [f"seqs in {budget_mib:g} MiB: paged", "contig."]
    for col in columns:
        table.add_column(col, justify="right")
    rows = []
    for capacity in contexts:
        seq_lens = (from_records or {}).get(capacity) or lengths or [capacity] * n_seqs
        if max(seq_lens) > capacity:
            raise ConfigError(
                f"a sequence of {max(seq_lens)} tokens does not fit a capacity of "
                f"{capacity}; raise -L or shorten --seqs"
            )
        est = paged_kv_bytes(shape, seq_lens, block, type_k=tk, type_v=tv)
        reserved = contiguous_bytes(shape, len(seq_lens), capacity, type_k=tk, type_v=tv)
        blocks = str(est.blocks_global) + (
            f" / {est.blocks_swa} swa" if est.blocks_swa is not None else "")
        row: dict[str, Any] = {**est.as_dict(), "capacity": capacity,
                               "contiguous_bytes": reserved,
                               "contiguous_unused": 1 - est.token_bytes / reserved}
        cells = [_describe(seq_lens), str(capacity), blocks, f"{est.bytes / MIB:.2f}",
                 f"{est.waste:.1%}", f"{reserved / MIB:.2f}",
                 f"{row['contiguous_unused']:.1%}"]
        if measure:
            from kvlab.studies.kv_measure import measure_paged_blocks

            pool_size = max(est.blocks_global, est.blocks_swa or 0)
            got = measure_paged_blocks(shape, seq_lens, block, pool_size)
            same = (got.blocks_global, got.blocks_swa) == (est.blocks_global, est.blocks_swa)
            row.update(measured_blocks_global=got.blocks_global,
                       measured_blocks_swa=got.blocks_swa, matches=same)
            cells += [str(got.blocks_global) + (
                f" / {got.blocks_swa} swa" if got.blocks_swa is not None else ""),
                "==" if same else "DIFFERS"]
        if budget_mib:
            budget = int(budget_mib * MIB)
            fit_paged = max_sequences(shape, seq_lens, block, budget, type_k=tk, type_v=tv)
            fit_contig = budget // contiguous_bytes(shape, 1, capacity, type_k=tk, type_v=tv)
            row.update(budget_bytes=budget, max_seqs_paged=fit_paged,
                       max_seqs_contiguous=fit_contig)
            cells += [str(fit_paged), str(fit_contig)]
        table.add_row(*cells)
        rows.append(row)
    return {"shape": shape.describe(), "rows": rows, "_table": table}


def _describe(lengths: list[int]) -> str:
    if len(set(lengths)) == 1:
        return f"{len(lengths)} x {lengths[0]}"
    mean = sum(lengths) / len(lengths)
    return f"{len(lengths)}: {min(lengths)}..{max(lengths)} (mean {mean:.0f})"
