"""A registered check: one analysis of a run beside the core summaries.

A :class:`Check` reads the run's :class:`~kvlab.analysis.run_view.RunView` and what
the gate made of it (:class:`Judged`: valid rows, summaries, load points, server
counters), and adds one list to the :class:`~kvlab.analysis.evaluate.Evaluation`
under its ``key`` (evaluation.json keeps it under the same name). A run the check
applies to but cannot measure (its server kind exposes nothing to read) gets a line
saying so, :meth:`Check.not_measured`, that the check's report section prints: a
check never disappears without a word. The registry is :mod:`kvlab.analysis.checks`;
the sections that render the lists are registered in :mod:`kvlab.report.sections`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from kvlab.analysis.load import LoadSummary
from kvlab.analysis.run_view import EvaluateOptions, RunView
from kvlab.analysis.server_counters import PointCounters
from kvlab.analysis.summaries import Summary
from kvlab.analysis.valid_rows import ValidRows

__all__ = ["Check", "Finding", "Judged", "not_measured_line"]


class Finding(Protocol):
    """One item a check adds: what evaluation.json keeps of it."""

    def to_dict(self) -> dict[str, Any]: ...


T_co = TypeVar("T_co", bound=Finding, covariant=True)


@dataclass(frozen=True)
class Judged:
    """What every check reads: the run (``view``), the options it is judged with, and
    the gate's outcome (valid rows, summaries, load points, server counters per point)."""

    view: RunView
    options: EvaluateOptions
    valid: ValidRows
    summaries: Sequence[Summary]
    loads: Sequence[LoadSummary]
    counters: Sequence[PointCounters]


class Check(Protocol[T_co]):
    """One analysis: ``key`` names its list in the Evaluation and evaluation.json."""

    @property
    def key(self) -> str: ...

    def run(self, judged: Judged) -> Sequence[T_co]:
        """Its findings (empty: nothing of the run it applies to)."""
        ...

    def not_measured(self, judged: Judged) -> list[str]:
        """One line per part of the run the check applies to but could not measure."""
        ...


def not_measured_line(kind: str | None, lacks: str, where: str) -> str:
    """``not measured: llama-server exposes no X (where)``; ``kind`` None: unknown."""
    return f"not measured: {kind or 'the server'} exposes no {lacks} ({where})"
