"""Parquet files of runs: records (with their verdicts), summaries, load points, runs.

The rows are the history's, so an exported run reads the same as in ``kvlab history
sql``: a run directory (or a peer's file) is added to an in-memory database by the
same ingest, then each table is copied out by DuckDB; a history query's runs are
copied from the history database itself. The files read back with pyarrow, pandas,
polars and DuckDB alike.

Public API::

    written = export_run(Path("runs/x-20250101-120000"), Path("out"))
    written = export_history(db_path(), "SELECT run_id FROM runs WHERE experiment = 'x'",
                             Path("out"))
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from kvlab.errors import ConfigError
from kvlab.history.ingest import add_runs
from kvlab.history.queries import read_only
from kvlab.history.schema import connect, create

if TYPE_CHECKING:
    import duckdb

EXPORTED = ("records", "summaries", "load_points", "runs")


def _copy(conn: duckdb.DuckDBPyConnection, run_ids: list[str], out: Path) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for table in EXPORTED:
        path = out / f"{table}.parquet"
        target = "'" + str(path).replace("'", "''") + "'"
        order = "run_id, line" if table == "records" else "run_id"
        conn.execute(f'COPY (SELECT * FROM "{table}" WHERE list_contains(?, run_id) '
                     f"ORDER BY {order}) TO {target} (FORMAT parquet)", [run_ids])
        written.append(path)
    return written


def export_run(run: Path, out: Path) -> list[Path]:
    """Write ``out/{records,summaries,load_points,runs}.parquet`` of one run directory
    or peer file; ConfigError (one line) when it is not a run."""
    import duckdb

    conn = duckdb.connect(":memory:")
    try:
        conn.execute("SET enable_progress_bar = false")
        create(conn)
        result = add_runs(conn, [run])
        if result.refused:
            raise ConfigError(result.refused[0])
        return _copy(conn, result.added, out)
    finally:
        conn.close()


def export_history(db: Path, query: str, out: Path) -> list[Path]:
    """The same files for the runs a history query selects (its first column: run ids);
    ConfigError when it selects none."""
    import duckdb

    selecting = read_only(db)
    try:
        ids = [str(row[0]) for row in selecting.execute(query).fetchall()]
    except duckdb.Error as exc:
        raise ConfigError(f"export query: {' '.join(str(exc).split())}") from None
    finally:
        selecting.close()
    if not ids:
        raise ConfigError(f"export query selects no run: {query}")
    conn = connect(db, read_only=True)
    try:
        return _copy(conn, ids, out)
    finally:
        conn.close()
