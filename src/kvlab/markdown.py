"""Markdown table cells: the one escape every Markdown table of kvlab goes through.

A cell's text may hold anything a run recorded (an error message, a server's answer):
a ``|`` would end the cell and a newline the table. :func:`cell` escapes both, so a
table keeps its columns whatever its cells say; :func:`row` and :func:`table` build
pipe tables from cells through it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence


def cell(value: object) -> str:
    """``value`` as the text of one Markdown table cell: ``|`` escaped as ``\\|``, a
    newline (``\\r\\n``, ``\\r`` or ``\\n``) written as ``<br>``."""
    text = str(value).replace("\r\n", "\n").replace("\r", "\n")
    return text.replace("\\|", "|").replace("|", "\\|").replace("\n", "<br>")


def row(cells: Iterable[object]) -> str:
    """One pipe-table line of escaped cells."""
    return "| " + " | ".join(cell(c) for c in cells) + " |"


def table(header: Sequence[object], rows: Iterable[Iterable[object]]) -> list[str]:
    """A Markdown pipe table, as lines: the header, its rule, then one line per row."""
    return [row(header), "|" + "---|" * len(header), *(row(r) for r in rows)]
