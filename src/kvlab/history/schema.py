"""The history database's tables, its schema version, and opening it.

Tables (``kvlab history sql "DESCRIBE records"`` lists the columns):

- ``runs``: one row per run (its id is the key): the path read, a fingerprint of its
  files, experiment name and hash, git commit, kvlab version, the machine (CPU model,
  SIMD flags, cores, host), its load averages and times, and its row counts.
- ``modes``: each mode of the run's experiment (server kind, API, settings).
- ``servers``: each server the run started (kind, argv, version, its facts).
- ``records``: every line of records.jsonl with its ``line`` number and its validation
  ``verdict``: ``valid``, the first refusal class (``failed``, ``output_tokens``, ...;
  ``reasons`` lists them all), ``warmup`` or ``superseded`` (a row retried by a resume),
  and e2e/TTFT/effective-ITL in ms.
- ``summaries``: each (mode, capacity, load) summary of the run's evaluation, with the
  bootstrap interval of the mean where it has one (``*_low``, ``*_high``).
- ``load_points``: what each load point achieved (rates, throughput, goodput, lag).

``SCHEMA_VERSION`` is raised when a table changes. Layouts: 1, runs, modes, servers,
records and summaries; 2, adds ``load_points`` and ``runs.cpu_flags``; 3, adds
``records.session`` and ``records.turn`` (a sessions load's turns); 4, adds the records'
facts of OpenAI Responses, Anthropic Messages and embeddings (``response_id``,
``previous_response_id``, ``cache_creation_tokens``, ``inputs``, ``vectors``,
``dimensions``, ``non_finite``, ``dimension_expected``) and the summaries'
``inputs_per_s`` and ``input_tokens_per_s``; 5, adds ``noise_floors`` (the A/A noise
floors ``kvlab floor`` measured, also kept in the sidecar ``FILE.floors``, so a rebuild
keeps them) and the rows each cell planned and whether it finished (``planned``,
``finished`` in summaries; ``planned`` in runs); 6, adds the records' ``schema_version``
and connection set-up (``t_connect_start``, ``t_connected``, ``t_tls``,
``connection_reused``, ``loop_lag_ns``). Every layout
keeps ``runs(run_id, path)``, so an older database is rebuilt from the paths it
recorded (:func:`kvlab.history.ingest.open_writable`); a newer one is refused.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING

from kvlab.analysis.summary_metrics import INTERVAL_METRICS
from kvlab.errors import ConfigError

if TYPE_CHECKING:
    import duckdb

SCHEMA_VERSION = 6
LOCK_WAIT_S = 10.0  # how long to wait for another process's write to end

# records.jsonl's fields and their column types (Record's fields, in its order);
# ``prompt`` is left out: ``body`` holds what was sent and ``prompt_sha256`` names it.
RECORD_COLUMNS: dict[str, str] = {
    "schema_version": "INTEGER",
    "run_id": "VARCHAR", "mode": "VARCHAR", "capacity": "INTEGER", "query_id": "VARCHAR",
    "repetition": "INTEGER", "position": "INTEGER", "warmup": "BOOLEAN", "load": "VARCHAR",
    "worker": "INTEGER", "session": "VARCHAR", "turn": "INTEGER", "api": "VARCHAR",
    "path": "VARCHAR", "stream": "BOOLEAN",
    "body": "JSON", "prompt_sha256": "VARCHAR", "requested_tokens": "INTEGER",
    "t_scheduled": "BIGINT", "t_sent": "BIGINT", "t_headers": "BIGINT",
    "t_first_chunk": "BIGINT", "t_first_content": "BIGINT", "t_last_content": "BIGINT",
    "t_first_answer": "BIGINT", "t_end": "BIGINT", "chunk_ns": "BIGINT[]",
    "chunk_tokens": "INTEGER[]", "reasoning_chunks": "INTEGER[]", "read_lag_ns": "BIGINT",
    "t_connect_start": "BIGINT", "t_connected": "BIGINT", "t_tls": "BIGINT",
    "connection_reused": "BOOLEAN", "loop_lag_ns": "BIGINT",
    "prompt_tokens": "INTEGER", "output_tokens": "INTEGER", "cached_tokens": "INTEGER",
    "stop_type": "VARCHAR", "truncated": "BOOLEAN", "timings": "JSON",
    "saw_terminator": "BOOLEAN", "saw_usage": "BOOLEAN", "usage_reasoning_tokens": "INTEGER",
    "cache_creation_tokens": "INTEGER", "response_id": "VARCHAR",
    "previous_response_id": "VARCHAR", "inputs": "INTEGER", "vectors": "INTEGER",
    "dimensions": "INTEGER[]", "non_finite": "INTEGER", "dimension_expected": "INTEGER",
    "imported_from": "VARCHAR", "outcome": "VARCHAR", "http_status": "INTEGER",
    "error": "VARCHAR", "text": "VARCHAR", "reasoning_text": "VARCHAR", "notes": "VARCHAR[]",
}
RECORD_FIELDS_LEFT_OUT = ("prompt",)

# The row metrics of kvlab.analysis.metrics, as SQL over the record's clock (ms);
# tests/history/test_ingest.py checks them against the Python functions.
RECORD_METRICS: dict[str, str] = {
    "e2e_ms": "(t_end - t_sent) / 1e6",
    "ttft_ms": "(t_first_content - t_sent) / 1e6",
    "itl_effective_ms": "CASE WHEN output_tokens >= 2 THEN (t_last_content - t_first_content)"
                        " / 1e6 / (output_tokens - 1) END",
}

# A summary as evaluation.json keeps it (Summary.to_json): the distributions of these
# row metrics (``<metric>_<stat>``: n, mean, p50, p95, p99, min, max), with the bootstrap
# 95 % interval of their mean (``<metric>_low``, ``<metric>_high``) ...
DISTRIBUTIONS: tuple[str, ...] = tuple(m.name for m in INTERVAL_METRICS)
STATS = ("n", "mean", "p50", "p95", "p99", "min", "max")
# ... and these figures of the whole cell, under evaluation.json's own keys.
SUMMARY_FIGURES = ("mean_prompt_ms", "mean_decode_ms", "mean_overhead_ms",
                   "mean_decode_per_token_ms", "tokens_per_second", "system_tokens_per_s",
                   "mean_prompt_tokens", "inter_delta_median_ms", "inter_delta_p95_ms",
                   "mean_content_deltas", "inputs_per_s", "input_tokens_per_s")


def summary_columns() -> dict[str, str]:
    """The summaries table's columns and types."""
    columns = {"run_id": "VARCHAR", "mode": "VARCHAR", "capacity": "INTEGER",
               "load": "VARCHAR", "valid": "INTEGER", "measured": "INTEGER",
               "planned": "INTEGER", "finished": "BOOLEAN", "refused": "JSON"}
    for metric in DISTRIBUTIONS:
        for stat in STATS:
            columns[f"{metric}_{stat}"] = "INTEGER" if stat == "n" else "DOUBLE"
        columns[f"{metric}_low"] = columns[f"{metric}_high"] = "DOUBLE"
    for figure in SUMMARY_FIGURES:
        columns[figure] = "DOUBLE"
    return columns


