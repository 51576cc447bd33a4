"""Reports of a run: report.md and report.html, CSV files and plots, rebuilt from the run
directory; and the one page of results across steps (``kvlab summary``).

Rendering only: a number shown comes from the run's
:class:`~kvlab.analysis.Evaluation`. Each part of both reports is a :class:`Section`
registered in :data:`SECTIONS`, given a :class:`ReportInput`;
:func:`render_markdown`/:func:`write_document` make report.md, :func:`write_html`
report.html, :func:`results_page` the results page.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kvlab.report.document import render_markdown, write_document
    from kvlab.report.html import write_html
    from kvlab.report.results_page import results_page
    from kvlab.report.section import ReportInput, Section
    from kvlab.report.sections import SECTIONS

__all__ = [
    "SECTIONS",
    "ReportInput",
    "Section",
    "render_markdown",
    "results_page",
    "write_document",
    "write_html",
]

# Each name's module, imported on first use: importing one module of the package
# never imports its siblings (nor the libraries they need).
_HOMES = {
    "render_markdown": "kvlab.report.document",
    "write_document": "kvlab.report.document",
    "write_html": "kvlab.report.html",
    "results_page": "kvlab.report.results_page",
    "ReportInput": "kvlab.report.section",
    "Section": "kvlab.report.section",
    "SECTIONS": "kvlab.report.sections",
}


def __getattr__(name: str) -> object:
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(_HOMES[name]), name)
