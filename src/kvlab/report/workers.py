"""The report's "Load workers and clocks" section (``kvlab run --workers``).

Where the load workers ran (manifest: each invocation's ``workers``) and, per load point
and worker, the clock offset to the coordinator with its error bound (manifest:
``worker_clocks``, measured by :mod:`kvlab.bench.workers.clocks`) beside the rows that
worker recorded. Nothing is computed here beyond counting rows.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from kvlab.markdown import row
from kvlab.records import Record
from kvlab.report.section import ReportInput, Section
from kvlab.store.state import RunState

TITLE = "Load workers and clocks"

CLOCK_RULE = (
    "Per-request times (TTFT, ITL, e2e, send lag) are each read on one worker's own clock: "
    "no duration crosses two clocks or two machines. Each worker's clock is placed on the "
    "run's time axis by its offset to the coordinator's, measured by ping-pong before each "
    "load point (the shortest of its round trips; the offset is good to half that round "
    "trip, the bound below). Only what spans workers uses the offsets: the order of "
    "records.jsonl (completion order), the busiest second of the client check and a "
    "point's achieved rate.")


def _ms(ns: int | float) -> str:
    return f"{ns / 1e6:.3f}"


def _where(workers: dict[str, Any]) -> str:
    count = workers.get("count", len(workers.get("workers", [])))
    address = workers.get("address")
    ray = f"Ray {workers.get('ray_version', '?')}"
    place = ("a local Ray kvlab started and stopped" if address in (None, "local")
             else f"the Ray cluster at {address}")
    hosts = Counter(w.get("host", "?") for w in workers.get("workers", []))
    cores = {w.get("host", "?"): w.get("cores") for w in workers.get("workers", [])}
    on = ", ".join(f"{h} ({n} worker{'s' * (n != 1)}, {cores[h]} cores)"
                   for h, n in hosts.items())
    return (f"{count} load workers ({ray}, {place}) on "
            f"{workers.get('nodes', '?')} node(s): {on}")


def workers_body(manifest: dict[str, Any], records: Sequence[Record]) -> str:
    """The section's markdown without its heading; "" when no worker sent a row."""
    ran = [i.workers for i in RunState.model_validate(manifest).invocations if i.workers]
    if not ran:
        return ""
    lines = [f"- {_where(w)}" for w in ran]
    lines += ["", CLOCK_RULE, ""]
    hosts = {w["worker"]: w.get("host", "?") for w in ran[-1].get("workers", [])}
    rows = Counter((r.mode, r.capacity, r.load, r.worker) for r in records
                   if r.worker is not None and not r.warmup)
    lines += ["| mode | capacity | load | worker | host | requests | rows | offset ms "
              "| ± bound ms | round trip ms |", "|---|---|---|---|---|---|---|---|---|---|"]
    bounds = []
    for point in manifest.get("worker_clocks") or []:
        for c in point["clocks"]:
            bounds.append(c["error_ns"])
            recorded = rows.get((point["mode"], point["capacity"], point["load"], c["worker"]),
                                0)
            lines.append(row([point['mode'], point['capacity'], point['load'], c['worker'],
                              hosts.get(c['worker'], '?'), c['requests'], recorded,
                              _ms(c['offset_ns']), _ms(c['error_ns']), _ms(c['rtt_ns'])]))
    if bounds:
        lines += ["", f"Largest bound: ± {_ms(max(bounds))} ms: two records of different "
                  "workers whose ends are closer than that may be in either order."]
    return "\n".join(lines) + "\n"


def workers_markdown(manifest: dict[str, Any], records: Sequence[Record]) -> str:
    """The "Load workers and clocks" section; "" for a run of one process."""
    body = workers_body(manifest, records)
    return f"\n## {TITLE}\n\n{body}" if body else ""


class Workers(Section):
    """Where the load workers ran and their clocks' offsets."""

    heading = TITLE

    def body(self, report: ReportInput) -> str:
        return workers_body(report.manifest, report.records)
