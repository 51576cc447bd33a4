"""Markdown helpers every report section writes with: numbers, counts, tables.

The sections themselves are registered in :mod:`kvlab.report.sections`; report.md is
put together by :mod:`kvlab.report.document`. Nothing is measured here.
"""

from __future__ import annotations

from kvlab.analysis.valid_rows import RowCount
from kvlab.markdown import table


def fmt(value: float | None, digits: int = 2) -> str:
    """A number for a table; an em dash when missing."""
    return "—" if value is None else f"{value:.{digits}f}"


def pct(value: float | None) -> str:
    return "—" if value is None else f"{value * 100:+.2f} %"


def valid_text(count: RowCount) -> str:
    """``14 of 16``: the valid rows a figure stands on, of the rows planned (else those
    measured; ``8 of 40 planned, not finished`` for a point cut short); a star when a
    point flag concerns them."""
    text = f"{count.valid} of {count.of}"
    if count.planned is not None and count.planned != count.measured:
        text += " planned"
    if not count.finished:
        text += ", not finished"
    return text + (" *" if count.flags else "")


def md_table(header: list[str], rows: list[list[str]]) -> list[str]:
    """A Markdown pipe table, as lines, every cell escaped (:func:`kvlab.markdown.cell`)."""
    return table(header, rows)
