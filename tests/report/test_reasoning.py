"""The "Reasoning streams" section of report.md and report.html."""

from __future__ import annotations

from kvlab.analysis.reasoning import reasoning_cells
from kvlab.analysis.valid_rows import judge
from kvlab.report.reasoning import TITLE, reasoning_markdown
from tests.analysis.test_reasoning import thinking


def test_the_section_shows_both_times_and_names_the_disagreeing_rows() -> None:
    text = reasoning_markdown(reasoning_cells(judge([thinking("q1"), thinking("q2", usage=0)])))
    assert text.startswith(f"\n## {TITLE}\n")
    row = next(line for line in text.splitlines() if line.startswith("| a |"))
    assert row == ("| a | 512 | sequential | 2 of 2 | 2 | 100.00 / 100.00 | 140.00 / 140.00 "
                   "| 4.0 | 2.0 | 1 |")
    assert "a @ 512 sequential: 1 rows" in text


def test_nothing_reasoned_no_section() -> None:
    assert reasoning_markdown([]) == ""
