"""kvlab export --parquet: the history's rows, read back by pyarrow, pandas, polars and
DuckDB."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pyarrow.parquet as pq
import pytest

from kvlab.errors import ConfigError
from kvlab.history.export import export_history, export_run
from kvlab.history.ingest import add_to_history
from kvlab.history.schema import connect
from tests.history.runs import write_load_run


def test_a_run_exported_is_the_history_s_rows(tmp_path: Path) -> None:
    run = write_load_run(tmp_path / "r1", "r1")
    written = export_run(run, tmp_path / "out")
    assert [p.name for p in written] == ["records.parquet", "summaries.parquet",
                                         "load_points.parquet", "runs.parquet"]
    db = tmp_path / "h.duckdb"
    add_to_history([run], db)
    conn = connect(db, read_only=True)
    try:
        for table, order in (("records", "line"), ("summaries", "mode, load"),
                             ("load_points", "mode, load")):
            cursor = conn.execute(f"SELECT * FROM {table} ORDER BY {order}")
            names = [d[0] for d in cursor.description]
            want = [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]
            got = pq.read_table(tmp_path / "out" / f"{table}.parquet").sort_by(
                [(c.strip(), "ascending") for c in order.split(",")]).to_pylist()
            assert len(got) == len(want) > 0
            assert got == want, table
    finally:
        conn.close()
    verdicts = pq.read_table(tmp_path / "out" / "records.parquet").column("verdict")
    assert sorted(set(verdicts.to_pylist())) == ["failed", "output_tokens", "superseded",
                                                 "valid", "warmup"]


def test_pandas_polars_and_duckdb_read_the_files(tmp_path: Path) -> None:
    pandas = pytest.importorskip("pandas")
    polars = pytest.importorskip("polars")
    export_run(write_load_run(tmp_path / "r1", "r1"), tmp_path / "out")
    records = tmp_path / "out" / "records.parquet"
    frame = pandas.read_parquet(records)
    assert len(frame) == 37 and (frame["verdict"] == "valid").sum() == 30
    assert polars.read_parquet(records).filter(polars.col("warmup")).height == 4
    assert duckdb.connect().execute(f"SELECT count(*) FROM '{records}' WHERE verdict = "
                                    "'failed'").fetchall() == [(1,)]
    summaries = pandas.read_parquet(tmp_path / "out" / "summaries.parquet")
    assert sorted(zip(summaries["mode"], summaries["load"], strict=True)) == [
        ("fast", "c=1"), ("fast", "c=2"), ("slow", "c=1"), ("slow", "c=2")]


def test_a_history_query_s_runs(tmp_path: Path) -> None:
    for i in range(3):
        write_load_run(tmp_path / "runs" / f"r{i}", f"r{i}", commit=f"c{i}")
    db = tmp_path / "h.duckdb"
    add_to_history([tmp_path / "runs"], db)
    export_history(db, "SELECT run_id FROM runs WHERE git_commit <> 'c1'", tmp_path / "out")
    table = pq.read_table(tmp_path / "out" / "records.parquet")
    assert sorted(set(table.column("run_id").to_pylist())) == ["r0", "r2"]
    assert table.num_rows == 2 * 37
    with pytest.raises(ConfigError, match="selects no run"):
        export_history(db, "SELECT run_id FROM runs WHERE false", tmp_path / "none")
    with pytest.raises(ConfigError, match=r"^export query: "):
        export_history(db, "SELECT nope FROM runs", tmp_path / "none")


def test_a_folder_that_is_not_a_run_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no run directory in it"):
        export_run(tmp_path, tmp_path / "out")
