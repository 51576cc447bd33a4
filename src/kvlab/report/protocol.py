"""The "Protocol" section: what the experiment asked for and how the run was measured.

report.md lists the experiment's settings and its modes; report.html gives the same
settings as a table and adds what the measured rows show (their APIs, output lengths
and load points), which it can do even without the experiment file.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping
from html import escape
from typing import Any

from kvlab.experiment import Workload
from kvlab.report.html_blocks import section, table
from kvlab.report.prompts import output_rule, prompt_rule
from kvlab.report.section import ReportInput, Section
from kvlab.report.verdicts import load_label
from kvlab.rundir import Overrides, RunState


def manifest_queries(state: RunState, default: int) -> int:
    """The queries per (mode, capacity) an older manifest kept, else ``default``."""
    return default if state.queries is None else state.queries


def overrides_text(overrides: Mapping[str, Any]) -> list[str]:
    """``key = value`` of each override a run kept (``--set``'s by their dotted keys)."""
    out = [f"{k} = {v}" for k, v in overrides.items() if k != "set"]
    given = Overrides.model_validate(overrides).set
    return out + [f"{k} = {json.dumps(v)}" for k, v in given.items()]


def queries_line(workload: Workload, state: RunState) -> str:
    """How many queries each (mode, capacity) measures: the built-in count, or the
    dataset's rows (``prepared.json`` lists them)."""
    if workload.dataset.kind == "builtin":
        return str(manifest_queries(state, workload.queries))
    return f"the rows of the {workload.dataset.kind!r} dataset (prepared.json)"


class Protocol(Section):
    """The experiment's workload, protocol and modes."""

    heading = "Protocol"

    def body(self, report: ReportInput) -> str:
        experiment, state = report.experiment, report.state
        if experiment is None:
            return ""
        w, p = experiment.workload, experiment.protocol
        lines = [
            f"- Queries per (mode, capacity): {queries_line(w, state)} "
            f"× {w.repetitions} repetition(s); {w.warmup} warm-up request(s) per server, "
            "recorded and flagged, never aggregated.",
            f"- {prompt_rule(w.prompt_fraction, w.dataset)} How tokens were counted, and "
            "what the server counted: section Prompts.",
            f"- {output_rule(w)} (ignore_eos={p.ignore_eos}), "
            f"temperature {p.temperature:g}, seed {p.seed}, cache_prompt={p.cache_prompt}, "
            f"cache_salt={p.cache_salt}.",
            f"- Requests sequential; request timeout {p.request_timeout_s:g} s; readiness "
            f"timeout {p.ready_timeout_s:g} s.",
            "- Modes:", "",
        ]
        if state.overrides:  # kvlab run --queries N, --set KEY=VALUE
            given = ", ".join(overrides_text(state.overrides))
            lines[-2:-2] = [f"- Overrides of this run (kvlab run): {given}; experiment.toml "
                            "in the run dir says so, manifest.json keeps the file verbatim."]
        if state.no_launch is not None:  # kvlab run --no-launch
            where = ", ".join(f"{k} → {v}" for k, v in state.no_launch.endpoints.items())
            lines[-2:-2] = [f"- Servers not launched by kvlab (--no-launch), measured at: "
                            f"{where}."]
        for m in experiment.modes:
            shown = m.settings.model_dump(mode="json", exclude_none=True, exclude={"kind"})
            lines.append(f"  - `{m.name}`: server {m.server}, API {m.api}, stream={m.stream}, "
                         f"capacities {experiment.capacities(m)}, settings {shown}")
        return "\n".join(lines) + "\n"

    def html(self, report: ReportInput) -> str:
        parts = []
        experiment = report.experiment
        if experiment is not None:
            w, p = experiment.workload, experiment.protocol
            parts.append(f"<p>Experiment <b>{escape(experiment.name)}</b>. "
                         f"{escape(experiment.description)}</p>")
            parts.append(table(["setting", "value"], [
                ["queries × repetitions", f"{w.queries} × {w.repetitions}"],
                ["capacities", ", ".join(map(str, experiment.all_capacities()))],
                ["output tokens (forced)", f"{output_rule(w)} (ignore_eos={p.ignore_eos})"],
                ["warm-up per (mode, capacity)", f"{w.warmup}, recorded, never aggregated"],
                ["prompt", prompt_rule(w.prompt_fraction, w.dataset)],
                ["temperature / seed / cache_prompt / cache_salt",
                 f"{p.temperature:g} / {p.seed} / {p.cache_prompt} / {p.cache_salt}"],
                ["timeouts",
                 f"request {p.request_timeout_s:g} s, readiness {p.ready_timeout_s:g} s"],
                ["modes", "; ".join(f"{m.name} ({m.server}, {m.api}, stream={m.stream})"
                                    for m in experiment.modes)],
            ], left=2))
        rows = report.evaluation.valid.sent
        apis = Counter(f"{r.api} {r.path} stream={r.stream}" for r in rows)
        loads = sorted({load_label(r.load) for r in rows})
        parts.append(
            f"<p>Observed: {len(rows)} measured rows; requests {escape(', '.join(apis))}; "
            f"requested output tokens {sorted({r.requested_tokens for r in rows})}; "
            f"load {escape(', '.join(loads))}. Clock: <code>perf_counter_ns</code> "
            "relative to the run start.</p>")
        return section(self.heading, "\n".join(parts))
