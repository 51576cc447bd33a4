"""Adding runs to the history: idempotent, incremental and in bulk.

A run is keyed by its run id. Adding a path whose files have not changed since it was
added (same fingerprint: sizes and modification times) reads nothing; a run resumed or
re-evaluated since is replaced whole. Runs are added in batches, each one transaction:
the small tables from Arrow tables, the records of every run of the batch by one
DuckDB ``read_json`` over their records files, joined with each run's refused rows for
the verdict. Nothing is inserted row by row.

Public API::

    result = add_to_history([Path("runs")], db_path())       # folders of runs, runs, peer files
    result = rebuild_history(db_path())                       # from the paths it had read
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kvlab.errors import ConfigError, KvlabError
from kvlab.history import floors
from kvlab.history.facts import RunFacts, fingerprint, run_facts
from kvlab.history.location import append_sidecar, db_path, history_off, read_sidecar
from kvlab.history.schema import (
    RECORD_COLUMNS,
    RECORD_METRICS,
    RUN_TABLES,
    SCHEMA_VERSION,
    TABLES,
    connect,
    create,
    drop_all,
    recorded_paths,
    version,
)
from kvlab.rundir import RunDir
from kvlab.store.runs import load_run_or_import

if TYPE_CHECKING:
    import duckdb
    import pyarrow as pa

BATCH_RUNS = 100  # runs per transaction (and per read_json of their records)


@dataclass
class AddResult:
    """What an add did: run ids added (new or replaced), how many were unchanged, the
    paths refused (one line each) and the records inserted."""

    added: list[str] = field(default_factory=list)
    replaced: list[str] = field(default_factory=list)
    unchanged: int = 0
    refused: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    records: int = 0

    def line(self) -> str:
        """One line: ``3 runs added (1 replaced), 2 unchanged, 4,000 records``."""
        text = (f"{len(self.added)} run{'s' if len(self.added) != 1 else ''} added"
                + (f" ({len(self.replaced)} replaced)" if self.replaced else "")
                + f", {self.unchanged} unchanged, {self.records:,} records")
        return text + (f"; {len(self.refused)} refused" if self.refused else "")

    def to_dict(self) -> dict[str, Any]:
        return {"added": self.added, "replaced": self.replaced, "unchanged": self.unchanged,
                "refused": self.refused, "warnings": self.warnings, "records": self.records}


def is_run_dir(path: Path) -> bool:
    return RunDir(path).records_path.is_file()


def discover(paths: Iterable[Path | str]) -> tuple[list[Path], list[str]]:
    """The runs under ``paths``: a run directory, a folder holding run directories (at
    any depth), or a peer's result file. Returns them (absolute, each once) and one line
    per path that holds none."""
    found: dict[Path, None] = {}
    refused = []
    for given in paths:
        path = Path(given).expanduser().resolve()
        if path.is_file() or (path.is_dir() and is_run_dir(path)):
            found[path] = None
        elif path.is_dir():
            runs = RunDir.under(path)
            if not runs:
                name = RunDir(path).records_path.name
                refused.append(f"{given}: no run directory in it (none holds {name})")
            found.update(dict.fromkeys(runs))
        else:
            refused.append(f"{given}: no such file or directory")
    return list(found), refused


def _arrow_type(sql: str) -> pa.DataType:
    import pyarrow as pa

    base = sql.split()[0]
    if base.endswith("[]"):
        return pa.list_(_arrow_type(base[:-2]))
    return {"VARCHAR": pa.string(), "JSON": pa.string(), "INTEGER": pa.int64(),
            "BIGINT": pa.int64(), "DOUBLE": pa.float64(), "BOOLEAN": pa.bool_(),
            "TIMESTAMPTZ": pa.timestamp("us", tz="UTC")}[base]


def arrow_table(table: str, rows: Sequence[dict[str, Any]]) -> pa.Table:
    """``rows`` as an Arrow table with the columns and types of ``table``."""
    import pyarrow as pa

    columns = TABLES[table]
    schema = pa.schema([(name, _arrow_type(kind)) for name, kind in columns.items()])
    return pa.Table.from_pylist([{k: r.get(k) for k in columns} for r in rows], schema=schema)


def _sql_text(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def _records_sql(files: Sequence[Path]) -> tuple[str, str]:
    """Two statements: the records of every file read at once into a temporary table
    (with each value's ordinal), then inserted with their run id, line, verdict and
    metrics. ``batch_files`` maps each file to its run id; ``batch_refusals`` holds the
    refused rows. A torn last line (an interrupted write) reads as nulls and is left
    out. The windows (line numbers, the latest row of each key) read narrow columns
    only, then join back: sorting every column of the rows costs twice as much."""
    spec = "{" + ", ".join(f"{_sql_text(k)}: {_sql_text(v)}"
                           for k, v in RECORD_COLUMNS.items()) + "}"
    names = "[" + ", ".join(_sql_text(str(f)) for f in files) + "]"
    metrics = ", ".join(f"{sql} AS {name}" for name, sql in RECORD_METRICS.items())
    read = f"""
        CREATE OR REPLACE TEMP TABLE batch_raw AS
        SELECT * FROM read_json({names}, format = 'newline_delimited', columns = {spec},
                                filename = true, ignore_errors = true) WITH ORDINALITY"""
    insert = f"""
        INSERT INTO records BY NAME
        WITH marks AS (
            SELECT filename, ordinality, f.run_id AS hid,
                   ordinality - min(ordinality) OVER (PARTITION BY filename) + 1 AS line,
                   ordinality = max(ordinality) OVER (PARTITION BY filename, mode, capacity,
                                query_id, repetition, warmup, load) AS latest
            FROM batch_raw JOIN batch_files f USING (filename) WHERE t_sent IS NOT NULL
        )
        SELECT r.* EXCLUDE (run_id, filename, ordinality), m.hid AS run_id, m.line,
               CASE WHEN r.warmup THEN 'warmup' WHEN NOT m.latest THEN 'superseded'
                    WHEN v.reasons IS NULL THEN 'valid' ELSE v.reasons[1] END AS verdict,
               CASE WHEN r.warmup OR NOT m.latest OR v.reasons IS NULL THEN []::VARCHAR[]
                    ELSE v.reasons END AS reasons,
               {metrics}
        FROM batch_raw r JOIN marks m USING (filename, ordinality)
        LEFT JOIN batch_refusals v
          ON v.run_id = m.hid AND v.mode = r.mode AND v.capacity = r.capacity
         AND v.query_id = r.query_id AND v.repetition = r.repetition
         AND v.load IS NOT DISTINCT FROM r.load AND NOT r.warmup"""
    return read, insert


# Lines of each file that read as nulls, but for a torn last line.
UNREADABLE = """
    SELECT f.run_id, count(*) FILTER (WHERE r.t_sent IS NULL AND r.ordinality < r.last)
    FROM (SELECT *, max(ordinality) OVER (PARTITION BY filename) AS last FROM batch_raw) r
    JOIN batch_files f USING (filename)
    GROUP BY f.run_id
    HAVING count(*) FILTER (WHERE r.t_sent IS NULL AND r.ordinality < r.last) > 0
    ORDER BY f.run_id"""


def _insert_batch(conn: duckdb.DuckDBPyConnection,
                  batch: Sequence[RunFacts]) -> tuple[int, list[str]]:
    """Replace the batch's runs in one transaction; returns the records inserted and
    a line per run with lines that do not read as records (a torn last line, which
    kvlab's own reader skips too, is not one)."""
    import pyarrow as pa

    ids = pa.table({"run_id": [f.run_id for f in batch]})
    files = pa.table({"filename": [str(f.records_file) for f in batch],
                      "run_id": [f.run_id for f in batch]})
    refusals = pa.Table.from_pylist(
        [{"run_id": f.run_id, "mode": k[0], "capacity": k[1], "query_id": k[2],
          "repetition": k[3], "load": k[4], "reasons": reasons}
         for f in batch for k, reasons in f.refusals.items()],
        schema=pa.schema([("run_id", pa.string()), ("mode", pa.string()),
                          ("capacity", pa.int64()), ("query_id", pa.string()),
                          ("repetition", pa.int64()), ("load", pa.string()),
                          ("reasons", pa.list_(pa.string()))]))
    tables = {"runs": arrow_table("runs", [f.run for f in batch]),
              "modes": arrow_table("modes", [m for f in batch for m in f.modes]),
              "servers": arrow_table("servers", [s for f in batch for s in f.servers]),
              "summaries": arrow_table("summaries", [s for f in batch for s in f.summaries]),
              "load_points": arrow_table("load_points",
                                         [p for f in batch for p in f.load_points])}
    conn.execute("BEGIN TRANSACTION")
    try:
        conn.register("batch_ids", ids)
        conn.register("batch_files", files)
        conn.register("batch_refusals", refusals)
        for table in ("runs", *RUN_TABLES):
            conn.execute(f'DELETE FROM "{table}" WHERE run_id IN (SELECT run_id FROM batch_ids)')
        for table, rows in tables.items():
            conn.register("batch_rows", rows)
            conn.execute(f'INSERT INTO "{table}" BY NAME SELECT * FROM batch_rows')
            conn.unregister("batch_rows")
        read, insert = _records_sql([f.records_file for f in batch])
        conn.execute(read)
        row = conn.execute(insert).fetchone()
        inserted = int(row[0]) if row else 0
        damaged = conn.execute(UNREADABLE).fetchall()
        conn.execute("DROP TABLE batch_raw")
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    finally:
        for name in ("batch_ids", "batch_files", "batch_refusals"):
            conn.unregister(name)
    return inserted, [f"{rid}: {n} line{'s' if n > 1 else ''} of its records.jsonl "
                      f"{'do' if n > 1 else 'does'} not read as records (left out; the file "
                      "is as it was)" for rid, n in damaged]


def _add(result: AddResult, records: int, warnings: list[str]) -> None:
    result.records += records
    result.warnings += warnings


def add_runs(conn: duckdb.DuckDBPyConnection, paths: Iterable[Path | str], *,
             batch_runs: int = BATCH_RUNS) -> AddResult:
    """Add every run under ``paths`` (see :func:`discover`) to an open database."""
    runs, refused = discover(paths)
    result = AddResult(refused=refused)
    known = {p: (rid, fp) for rid, p, fp in
             conn.execute("SELECT run_id, path, fingerprint FROM runs").fetchall()}
    path_of = {rid: p for p, (rid, _) in known.items()}
    with tempfile.TemporaryDirectory(prefix="kvlab-history-") as scratch:
        batch: list[RunFacts] = []
        for path in runs:
            if str(path) in known and known[str(path)][1] == fingerprint(path):
                result.unchanged += 1
                continue
            try:  # a run directory's records are read by DuckDB, not parsed here
                run = RunDir(path) if path.is_dir() else load_run_or_import(path)
                facts = run_facts(run, Path(scratch))
            except (KvlabError, OSError, ValueError) as exc:
                result.refused.append(f"{path}: {str(exc).splitlines()[0]}")
                continue
            if facts.run_id in path_of or str(path) in known:
                result.replaced.append(facts.run_id)
                if path_of.get(facts.run_id, str(path)) != str(path):
                    result.warnings.append(f"{facts.run_id}: was {path_of[facts.run_id]}, "
                                           f"now {path} (same run id)")
            batch.append(facts)
            result.added.append(facts.run_id)
            if len(batch) >= batch_runs:
                _add(result, *_insert_batch(conn, batch))
                batch = []
        if batch:
            _add(result, *_insert_batch(conn, batch))
    return result


def open_writable(db: Path) -> tuple[duckdb.DuckDBPyConnection, AddResult | None]:
    """The database open for writing: created when new; rebuilt from the run paths it
    recorded (and the sidecar's) when an older kvlab made it (returns that rebuild's
    result); ConfigError when a newer kvlab did."""
    conn = connect(db)
    try:
        found = version(conn)
        if found == SCHEMA_VERSION:
            return conn, None
        if found is None:
            create(conn)
            floors.insert(conn, floors.read_kept(db))
            return conn, None
        if found > SCHEMA_VERSION:
            raise ConfigError(f"{db} was made by a newer kvlab (history schema {found}, this "
                              f"kvlab reads {SCHEMA_VERSION}); give another --db, or "
                              "`kvlab history rebuild` to make it again for this kvlab")
        paths = list(dict.fromkeys(recorded_paths(conn) + read_sidecar(db)))
        drop_all(conn)
        create(conn)
        floors.insert(conn, floors.read_kept(db))
        return conn, add_runs(conn, paths)
    except BaseException:
        conn.close()
        raise


def add_to_history(paths: Iterable[Path | str], db: Path) -> AddResult:
    """Add the runs under ``paths`` to the database ``db`` (opened, then closed), and
    their paths to its sidecar."""
    conn, _ = open_writable(db)
    try:
        result = add_runs(conn, paths)
        where = [p for (p,) in conn.execute("SELECT path FROM runs").fetchall()]
    finally:
        conn.close()
    append_sidecar(db, where)
    return result


def add_floors(db: Path, rows: Sequence[floors.FloorRow]) -> None:
    """Keep noise floors (``kvlab floor``): in the sidecar, then in the database."""
    floors.keep(db, rows)
    conn, _ = open_writable(db)
    try:
        floors.insert(conn, rows)
    finally:
        conn.close()


def rebuild_history(db: Path) -> AddResult:
    """Make the database again from the run paths it had read (its runs table when it
    still opens, and the sidecar): every table dropped, every run that still exists read
    again; a path gone since is listed as refused."""
    paths = read_sidecar(db)
    if db.is_file():
        try:
            old = connect(db, read_only=True)
            try:
                paths = list(dict.fromkeys(recorded_paths(old) + paths))
            finally:
                old.close()
        except Exception:  # a damaged or foreign file: the sidecar still has the paths
            pass
        db.unlink()
    if not paths:
        raise ConfigError(f"nothing to rebuild {db} from: no sidecar "
                          f"({db.name}.runs) and no database; add runs with `kvlab history "
                          "add RUN_DIR...`")
    conn, _ = open_writable(db)
    try:
        return add_runs(conn, paths)
    finally:
        conn.close()


def remember(run_path: Path, environ: Mapping[str, str] = os.environ) -> AddResult | None:
    """Add a run that just ended to the user's history (``kvlab run``'s last step);
    None when KVLAB_HISTORY=off."""
    if history_off(environ):
        return None
    return add_to_history([run_path], db_path(None, environ))
