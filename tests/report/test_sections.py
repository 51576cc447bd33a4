"""report.md and report.html render the same registered sections, in the same order."""

from __future__ import annotations

import re
from pathlib import Path

from kvlab.report.document import render_document
from kvlab.report.html import render_html
from kvlab.report.section import ReportInput
from kvlab.report.sections import SECTIONS
from kvlab.rundir import RunDir, load_run
from kvlab.store.evaluation import evaluate_run_dir
from kvlab.store.runs import experiment_of
from tests.report.synthetic_runs import two_mode_rows, write_run


def test_both_reports_show_the_same_sections_in_the_registry_order(tmp_path: Path) -> None:
    manifest = {"run_id": "r1", "order": None}
    path = write_run(tmp_path / "run", two_mode_rows(n=5, capacities=(256,)), manifest)
    run = RunDir.open(path)
    evaluation = evaluate_run_dir(run, resamples=100)
    evaluation.order = {"requested": "abba", "used": "abba", "sequence": [["slow", 256, 0, 1]]}
    evaluation.repeat_aa = "slow"
    markdown = render_document(run, experiment_of(run), evaluation)
    html = render_html(load_run(path), evaluation=evaluation)
    in_md = re.findall(r"^## (.+)$", markdown, flags=re.M)
    in_html = [t.replace("&#x27;", "'") for t in re.findall(r"<h2>(.+?)</h2>", html)]
    assert len(in_md) == len(set(in_md))
    assert [t for t in in_html if t != "Figures"] == in_md  # report.md has no images
    # the sections report.html lacked before the registry
    assert {"Run order", "A/A noise floor", "Manifest essentials"} <= set(in_md)
    # one body, two renderings: the run order's words are in both
    assert "Order used: **abba**" in markdown and "Order used: <b>abba</b>" in html
    # every registered section with something to say is in both, in registry order
    report = ReportInput.of_run(run, evaluation, experiment_of(run))
    shown = [s.title(report) for s in SECTIONS if s.markdown(report)]
    assert shown == in_md
