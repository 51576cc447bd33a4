"""The "Manifest essentials" section: each invocation of the runner by its name (the
run, then each resume), from a manifest of this kvlab or of one before the name."""

from __future__ import annotations

from typing import Any, cast

from kvlab.analysis.evaluate import Evaluation
from kvlab.report.manifest import ManifestEssentials
from kvlab.report.section import ReportInput

RUN = {"started": "2026-01-01T12:00:00+00:00", "stopped": "2026-01-01T12:01:00+00:00"}
RESUME = {"started": "2026-01-01T13:00:00+00:00"}  # interrupted: never stopped


def body(manifest: dict[str, Any]) -> str:
    # the section reads the manifest alone
    return ManifestEssentials().body(ReportInput(cast(Evaluation, None), None, manifest))


def test_the_run_and_each_resume_are_named() -> None:
    text = body({"invocations": [RUN, RESUME]})
    assert "- run 2026-01-01T12:00:00+00:00 → 2026-01-01T12:01:00+00:00" in text
    assert "- resume 2026-01-01T13:00:00+00:00 → interrupted" in text
    assert "session" not in text


def test_a_manifest_that_calls_them_sessions_reads_the_same() -> None:
    assert body({"sessions": [RUN, RESUME]}) == body({"invocations": [RUN, RESUME]})
