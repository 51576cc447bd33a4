"""Adding runs: every row with the verdict judge() gave, idempotent and incremental."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import duckdb
import pytest

from kvlab.analysis import metrics
from kvlab.history.facts import EVALUATED, STORED, imported_run_id
from kvlab.history.ingest import add_runs, add_to_history
from kvlab.history.schema import RECORD_COLUMNS, RECORD_FIELDS_LEFT_OUT, connect, create
from kvlab.peers import read_peer_file
from kvlab.run.runner import evaluate_run
from kvlab.rundir import Record, RecordStore, RunDir, read_records
from kvlab.store.evaluation import valid_rows_of
from tests.history.runs import write_load_run
from tests.peers.files import guidellm_report


def memory_db() -> duckdb.DuckDBPyConnection:
    conn = duckdb.connect(":memory:")
    create(conn)
    return conn


def expected_verdicts(path: Path) -> list[str]:
    """Each line's verdict by kvlab's own judge, computed here without the database."""
    run = RunDir(path)
    valid = valid_rows_of(run)
    accepted, sent = {id(r) for r in valid.rows}, {id(r) for r in valid.sent}
    first: dict[tuple, str] = {}
    for v in valid.violations:
        first.setdefault(v.row_key, str(v.reason))
    out = []
    for r in run.records:
        if r.warmup:
            out.append("warmup")
        elif id(r) not in sent:
            out.append("superseded")
        elif id(r) in accepted:
            out.append("valid")
        else:
            out.append(first[(r.mode, r.capacity, r.query_id, r.repetition, r.load)])
    return out


@pytest.mark.parametrize("evaluated", [True, False], ids=["evaluation.json", "evaluated"])
def test_every_row_has_the_verdict_judge_gave(tmp_path: Path, evaluated: bool) -> None:
    path = write_load_run(tmp_path / "r1", "r1", evaluate=evaluated)
    conn = memory_db()
    result = add_runs(conn, [path])
    assert result.added == ["r1"] and result.records == 37
    got = conn.execute("SELECT verdict FROM records ORDER BY line").fetchall()
    expected = expected_verdicts(path)
    assert [v for (v,) in got] == expected
    assert set(expected) == {"valid", "warmup", "superseded", "failed", "output_tokens"}
    how = conn.execute("SELECT evaluation FROM runs").fetchone()
    assert how == ((STORED if evaluated else EVALUATED),)


def test_the_row_metrics_in_sql_are_kvlab_s(tmp_path: Path) -> None:
    """SQL's e2e, TTFT and effective ITL are kvlab.analysis.metrics' to the bit."""
    path = write_load_run(tmp_path / "r1", "r1")
    conn = memory_db()
    add_runs(conn, [path])
    rows = conn.execute("SELECT e2e_ms, ttft_ms, itl_effective_ms FROM records "
                        "ORDER BY line").fetchall()
    for record, (e2e, ttft, itl) in zip(read_records(path / "records.jsonl"), rows,
                                        strict=True):
        # the same IEEE operations on the same integers: equal, not only close
        assert (e2e, ttft, itl) == (metrics.e2e_ms(record), metrics.ttft_ms(record),
                                    metrics.itl_effective_ms(record))


def test_every_record_field_has_a_column_or_is_named_as_left_out() -> None:
    assert set(RECORD_COLUMNS) | set(RECORD_FIELDS_LEFT_OUT) == set(Record.model_fields)
    assert list(RECORD_COLUMNS) == [f for f in Record.model_fields
                                    if f not in RECORD_FIELDS_LEFT_OUT]


def test_a_records_row_reads_back_its_record(tmp_path: Path) -> None:
    path = write_load_run(tmp_path / "r1", "r1")
    conn = memory_db()
    add_runs(conn, [path])
    record = read_records(path / "records.jsonl")[5]
    row = conn.execute("SELECT * FROM records WHERE line = 6").fetchone()
    names = [d[0] for d in conn.description]
    got = dict(zip(names, row, strict=True))
    for name in RECORD_COLUMNS:
        value = getattr(record, name)
        if name in ("body", "timings"):
            assert json.loads(got[name]) == value
        else:
            assert got[name] == (str(value) if name in ("api", "outcome") else value), name


def test_summaries_and_load_points_are_the_evaluation_s(tmp_path: Path) -> None:
    path = write_load_run(tmp_path / "r1", "r1")
    evaluation = json.loads((path / "evaluation.json").read_text())
    conn = memory_db()
    add_runs(conn, [path])
    for s in evaluation["summaries"]:
        row = conn.execute(
            "SELECT valid, measured, e2e_ms_mean, e2e_ms_low, e2e_ms_high, "
            "itl_effective_ms_p95, tokens_per_second FROM summaries "
            "WHERE mode = ? AND load = ?", [s["mode"], s["load"]]).fetchone()
        interval = s["mean_intervals"]["e2e_ms"]
        assert row == (s["valid"]["valid"], s["valid"]["measured"], s["e2e_ms"]["mean"],
                       interval["low"], interval["high"], s["itl_effective_ms"]["p95"],
                       s["tokens_per_second"])
    for p in evaluation["load"]:
        row = conn.execute("SELECT output_tokens_per_s, valid, send_lag_p95_ms FROM "
                           "load_points WHERE mode = ? AND load = ?",
                           [p["mode"], p["load"]]).fetchone()
        assert row == (p["output_tokens_per_s"], p["count"]["valid"], p["send_lag_ms"]["p95"])
    run = conn.execute("SELECT experiment, git_commit, cpu, cpu_flags, cores, records, "
                       "valid, measured, load_average_started FROM runs").fetchone()
    assert run == ("synthetic", "abc123", "Test CPU 9000", ["avx2", "fma"], 2, 37, 30, 32,
                   [1.0, 0.5, 0.2])
    assert conn.execute("SELECT mode, server FROM modes ORDER BY mode").fetchall() == [
        ("fast", "embedded"), ("slow", "embedded")]
    assert conn.execute("SELECT kind, argv, version FROM servers").fetchall() == [
        ("embedded", ["kvlab", "serve"], "kvlab 0.1.0")]


def table_counts(conn: duckdb.DuckDBPyConnection) -> dict[str, int]:
    return {t: conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0]  # type: ignore[index]
            for t in ("runs", "modes", "servers", "records", "summaries", "load_points")}


def test_adding_again_reads_nothing_and_a_resumed_run_replaces_itself(tmp_path: Path) -> None:
    path = write_load_run(tmp_path / "r1", "r1")
    conn = memory_db()
    add_runs(conn, [path])
    before = table_counts(conn)
    again = add_runs(conn, [path])
    assert (again.added, again.unchanged, again.records) == ([], 1, 0)
    assert table_counts(conn) == before
    extra = read_records(path / "records.jsonl")[-1].model_copy(
        update={"query_id": "q08", "position": 99})
    with RecordStore(path / "records.jsonl") as store:  # a resume appended a row ...
        store.append(extra)
    evaluate_run(path)  # ... and evaluated the run again
    resumed = add_runs(conn, [path])
    assert resumed.added == resumed.replaced == ["r1"]
    assert table_counts(conn) == before | {"records": before["records"] + 1}
    assert conn.execute("SELECT measured FROM runs").fetchone() == (33,)


def test_folders_of_runs_and_a_peer_file(tmp_path: Path) -> None:
    write_load_run(tmp_path / "runs" / "a" / "r1", "r1")
    write_load_run(tmp_path / "runs" / "r2", "r2", started="2026-01-02T10:00:00+00:00")
    peer = tmp_path / "benchmarks.json"
    peer.write_text(json.dumps(guidellm_report()))
    db = tmp_path / "h.duckdb"
    result = add_to_history([tmp_path / "runs", peer, tmp_path / "nope"], db)
    assert sorted(result.added) == sorted(["r1", "r2", imported_run_id(peer.resolve())])
    assert result.refused == [f"{tmp_path / 'nope'}: no such file or directory"]
    conn = connect(db, read_only=True)
    peer_rows = conn.execute("SELECT count(*), min(imported_from) FROM records WHERE run_id "
                             "= ?", [imported_run_id(peer.resolve())]).fetchone()
    assert peer_rows == (len(read_peer_file(peer)), str(peer))
    assert conn.execute("SELECT imported_from, experiment, evaluation FROM runs WHERE "
                        "imported_from IS NOT NULL").fetchone() == (str(peer), None, EVALUATED)
    conn.close()
    assert add_to_history([tmp_path / "runs", peer], db).unchanged == 3


def test_many_runs_in_one_read_keep_each_file_s_lines(tmp_path: Path) -> None:
    paths = [write_load_run(tmp_path / f"r{i}", f"r{i}", slowdown=1 + i, evaluate=i == 0)
             for i in range(3)]
    one, each = memory_db(), memory_db()
    add_runs(one, paths, batch_runs=10)
    add_runs(each, paths, batch_runs=1)
    query = "SELECT run_id, line, query_id, verdict, t_sent FROM records ORDER BY run_id, line"
    assert one.execute(query).fetchall() == each.execute(query).fetchall()
    assert [v for (v,) in one.execute("SELECT verdict FROM records WHERE run_id = 'r2' "
                                      "ORDER BY line").fetchall()] == expected_verdicts(paths[2])


def test_a_run_moved_keeps_its_id_and_says_where_it_went(tmp_path: Path) -> None:
    path = write_load_run(tmp_path / "r1", "r1")
    conn = memory_db()
    add_runs(conn, [path])
    moved = shutil.copytree(path, tmp_path / "elsewhere" / "r1")
    result = add_runs(conn, [moved])
    assert result.replaced == ["r1"]
    assert result.warnings == [f"r1: was {path}, now {moved} (same run id)"]
    assert conn.execute("SELECT path FROM runs").fetchall() == [(str(moved),)]


def test_a_damaged_line_is_named_and_a_torn_last_line_is_not(tmp_path: Path) -> None:
    """kvlab's reader skips a torn last line and refuses a damaged middle one; with its
    evaluation current, the run is added and the damaged line named."""
    import os

    path = write_load_run(tmp_path / "r1", "r1")
    lines = (path / "records.jsonl").read_text().splitlines(keepends=True)
    torn = shutil.copytree(path, tmp_path / "torn")
    (torn / "records.jsonl").write_text("".join(lines) + lines[0][:40])  # a crash mid-write
    damaged = shutil.copytree(path, tmp_path / "damaged")
    (damaged / "records.jsonl").write_text("".join([*lines[:3], "{not json\n", *lines[3:]]))
    (damaged / "manifest.json").write_text(
        (path / "manifest.json").read_text().replace('"r1"', '"r2"', 1))
    conn = memory_db()
    refused = add_runs(conn, [torn, damaged])  # both newer than their evaluation.json
    assert refused.added == ["r1"] and len(refused.refused) == 1
    assert refused.refused[0].startswith(f"{damaged}: {damaged / 'records.jsonl'}: cannot "
                                         "read the records")
    os.utime(damaged / "evaluation.json")  # evaluated after the damage
    result = add_runs(conn, [damaged])
    assert result.added == ["r2"] and result.warnings == [
        "r2: 1 line of its records.jsonl does not read as records (left out; the file is "
        "as it was)"]
    assert conn.execute("SELECT run_id, count(*) FROM records GROUP BY ALL ORDER BY ALL"
                        ).fetchall() == [("r1", 37), ("r2", 37)]
