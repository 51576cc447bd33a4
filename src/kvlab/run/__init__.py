"""Running an experiment, on top of every other layer.

The planner makes an experiment and the command line into a :class:`RunPlan` of typed
steps (:class:`RunRequest`, :func:`plan_new`, :func:`plan_resume`; ``--dry-run`` prints
it); the executor walks it through a load driver into the run's journal (each
invocation, the run and every resume, entered in the manifest); the runner is the
public entry point (:func:`run_experiment`, :func:`prepare_run`, :func:`measure_mode`,
:func:`evaluate_run`); ``kvlab ab`` measures A against B until decided
(:func:`run_ab`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kvlab.run.ab import AbRequest, AbResult, run_ab
    from kvlab.run.planner import RunRequest, plan_new, plan_resume
    from kvlab.run.runner import (
        RunOutput,
        RunResult,
        evaluate_run,
        measure_mode,
        prepare_run,
        run_experiment,
    )
    from kvlab.run.runplan import RunPlan

__all__ = [
    "AbRequest",
    "AbResult",
    "RunOutput",
    "RunPlan",
    "RunRequest",
    "RunResult",
    "evaluate_run",
    "measure_mode",
    "plan_new",
    "plan_resume",
    "prepare_run",
    "run_ab",
    "run_experiment",
]

# Each name's module, imported on first use: importing one module of the package
# never imports its siblings (nor the libraries they need).
_HOMES = {
    "AbRequest": "kvlab.run.ab",
    "AbResult": "kvlab.run.ab",
    "run_ab": "kvlab.run.ab",
    "RunRequest": "kvlab.run.planner",
    "plan_new": "kvlab.run.planner",
    "plan_resume": "kvlab.run.planner",
    "RunOutput": "kvlab.run.runner",
    "RunResult": "kvlab.run.runner",
    "evaluate_run": "kvlab.run.runner",
    "measure_mode": "kvlab.run.runner",
    "prepare_run": "kvlab.run.runner",
    "run_experiment": "kvlab.run.runner",
    "RunPlan": "kvlab.run.runplan",
}


def __getattr__(name: str) -> object:
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(_HOMES[name]), name)
