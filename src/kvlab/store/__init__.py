"""A run directory on disk: its typed state, the one reader, the one writer, its evaluation.

:class:`RunDir` (:func:`load_run`, :func:`load_run_or_import` for a peer's file) reads
a run directory; :class:`RunState` is ``manifest.json``; :class:`RunWriter` appends
records and saves the state off the event loop; :func:`evaluate_run_dir` is the one
evaluation of a run directory, from its typed view (:func:`view_of`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kvlab.store.evaluation import evaluate_run_dir, view_of
    from kvlab.store.rundir import RunDir, load_run, load_run_or_import
    from kvlab.store.state import RunState
    from kvlab.store.writer import RunWriter

__all__ = [
    "RunDir",
    "RunState",
    "RunWriter",
    "evaluate_run_dir",
    "load_run",
    "load_run_or_import",
    "view_of",
]

# Each name's module, imported on first use: importing one module of the package
# never imports its siblings (nor the libraries they need).
_HOMES = {
    "evaluate_run_dir": "kvlab.store.evaluation",
    "view_of": "kvlab.store.evaluation",
    "RunDir": "kvlab.store.rundir",
    "load_run": "kvlab.store.rundir",
    "load_run_or_import": "kvlab.store.rundir",
    "RunState": "kvlab.store.state",
    "RunWriter": "kvlab.store.writer",
}


def __getattr__(name: str) -> object:
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(_HOMES[name]), name)
