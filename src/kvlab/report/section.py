"""A section of a run's reports, and what every section renders from.

report.md and report.html render the same registered sections
(:mod:`kvlab.report.sections`), in the same order. A :class:`Section` writes its body
once, in Markdown: report.md shows it under ``## title``, report.html draws it with
:func:`~kvlab.report.html_blocks.markdown_block`. A section whose HTML says more than
its Markdown (coloured verdicts, figures) overrides :meth:`Section.html`; an empty body
leaves the section out of both. Nothing is computed here: every number comes from the
run's :class:`~kvlab.analysis.evaluate.Evaluation` or its directory.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import ClassVar, TypeVar

from kvlab.analysis.check import Check, Finding
from kvlab.analysis.evaluate import Evaluation
from kvlab.experiment import Experiment
from kvlab.report.html_blocks import markdown_block, section
from kvlab.rundir import GaugeSample, Record, RunDir, RunState


@dataclass(frozen=True)
class ReportInput:
    """What a section renders from: a run's evaluation and what its directory holds.

    ``experiment`` None: the run's experiment file is unknown (report.html still
    renders; report.md needs it); ``records``: every record, warm-ups included."""

    evaluation: Evaluation
    experiment: Experiment | None
    state: RunState = field(default_factory=RunState)  # manifest.json
    records: Sequence[Record] = ()
    gauges: Sequence[GaugeSample] = ()

    @classmethod
    def of_run(cls, run: RunDir, evaluation: Evaluation,
               experiment: Experiment | None) -> ReportInput:
        """The input of a run directory."""
        return cls(evaluation, experiment, run.state, run.records, run.gauges)


T = TypeVar("T", bound=Finding)


def checked(report: ReportInput, check: Check[T], render: Callable[[list[T]], str]) -> str:
    """The body of a registered check's section: ``render`` of its findings, then one
    line per part of the run it could not measure (``not measured: ...``), so a check
    that cannot run on a server kind says so instead of leaving the section out."""
    body = render(report.evaluation.found(check))
    lines = report.evaluation.not_measured.get(check.key, [])
    if not lines:
        return body
    block = "\n".join(f"- {line}" for line in lines) + "\n"
    return f"{body}\n{block}" if body else block


class Section:
    """One section of both reports; see the module's docstring."""

    heading: ClassVar[str] = ""

    def title(self, report: ReportInput) -> str:
        """Its title (the same in both reports)."""
        return self.heading

    def body(self, report: ReportInput) -> str:
        """Its Markdown under the title; "" leaves the section out."""
        raise NotImplementedError

    def markdown(self, report: ReportInput) -> str:
        """Its text in report.md."""
        body = self.body(report)
        return f"\n## {self.title(report)}\n\n{body}" if body else ""

    def html(self, report: ReportInput) -> str:
        """Its HTML in report.html."""
        body = self.body(report)
        return section(self.title(report), markdown_block(body)) if body else ""
