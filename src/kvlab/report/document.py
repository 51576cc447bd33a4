"""report.md of a run, whole: its title, then every registered section in order
(:mod:`kvlab.report.sections`), rendered from its Evaluation. Nothing is computed here.
"""

from __future__ import annotations

from pathlib import Path

from kvlab.analysis.evaluate import Evaluation
from kvlab.experiment import Experiment
from kvlab.report.section import ReportInput
from kvlab.report.sections import SECTIONS
from kvlab.rundir import RunDir, RunState


def render_markdown(report: ReportInput) -> str:
    """report.md of ``report`` (its experiment is needed: the title names it)."""
    experiment = report.experiment
    if experiment is None:
        raise ValueError("report.md needs the run's experiment")
    head = f"# kvlab run `{report.evaluation.run_id}` — {experiment.name}\n"
    if experiment.description:
        head += f"\n{experiment.description}\n"
    return head + "".join(section.markdown(report) for section in SECTIONS)


def render_report(evaluation: Evaluation, experiment: Experiment, state: RunState) -> str:
    """report.md from an evaluation and a run's state (manifest.json) alone (no run
    directory: the sections that read records or gauges find none)."""
    return render_markdown(ReportInput(evaluation, experiment, state))


def render_document(run: RunDir, experiment: Experiment, evaluation: Evaluation) -> str:
    """report.md of a run directory."""
    return render_markdown(ReportInput.of_run(run, evaluation, experiment))


def write_document(run: RunDir, experiment: Experiment, evaluation: Evaluation) -> Path:
    """Write report.md into the run directory; return its path."""
    return run.write_report(render_document(run, experiment, evaluation))
