"""report.html: one self-contained file (inline CSS, plots as base64 PNG, no URL).

It renders the same registered sections as report.md (:mod:`kvlab.report.sections`),
in the same order, each as its HTML; every number comes from the run's
:class:`~kvlab.analysis.evaluate.Evaluation`, the same summaries and comparisons
evaluation.json and report.md hold.
"""

from __future__ import annotations

from html import escape
from pathlib import Path

import kvlab
from kvlab.analysis.evaluate import Evaluation
from kvlab.report.html_blocks import CSS
from kvlab.report.section import ReportInput
from kvlab.report.sections import SECTIONS
from kvlab.rundir import RunDir, load_run
from kvlab.store.evaluation import evaluate_run_dir
from kvlab.store.runs import known_experiment


def render_html(run: RunDir, *, resamples: int = 2000,
                evaluation: Evaluation | None = None) -> str:
    """The whole report as one HTML document (no external resource), rendered from
    ``evaluation``: the run's (:func:`~kvlab.store.evaluation.evaluate_run_dir`,
    the one evaluation of a run directory, when None)."""
    if evaluation is None:
        evaluation = evaluate_run_dir(run, resamples=resamples)
    report = ReportInput.of_run(run, evaluation, known_experiment(run))
    parts = [f"<h1>kvlab run <code>{escape(run.run_id)}</code></h1>",
             f"<p class=muted>Rebuilt from {escape(str(run.path))} by kvlab "
             f"{escape(kvlab.__version__)}.</p>"]
    parts += [html for section in SECTIONS if (html := section.html(report))]
    body = "\n".join(parts)
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f"<title>kvlab report {escape(run.run_id)}</title><style>{CSS}</style></head>"
            f"<body>\n{body}\n</body></html>\n")


def write_html(run_dir: Path | str, *, resamples: int = 2000,
               evaluation: Evaluation | None = None) -> Path:
    """Write ``report.html`` into the run directory; return its path. ``evaluation``:
    the run's, when the caller has it (else :func:`render_html` evaluates the run)."""
    run = load_run(run_dir)
    return run.write_html(render_html(run, resamples=resamples, evaluation=evaluation))


__all__ = ["CSS", "render_html", "write_html"]
