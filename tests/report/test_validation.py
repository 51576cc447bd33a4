"""The Validation section: refused rows counted per load point, and error texts that
cannot break a Markdown table."""

from __future__ import annotations

import re

from kvlab.analysis.evaluate import evaluate
from kvlab.analysis.run_view import EvaluateOptions, RunView
from kvlab.report.section import ReportInput
from kvlab.report.validation import Validation
from kvlab.rundir import Outcome
from tests.rows import row


def _refused_at(load: str, position: int) -> object:
    return row(load=load, position=position, output_tokens=12)  # 12 of 64: refused


def test_the_same_query_refused_at_two_load_points_counts_twice() -> None:
    records = [_refused_at("c=1", 0), _refused_at("c=2", 1),
               row(load="c=1", query_id="q02", position=2),
               row(load="c=2", query_id="q02", position=3)]
    evaluation = evaluate(RunView(records), options=EvaluateOptions(resamples=10))  # type: ignore[arg-type]
    html = Validation().html(ReportInput(evaluation, None))
    assert "2 rows refused" in html, html
    assert "Refused rows per load point: c=1 × 1, c=2 × 1" in html


def test_a_pipe_or_a_newline_in_an_error_keeps_the_table_whole() -> None:
    records = [row(position=0),
               row(query_id="q02", position=1, outcome=Outcome.HTTP_ERROR, http_status=500,
                   error="bad | request\nsecond line", output_tokens=None,
                   t_first_content=None, t_last_content=None, chunk_ns=[])]
    evaluation = evaluate(RunView(records), options=EvaluateOptions(resamples=10))
    text = Validation().body(ReportInput(evaluation, None))
    table = [line for line in text.splitlines() if line.startswith("|")]
    header_cells = len(re.split(r"(?<!\\)\|", table[0]))
    assert len(table) == 3, text  # header, rule, the one refused row: no line broken off
    assert all(len(re.split(r"(?<!\\)\|", line)) == header_cells for line in table), text
    assert "bad \\| request<br>second line" in table[2]
