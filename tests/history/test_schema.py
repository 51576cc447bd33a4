"""The schema's version: an older database is rebuilt from the runs it recorded, a newer
one refused; deleting the database loses nothing (rebuild)."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from kvlab.errors import ConfigError
from kvlab.history.ingest import add_to_history, open_writable, rebuild_history
from kvlab.history.location import read_sidecar
from kvlab.history.schema import SCHEMA_VERSION, TABLES, connect, version
from tests.history.runs import write_load_run

# Layout 1 as kvlab made it: no load_points table, no runs.cpu_flags.
V1 = """
CREATE TABLE meta (key VARCHAR PRIMARY KEY, value VARCHAR);
INSERT INTO meta VALUES ('schema_version', '1');
CREATE TABLE runs (run_id VARCHAR PRIMARY KEY, path VARCHAR NOT NULL,
  fingerprint VARCHAR NOT NULL, experiment VARCHAR, git_commit VARCHAR, cpu VARCHAR);
CREATE TABLE modes (run_id VARCHAR, mode VARCHAR, server VARCHAR);
CREATE TABLE servers (run_id VARCHAR, mode VARCHAR, kind VARCHAR);
CREATE TABLE records (run_id VARCHAR, line INTEGER, mode VARCHAR, verdict VARCHAR);
CREATE TABLE summaries (run_id VARCHAR, mode VARCHAR, e2e_ms_mean DOUBLE);
"""


def test_a_version_1_database_is_rebuilt_from_the_runs_it_recorded(tmp_path: Path) -> None:
    run = write_load_run(tmp_path / "r1", "r1")
    db = tmp_path / "old.duckdb"
    old = duckdb.connect(str(db))
    old.execute(V1)
    old.execute("INSERT INTO runs VALUES ('r1', ?, 'x', 'synthetic', 'abc123', 'Old CPU')",
                [str(run.resolve())])
    old.execute("INSERT INTO records VALUES ('r1', 1, 'slow', 'valid')")
    old.close()

    conn, rebuilt = open_writable(db)
    try:
        assert version(conn) == SCHEMA_VERSION == 6
        assert rebuilt is not None and rebuilt.added == ["r1"]
        tables = {n for (n,) in conn.execute("SELECT table_name FROM duckdb_tables()").fetchall()}
        assert tables == {"meta", *TABLES}
        assert conn.execute("SELECT cpu, cpu_flags FROM runs").fetchone() == (
            "Test CPU 9000", ["avx2", "fma"])
        assert conn.execute("SELECT count(*) FROM records").fetchone() == (37,)
        assert conn.execute("SELECT count(*) FROM load_points").fetchone() == (4,)
    finally:
        conn.close()


def test_a_newer_database_is_refused_in_one_line(tmp_path: Path) -> None:
    db = tmp_path / "new.duckdb"
    conn = duckdb.connect(str(db))
    conn.execute("CREATE TABLE meta (key VARCHAR, value VARCHAR)")
    conn.execute("INSERT INTO meta VALUES ('schema_version', '99')")
    conn.close()
    with pytest.raises(ConfigError, match="made by a newer kvlab \\(history schema 99"):
        open_writable(db)


def test_a_duckdb_file_that_is_not_a_history_is_refused(tmp_path: Path) -> None:
    db = tmp_path / "other.duckdb"
    conn = duckdb.connect(str(db))
    conn.execute("CREATE TABLE t (x INTEGER)")
    conn.close()
    with pytest.raises(ConfigError, match="not a kvlab history"):
        open_writable(db)


def test_no_database_to_read_says_how_to_make_one(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"no run history at .*kvlab history add"):
        connect(tmp_path / "missing.duckdb", read_only=True)


def test_deleting_the_database_loses_nothing(tmp_path: Path) -> None:
    runs = [write_load_run(tmp_path / "runs" / f"r{i}", f"r{i}") for i in range(2)]
    db = tmp_path / "h.duckdb"
    add_to_history([tmp_path / "runs"], db)
    assert read_sidecar(db) == [str(p.resolve()) for p in runs]
    query = "SELECT run_id, line, verdict FROM records ORDER BY ALL"
    conn = connect(db, read_only=True)
    before = conn.execute(query).fetchall()
    conn.close()

    db.unlink()
    result = rebuild_history(db)
    assert sorted(result.added) == ["r0", "r1"] and not result.refused
    conn = connect(db, read_only=True)
    assert conn.execute(query).fetchall() == before
    conn.close()

    import shutil

    shutil.rmtree(runs[0])  # a run directory gone: named, the others kept
    result = rebuild_history(db)
    assert result.added == ["r1"]
    assert result.refused == [f"{runs[0].resolve()}: no such file or directory"]


def test_nothing_to_rebuild_from_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="nothing to rebuild"):
        rebuild_history(tmp_path / "none.duckdb")


def test_a_writer_waits_for_another_process_s_write(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """DuckDB has one writer: a run ending while another kvlab adds its own waits, then
    opens; one still held after LOCK_WAIT_S is one line."""
    import subprocess
    import sys
    import time

    from kvlab.history import schema

    db = tmp_path / "h.duckdb"
    hold = ("import duckdb, sys, time; c = duckdb.connect(sys.argv[1]); print('held', "
            "flush=True); time.sleep(float(sys.argv[2]))")
    with subprocess.Popen([sys.executable, "-c", hold, str(db), "2"], stdout=subprocess.PIPE,
                          text=True) as holder:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        started = time.monotonic()
        connect(db).close()
        assert holder.poll() is not None  # it opened only once the holder was gone
        assert time.monotonic() - started < schema.LOCK_WAIT_S
    monkeypatch.setattr(schema, "LOCK_WAIT_S", 0.5)
    with subprocess.Popen([sys.executable, "-c", hold, str(db), "5"], stdout=subprocess.PIPE,
                          text=True) as holder:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        with pytest.raises(ConfigError, match=f"^cannot open the run history {db}: .*lock"):
            connect(db)
        holder.kill()
