"""Every run remembered: a DuckDB database of the run directories kvlab wrote.

The run directory stays the source of truth; the database is an index over many of
them that SQL can query: which runs there are (runs, modes, servers), every row with
its validation verdict (records) and what each run's evaluation said (summaries, load
points). Deleting the database loses nothing: ``kvlab history rebuild`` makes it again
from the directories it had read (kept in the runs table and in a sidecar file).

- :mod:`~kvlab.history.location`: where the database lives (``--db``, KVLAB_HISTORY,
  the XDG data directory: :func:`db_path`) and its sidecar of run paths.
- :mod:`~kvlab.history.schema`: the tables, the schema version, opening (and
  rebuilding an older layout).
- :mod:`~kvlab.history.facts`: what one run directory contributes, as plain rows.
- :mod:`~kvlab.history.ingest`: adding runs (:func:`add_to_history`, :func:`remember`),
  in bulk, idempotent and incremental; :func:`rebuild_history`.
- :mod:`~kvlab.history.queries`: the questions users ask (:func:`list_runs`,
  :func:`trend`, :func:`run_sql`, a run by ``history:E@latest``: :func:`resolve`, points
  across runs).
- :mod:`~kvlab.history.export`: records and summaries as Parquet files.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kvlab.history.ingest import add_to_history, rebuild_history, remember
    from kvlab.history.location import db_path
    from kvlab.history.queries import list_runs, resolve, run_sql, trend

__all__ = [
    "add_to_history",
    "db_path",
    "list_runs",
    "rebuild_history",
    "remember",
    "resolve",
    "run_sql",
    "trend",
]

# Each name's module, imported on first use: importing one module of the package
# never imports its siblings (nor the libraries they need).
_HOMES = {
    "add_to_history": "kvlab.history.ingest",
    "rebuild_history": "kvlab.history.ingest",
    "remember": "kvlab.history.ingest",
    "db_path": "kvlab.history.location",
    "list_runs": "kvlab.history.queries",
    "resolve": "kvlab.history.queries",
    "run_sql": "kvlab.history.queries",
    "trend": "kvlab.history.queries",
}


def __getattr__(name: str) -> object:
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(_HOMES[name]), name)
