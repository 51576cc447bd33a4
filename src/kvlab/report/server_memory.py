"""The "Server memory" section: each launched server's resident memory during every
load point, beside the KV budget's bytes and the weights' bytes kvlab predicts.

Renders :class:`~kvlab.analysis.process_memory.PointMemory` from the evaluation;
computes nothing.
"""

from __future__ import annotations

from kvlab.analysis.checks import PROCESS_MEMORY
from kvlab.analysis.process_memory import PointMemory
from kvlab.markdown import row
from kvlab.report.section import ReportInput, Section, checked

MIB = 1024 * 1024


def _mib(value: int | None) -> str:
    return "—" if value is None else f"{value / MIB:.1f}"


def section_body(rows: list[PointMemory]) -> str:
    """The section's Markdown without its title; "" without samples."""
    if not rows:
        return ""
    lines = [
        "Resident memory of each launched server's whole process tree (the process kvlab "
        "started and its descendants), sampled with psutil before each load point, every "
        "0.25 s during it and after it (process_memory.jsonl), in MiB. KV budget: the "
        "bytes of the KV budget the server reported (kvlab memory's rule); weights: the "
        "GGUF file (llama-server), the checkpoint's weight files (vLLM), the engine's "
        "parameters and buffers (kvlab serve); rest = RSS max − weights − KV budget: the "
        "runtime itself. Pages two processes share count in each.", "",
        "| mode | capacity | load | samples | processes | RSS start | RSS max | RSS end "
        "| weights | KV budget | rest |", "|" + "---|" * 11]
    for r in rows:
        lines.append(row([r.mode, r.capacity, r.load or 'sequential', r.samples, r.processes,
                          _mib(r.rss_start), _mib(r.rss_max), _mib(r.rss_end),
                          _mib(r.weights_bytes), _mib(r.kv_bytes), _mib(r.rest)]))
    unknown = dict.fromkeys(f"{r.mode} @ {r.capacity}: {r.kv_why}" for r in rows if r.kv_why)
    if unknown:
        lines += ["", "KV budget not known: " + "; ".join(unknown) + "."]
    return "\n".join(lines) + "\n"


class ServerMemory(Section):
    """Each launched server's RSS per load point against KV and weights bytes."""

    heading = "Server memory"

    def body(self, report: ReportInput) -> str:
        return checked(report, PROCESS_MEMORY, section_body)
