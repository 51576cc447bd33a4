"""The report section "The same run under other tools' definitions".

One table per capacity (and load point): a row per mode and metric, a column per
definition set (kvlab, vLLM, GuideLLM, AIPerf). Every figure is computed from the
run's records by :mod:`kvlab.analysis.definition_cells`; nothing is measured here.
"""

from __future__ import annotations

from collections.abc import Sequence

from kvlab.analysis.definition_cells import Aggregate, Cell
from kvlab.analysis.definitions import METRIC_LABELS, METRICS, SETS, WHY_THEY_DIFFER
from kvlab.markdown import table
from kvlab.report.section import ReportInput, Section

TITLE = "The same run under other tools' definitions"


def _fmt(x: float | None, digits: int) -> str:
    return "—" if x is None else f"{x:.{digits}f}"


def _cell(a: Aggregate) -> str:
    """"median / p95" in ms, or an em dash when the tool has no such value."""
    if a.count == 0:
        return "—"
    digits = 3 if (a.median or 0) < 10 else 2
    return f"{_fmt(a.median, digits)} / {_fmt(a.p95, digits)}"


def table_rows(group: Sequence[Cell], names: Sequence[str]) -> list[list[str]]:
    """Rows [mode, metric, one cell per set] of the cells of one capacity and load."""
    rows: list[list[str]] = []
    for c in group:
        for metric in METRICS:
            rows.append([c.mode, METRIC_LABELS[metric],
                         *[_cell(c.by_set[n][metric]) for n in names]])
        rows.append([c.mode, METRIC_LABELS["output_tokens_per_s"],
                     *[_fmt(c.rates[n], 2) for n in names]])
    return rows


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    return table(header, rows)


def section_body(found: Sequence[Cell], names: Sequence[str] = tuple(SETS)) -> str:
    """The section without its heading (the HTML report adds its own). ``found``: the
    evaluation's cells under every set (analysis.definition_cells.cells)."""
    found = [c.only(names) for c in found]
    out = [f"Times in ms as median / p95 over the valid rows; tok/s is each tool's "
           f"output rate. {WHY_THEY_DIFFER}", "",
           "With a reasoning model, every set times TTFT to the first token of any kind, "
           "its thinking included. The first answer token: " + "; ".join(
               f"{n}, {SETS[n].definitions['first_answer']}" for n in names) + ".", ""]
    if not found:
        return "\n".join([*out, "No valid row to compute them from."]) + "\n"
    groups: dict[tuple[int, str | None], list[Cell]] = {}
    for c in found:
        groups.setdefault((c.capacity, c.load), []).append(c)
    for (capacity, load), group in groups.items():
        where = f"capacity {capacity}" + (f", {load}" if load else "")
        counted = ", ".join(f"{c.mode} {c.rows}" for c in group)
        out += [f"{where[0].upper()}{where[1:]} (valid rows: {counted}):", ""]
        out += _table(["mode", "metric", *names], table_rows(group, names))
        out.append("")
    out.append("Sources (file and version each set follows; what kvlab's records can "
               "only approximate):")
    out.append("")
    for n in names:
        ds = SETS[n]
        note = f" Approximated: {ds.approximations}." if ds.approximations else ""
        out.append(f"- {n}: {ds.source}.{note}")
    return "\n".join(out) + "\n"


def definitions_markdown(found: Sequence[Cell], names: Sequence[str] = tuple(SETS)) -> str:
    """The whole report.md section, heading included (``found`` as in section_body)."""
    return "\n".join(["", f"## {TITLE}", "", section_body(found, names)])


class PeerDefinitions(Section):
    """The run's cells under vLLM's, GuideLLM's and AIPerf's definitions."""

    heading = TITLE

    def body(self, report: ReportInput) -> str:
        return section_body(report.evaluation.definitions)
