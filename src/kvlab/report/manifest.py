"""The "Manifest essentials" section: the kvlab version and commit, the host, the
sessions and each server's command line (report.html adds the whole manifest.json)."""

from __future__ import annotations

import json
from html import escape

from kvlab.report.html_blocks import markdown_block, section
from kvlab.report.markdown import fmt
from kvlab.report.section import ReportInput, Section


class ManifestEssentials(Section):
    """What ran where: versions, host, sessions and servers."""

    heading = "Manifest essentials"

    def body(self, report: ReportInput) -> str:
        manifest = report.manifest
        host = manifest.get("host", {})
        lines = [
            f"- kvlab {manifest.get('kvlab_version')}, git commit {manifest.get('git_commit')}",
            f"- host: {host.get('platform')}, {host.get('cpu')}, {host.get('cores')} cores, "
            f"{fmt((host.get('memory_bytes') or 0) / 2**30, 1)} GiB, Python "
            f"{host.get('python')}, torch {host.get('torch')}",
        ]
        for session in manifest.get("sessions", []):
            lines.append(f"- session {session.get('started')} → "
                         f"{session.get('stopped', 'interrupted')}")
        for entry in manifest.get("servers", []):
            facts = entry.get("facts") or {}
            argv = " ".join(facts.get("argv", [])) if facts else "(external endpoint)"
            if facts.get("launched") is False:  # kvlab run --no-launch
                argv = f"not launched by kvlab: {facts.get('base_url')}"
            lines.append(f"- `{entry.get('mode')}` @ {entry.get('capacity')}: `{argv}` "
                         f"({facts.get('version', '')}; "
                         f"log {facts.get('log') or facts.get('log_path') or '—'}; "
                         f"{entry.get('started')} → {entry.get('stopped')})")
        return "\n".join(lines) + "\n"

    def html(self, report: ReportInput) -> str:
        document = escape(json.dumps(report.manifest, indent=2, default=str))
        return section(self.heading, markdown_block(self.body(report))
                       + "\n<details><summary>manifest.json</summary>"
                       f"<pre>{document}</pre></details>")