LOAD_POINT_COLUMNS: dict[str, str] = {
    "run_id": "VARCHAR", "mode": "VARCHAR", "capacity": "INTEGER", "load": "VARCHAR",
    "kind": "VARCHAR", "requests": "INTEGER", "ok": "INTEGER", "valid": "INTEGER",
    "measured": "INTEGER", "target_rate": "DOUBLE", "scheduled_rate": "DOUBLE",
    "achieved_rate": "DOUBLE", "send_lag_p50_ms": "DOUBLE", "send_lag_p95_ms": "DOUBLE",
    "send_lag_p99_ms": "DOUBLE", "late": "INTEGER", "slipped": "BOOLEAN",
    "max_in_flight": "INTEGER", "span_s": "DOUBLE", "request_throughput": "DOUBLE",
    "output_tokens_per_s": "DOUBLE", "goodput": "DOUBLE", "slo_met": "INTEGER",
}

RUN_COLUMNS: dict[str, str] = {
    "run_id": "VARCHAR PRIMARY KEY", "path": "VARCHAR NOT NULL",
    "fingerprint": "VARCHAR NOT NULL", "imported_from": "VARCHAR", "experiment": "VARCHAR",
    "experiment_hash": "VARCHAR", "git_commit": "VARCHAR", "kvlab_version": "VARCHAR",
    "cpu": "VARCHAR", "cpu_flags": "VARCHAR[]", "cores": "INTEGER", "hostname": "VARCHAR",
    "platform": "VARCHAR", "started": "TIMESTAMPTZ", "stopped": "TIMESTAMPTZ",
    "load_average_started": "DOUBLE[]", "load_average_stopped": "DOUBLE[]",
    "records": "INTEGER", "measured": "INTEGER", "valid": "INTEGER", "planned": "INTEGER",
    "evaluation": "VARCHAR", "added_at": "TIMESTAMPTZ",
}
MODE_COLUMNS: dict[str, str] = {
    "run_id": "VARCHAR", "mode": "VARCHAR", "server": "VARCHAR", "api": "VARCHAR",
    "stream": "BOOLEAN", "capacities": "INTEGER[]", "settings": "JSON",
}
SERVER_COLUMNS: dict[str, str] = {
    "run_id": "VARCHAR", "mode": "VARCHAR", "capacity": "INTEGER", "kind": "VARCHAR",
    "argv": "VARCHAR[]", "version": "VARCHAR", "started": "TIMESTAMPTZ",
    "stopped": "TIMESTAMPTZ", "facts": "JSON",
}


