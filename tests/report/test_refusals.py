"""The refusals section, in both reports."""

from __future__ import annotations

from pathlib import Path

from kvlab.bench.run.runner import evaluate_run
from kvlab.report.html import write_html
from tests.report.synthetic_runs import make_row, two_mode_rows, write_run


def test_refusals_by_reason_are_in_both_reports(tmp_path: Path) -> None:
    rows = two_mode_rows(n=4, capacities=(256,))
    rows.append(make_row("fast", 256, 9, prefill=10, decode=20, output_tokens=5))
    run = write_run(tmp_path / "run", rows)
    evaluation = evaluate_run(run)
    html = write_html(run, evaluation=evaluation).read_text(encoding="utf-8")
    report = (run / "report.md").read_text(encoding="utf-8")
    assert "## Refusals by reason\n\n| reason | rows |\n|---|---|\n| output_tokens | 1 |" \
        in report
    assert "<h2>Refusals by reason</h2>" in html and "<td>1</td>" in html
    clean = write_run(tmp_path / "clean", two_mode_rows(n=4, capacities=(256,)))
    evaluate_run(clean)
    assert "Refusals by reason" not in (clean / "report.md").read_text(encoding="utf-8")
