"""e2e per output token, declared once, in every view of a run."""

from __future__ import annotations

import csv
import json
from pathlib import Path

from kvlab.bench.run.runner import evaluate_run
from kvlab.report.csv_export import write_csvs
from kvlab.report.html import write_html
from tests.report.synthetic_runs import two_mode_rows, write_run


def test_the_new_metric_is_in_every_view(tmp_path: Path) -> None:
    run = write_run(tmp_path / "run", two_mode_rows(n=4, capacities=(256,)))
    evaluation = evaluate_run(run)
    write_csvs(run, evaluation=evaluation)
    html = write_html(run, evaluation=evaluation).read_text(encoding="utf-8")
    doc = json.loads((run / "evaluation.json").read_text(encoding="utf-8"))
    report = (run / "report.md").read_text(encoding="utf-8")
    summary = doc["summaries"][0]
    # every row: 8 tokens; e2e = prefill + decode + 2 ms overhead
    assert summary["mean_e2e_per_token_ms"] == summary["mean_ms"] / 8
    assert "e2e_per_token_ms" in doc["metric_definitions"]
    assert "| `e2e_per_token_ms` |" in report and "e2e ms/tok" in report
    assert "<th>e2e ms/tok</th>" in html and "e2e_per_token_ms" in html
    with (run / "summaries.csv").open(encoding="utf-8") as handle:
        row = next(csv.DictReader(handle))
    assert float(row["e2e_per_token_ms_mean"]) == summary["mean_e2e_per_token_ms"]
    with (run / "records.csv").open(encoding="utf-8") as handle:
        assert "e2e_per_token_ms" in next(csv.reader(handle))
