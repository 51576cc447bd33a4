"""The KV check rendered: kvlab's predicted KV caches beside those llama-server logged.

The check itself (parsing the log, the prediction, the comparison) is
:mod:`kvlab.servers.kvlog`, kept in the run's manifest; this is its table, the same in
report.md and report.html. A disagreement is a row marked NO and a line per mismatch,
never hidden.
"""

from __future__ import annotations

from collections.abc import Mapping

from kvlab.markdown import row
from kvlab.report.section import ReportInput, Section
from kvlab.rundir import RunState
from kvlab.servers.kvlog import KvCheck, log_mib


def _cell(value: float | str | None) -> str:
    """One side of a "predicted / logged" cell: – when missing, MiB with 2 decimals."""
    if value is None:
        return "–"
    return f"{value:.2f}" if isinstance(value, float) else str(value)


def _pair(predicted: float | str | None, logged: float | str | None) -> str:
    return f"{_cell(predicted)} / {_cell(logged)}"


def kv_check_table(check: KvCheck | Mapping[str, object]) -> str:
    """A markdown table of a KV check (the model or its JSON form, as the manifest keeps
    it), its verdict with the log's resolution, and one line per mismatch."""
    chk = check if isinstance(check, KvCheck) else KvCheck.model_validate(check)
    rows = [
        "| cache | cells pred / log | layers pred / log | K MiB pred / log "
        "| V MiB pred / log | bytes predicted | match |",
        "|---|---|---|---|---|---|---|",
    ]
    for c in chk.caches:
        p, lg = c.predicted, c.logged
        rows.append(row([c.kind, _pair(p.cells if p else None, lg.cells if lg else None),
                         _pair(p.layers if p else None, lg.layers if lg else None),
                         _pair(log_mib(p.k_bytes) if p else None, lg.k_mib if lg else None),
                         _pair(log_mib(p.v_bytes) if p else None, lg.v_mib if lg else None),
                         p.size_bytes if p else '–', 'yes' if c.match else 'NO']))
    verdict = "prediction matches the log" if chk.match else "PREDICTION DIFFERS FROM THE LOG"
    lines = [*rows, "", f"KV check: {verdict}. {chk.note}"]
    for c in chk.caches:
        lines.extend(f"- {c.kind}: {m}" for m in c.mismatches)
    return "\n".join(lines)


def kv_check_body(state: RunState) -> str:
    """The KV check of every launched llama-server, one table per server: kvlab's
    predicted KV-cache allocation next to the ``llama_kv_cache: size = ...`` lines of its
    log; "" when no server logged one."""
    out: list[str] = []
    for entry in state.servers:
        check = known.kv_check if (known := entry.known) is not None else None
        if check:
            out += [f"### {entry.mode} @ {entry.capacity}", "", kv_check_table(check), ""]
    return "\n".join(out)


def kv_check_markdown(state: RunState) -> str:
    """The section as report.md text ("" when no server logged a check)."""
    body = kv_check_body(state)
    return f"\n## {KvCheckSection.heading}\n\n{body}" if body else ""


class KvCheckSection(Section):
    """Predicted against allocated KV caches, per launched llama-server."""

    heading = "KV check: predicted vs allocated by llama-server"

    def body(self, report: ReportInput) -> str:
        return kv_check_body(report.state)
