"""Judging the numbers: validation, the valid rows every aggregate takes, metrics,
statistics, the one summary view and the evaluation of a run.

:func:`evaluate` takes the typed view of a run (:class:`RunView`, with
:class:`EvaluateOptions`) and returns its :class:`Evaluation` (evaluation.json). Every
figure stands on :class:`ValidRows` (made only by :func:`judge`); each summary metric is
one :class:`Metric` in :data:`SUMMARY_METRICS`; each analysis beyond the core is a
:class:`Check` registered in :data:`CHECKS`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kvlab.analysis.check import Check, Finding, Judged
    from kvlab.analysis.checks import CHECKS
    from kvlab.analysis.evaluate import SCHEMA_VERSION, Evaluation, evaluate, explain_ratio
    from kvlab.analysis.metric import Metric
    from kvlab.analysis.run_view import EvaluateOptions, RunView
    from kvlab.analysis.summary_metrics import SUMMARY_METRICS
    from kvlab.analysis.valid_rows import ValidRows, judge

__all__ = [
    "CHECKS",
    "SCHEMA_VERSION",
    "SUMMARY_METRICS",
    "Check",
    "EvaluateOptions",
    "Evaluation",
    "Finding",
    "Judged",
    "Metric",
    "RunView",
    "ValidRows",
    "evaluate",
    "explain_ratio",
    "judge",
]

# Each name's module, imported on first use: importing one module of the package
# never imports its siblings (nor the libraries they need).
_HOMES = {
    "Check": "kvlab.analysis.check",
    "Finding": "kvlab.analysis.check",
    "Judged": "kvlab.analysis.check",
    "CHECKS": "kvlab.analysis.checks",
    "SCHEMA_VERSION": "kvlab.analysis.evaluate",
    "Evaluation": "kvlab.analysis.evaluate",
    "evaluate": "kvlab.analysis.evaluate",
    "explain_ratio": "kvlab.analysis.evaluate",
    "Metric": "kvlab.analysis.metric",
    "EvaluateOptions": "kvlab.analysis.run_view",
    "RunView": "kvlab.analysis.run_view",
    "SUMMARY_METRICS": "kvlab.analysis.summary_metrics",
    "ValidRows": "kvlab.analysis.valid_rows",
    "judge": "kvlab.analysis.valid_rows",
}


def __getattr__(name: str) -> object:
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(_HOMES[name]), name)
