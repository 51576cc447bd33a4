"""A run with what sits above its directory (:mod:`kvlab.rundir`): its experiment as a
model and a peer's file read as a run (runs), and the one evaluation of a run directory
from its typed view (evaluation: :func:`view_of`, :func:`evaluate_run_dir`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kvlab.store.evaluation import evaluate_run_dir, view_of
    from kvlab.store.runs import experiment_of, load_run_or_import

__all__ = ["evaluate_run_dir", "experiment_of", "load_run_or_import", "view_of"]

# Each name's module, imported on first use: importing one module of the package
# never imports its siblings (nor the libraries they need).
_HOMES = {
    "evaluate_run_dir": "kvlab.store.evaluation",
    "view_of": "kvlab.store.evaluation",
    "experiment_of": "kvlab.store.runs",
    "load_run_or_import": "kvlab.store.runs",
}


def __getattr__(name: str) -> object:
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(_HOMES[name]), name)
