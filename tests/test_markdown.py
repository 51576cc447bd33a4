"""kvlab.markdown: the one escape of a Markdown table cell."""

from __future__ import annotations

from kvlab.markdown import cell, row, table


def test_a_cell_escapes_pipes_and_newlines_once() -> None:
    assert cell("a | b\r\nc\rd\ne") == "a \\| b<br>c<br>d<br>e"
    assert cell("already \\| escaped") == "already \\| escaped"  # not twice
    assert cell(3) == "3"


def test_rows_and_tables_keep_their_columns() -> None:
    assert row(["x|y", 1]) == "| x\\|y | 1 |"
    assert table(["h1", "h2"], [["a", "b\nc"]]) == ["| h1 | h2 |", "|---|---|",
                                                     "| a | b<br>c |"]
