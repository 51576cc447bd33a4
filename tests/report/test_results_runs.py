"""The results page's run lines: an evaluation.json that does not read is a line saying
which file and why, never a traceback nor a silent gap."""

from __future__ import annotations

import json
from pathlib import Path

from kvlab.report.results_page import results_page


def test_an_evaluation_json_that_does_not_read_says_which_and_why(tmp_path: Path) -> None:
    run = tmp_path / "runs" / "quickstart-20260101-100000"
    run.mkdir(parents=True)
    (run / "evaluation.json").write_text(json.dumps(
        {"schema_version": 2, "experiment": "quickstart", "summaries": [{"mode": "a"}]}))
    page = results_page(tmp_path)
    [line] = [h for h in page.headlines if h.step == run.name]
    assert line.source == "runs/quickstart-20260101-100000/evaluation.json"
    assert line.text.startswith(f"{line.source}: not an evaluation.json this kvlab reads")
    assert "KeyError: 'capacity'" in line.text and "rerun kvlab evaluate" in line.text
    quickstart = next(h for h in page.headlines if "(quickstart)" in h.step)
    assert "step not run" in quickstart.text
