"""The "Manifest essentials" section: the kvlab version and commit, the host, the
invocations (the run and each resume) and each server's command line (report.html adds
the whole manifest.json)."""

from __future__ import annotations

import json
from html import escape

from kvlab.report.html_blocks import markdown_block, section
from kvlab.report.markdown import fmt
from kvlab.report.section import ReportInput, Section
from kvlab.store.state import RunState


class ManifestEssentials(Section):
    """What ran where: versions, host, invocations and servers."""

    heading = "Manifest essentials"

    def body(self, report: ReportInput) -> str:
        state = RunState.model_validate(report.manifest)
        host = state.machine
        lines = [
            f"- kvlab {state.kvlab_version}, git commit {state.git_commit}",
            f"- host: {host.platform}, {host.cpu}, {host.cores} cores, "
            f"{fmt((host.memory_bytes or 0) / 2**30, 1)} GiB, Python "
            f"{host.python}, torch {host.torch}",
        ]
        for i, invocation in enumerate(state.invocations):
            stopped = invocation.stopped
            lines.append(f"- {'resume' if i else 'run'} {invocation.started} → "
                         f"{'interrupted' if stopped is None else stopped}")
        for entry in state.servers:
            facts = entry.known if entry.facts else None
            argv = " ".join(facts.argv or []) if facts else "(external endpoint)"
            if facts is not None and facts.launched is False:  # kvlab run --no-launch
                argv = f"not launched by kvlab: {facts.base_url}"
            lines.append(f"- `{entry.mode}` @ {entry.capacity}: `{argv}` "
                         f"({facts.version if facts else ''}; "
                         f"log {(facts.log or facts.log_path if facts else None) or '—'}; "
                         f"{entry.started} → {entry.stopped})")
        return "\n".join(lines) + "\n"

    def html(self, report: ReportInput) -> str:
        document = escape(json.dumps(report.manifest, indent=2, default=str))
        return section(self.heading, markdown_block(self.body(report))
                       + "\n<details><summary>manifest.json</summary>"
                       f"<pre>{document}</pre></details>")