def record_table_columns() -> dict[str, str]:
    """The records table's columns: run id and line, the record's fields, the verdict and
    the row metrics."""
    return {"run_id": "VARCHAR", "line": "INTEGER",
            **{k: v for k, v in RECORD_COLUMNS.items() if k != "run_id"},
            "verdict": "VARCHAR", "reasons": "VARCHAR[]",
            **dict.fromkeys(RECORD_METRICS, "DOUBLE")}


# An A/A noise floor (kvlab floor): per experiment definition, machine, cell and metric,
# the sd of log(run mean) between identical runs (kvlab.analysis.gate_stats).
FLOOR_COLUMNS: dict[str, str] = {
    "experiment": "VARCHAR", "experiment_hash": "VARCHAR", "cpu": "VARCHAR",
    "mode": "VARCHAR", "capacity": "INTEGER", "load": "VARCHAR", "metric": "VARCHAR",
    "between": "DOUBLE", "between_upper": "DOUBLE", "runs": "INTEGER", "run_ids": "VARCHAR[]",
    "measured_at": "TIMESTAMPTZ",
}

TABLES: dict[str, dict[str, str]] = {
    "runs": RUN_COLUMNS, "modes": MODE_COLUMNS, "servers": SERVER_COLUMNS,
    "records": record_table_columns(), "summaries": summary_columns(),
    "load_points": LOAD_POINT_COLUMNS, "noise_floors": FLOOR_COLUMNS,
}
# the tables keyed by run_id (a run added again replaces its rows)
RUN_TABLES = tuple(t for t in TABLES if t not in ("runs", "noise_floors"))


def _ddl(table: str, columns: dict[str, str]) -> str:
    body = ", ".join(f'"{name}" {kind}' for name, kind in columns.items())
    return f'CREATE TABLE "{table}" ({body})'


def create(conn: duckdb.DuckDBPyConnection) -> None:
    """Every table of this layout, and its version in ``meta``."""
    conn.execute("CREATE TABLE meta (key VARCHAR PRIMARY KEY, value VARCHAR)")
    for table, columns in TABLES.items():
        conn.execute(_ddl(table, columns))
    conn.execute("INSERT INTO meta VALUES ('schema_version', ?)", [str(SCHEMA_VERSION)])


def drop_all(conn: duckdb.DuckDBPyConnection) -> None:
    """Drop every table (an older layout's included)."""
    for (name,) in conn.execute("SELECT table_name FROM duckdb_tables()").fetchall():
        conn.execute(f'DROP TABLE "{name}"')


def version(conn: duckdb.DuckDBPyConnection) -> int | None:
    """The layout's version; None for an empty database."""
    tables = {n for (n,) in conn.execute("SELECT table_name FROM duckdb_tables()").fetchall()}
    if "meta" not in tables:
        if tables:
            raise ConfigError("this DuckDB file is not a kvlab history (no meta table); "
                              "give another --db")
        return None
    row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    return int(row[0]) if row else None


def recorded_paths(conn: duckdb.DuckDBPyConnection) -> list[str]:
    """The run paths any layout's runs table holds."""
    return [p for (p,) in conn.execute("SELECT path FROM runs ORDER BY path").fetchall()]


def connect(db: Path, *, read_only: bool = False) -> duckdb.DuckDBPyConnection:
    """A connection to ``db`` (created when writable and missing). ConfigError (one line)
    when read-only and there is no database, or another process still holds it after
    LOCK_WAIT_S seconds."""
    import duckdb

    if read_only and not db.is_file():
        raise ConfigError(f"no run history at {db}: add runs with `kvlab history add "
                          "RUN_DIR...` (or give --db / KVLAB_HISTORY)")
    if not read_only:
        db.parent.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + LOCK_WAIT_S
    while True:
        try:
            conn = duckdb.connect(str(db), read_only=read_only)
            break
        except duckdb.IOException as exc:
            # another kvlab is adding its run (DuckDB has one writer): wait a little
            if "lock" in str(exc).lower() and time.monotonic() < deadline:
                time.sleep(0.25)
                continue
            first = str(exc).splitlines()[0]
            raise ConfigError(f"cannot open the run history {db}: {first}") from None
    conn.execute("SET enable_progress_bar = false")  # DuckDB's own bar on stdout
    return conn
