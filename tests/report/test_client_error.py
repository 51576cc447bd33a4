"""The "Client error" section: each point's budget beside its TTFT, and a server that
closed after each answer named with the set-up every request paid."""

from __future__ import annotations

from kvlab.analysis.evaluate import evaluate
from kvlab.analysis.run_view import EvaluateOptions, RunView
from kvlab.report.client_error import section_body
from tests.analysis.test_client_error import _point


def test_the_section_shows_the_budget_and_names_a_server_closing_after_each_answer() -> None:
    evaluation = evaluate(RunView(_point("c=1", 4, reused=False, setup_us=300)),
                          options=EvaluateOptions(resamples=10))
    text = section_body(evaluation.client_errors)
    row = next(line for line in text.splitlines() if line.startswith("| a |"))
    assert "| c=1 | 4 | 100.000 | 0.050 | 0.020 | 0.030 | 0.300 | 0.400 | 0.4% |" in row
    assert "within 5%" in row
    assert ("the server closed its connection after each answer, so every request paid "
            "the connection set-up (median 0.300 ms each, apart from TTFT)") in text


def test_no_load_point_no_section() -> None:
    assert section_body([]) == ""
