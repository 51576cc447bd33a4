"""The history's questions: runs by filter, a metric's trend, read-only SQL, history:E@."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from kvlab.errors import ConfigError
from kvlab.history.ingest import add_to_history
from kvlab.history.queries import (
    RunFilter,
    list_runs,
    overlay_points,
    pareto_points,
    read_only,
    resolve,
    resolve_runs,
    run_sql,
    selected_runs,
    trend,
)
from tests.history.runs import EXPERIMENT, write_load_run


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Path]]:
    """Three runs of one experiment on two commits and two days; the third's fast mode
    twice as slow to decode."""
    root = tmp_path_factory.mktemp("runs")
    runs = [write_load_run(root / "r1", "r1", commit="aaa111",
                           started="2026-01-01T10:00:00+00:00"),
            write_load_run(root / "r2", "r2", commit="aaa111",
                           started="2026-01-02T10:00:00+00:00"),
            write_load_run(root / "r3", "r3", commit="bbb222", slowdown=2.0,
                           started="2026-01-03T10:00:00+00:00")]
    manifest = json.loads((runs[2] / "manifest.json").read_text())
    manifest["host"] |= {"cpu": "Other CPU", "hostname": "elsewhere"}
    (runs[2] / "manifest.json").write_text(json.dumps(manifest))
    db = root / "h.duckdb"
    add_to_history([root], db)
    return db, runs


def ids(rows: list[dict]) -> list[str]:
    return [r["run_id"] for r in rows]


def test_runs_newest_first_by_each_filter(history: tuple[Path, list[Path]]) -> None:
    conn = read_only(history[0])
    try:
        assert ids(list_runs(conn)) == ["r3", "r2", "r1"]
        assert ids(list_runs(conn, RunFilter(commit="aaa"))) == ["r2", "r1"]
        assert ids(list_runs(conn, RunFilter(machine="other"))) == ["r3"]
        assert ids(list_runs(conn, RunFilter(machine="testhost"))) == ["r2", "r1"]
        assert ids(list_runs(conn, RunFilter(mode="fast", server="embedded"))) == \
            ["r3", "r2", "r1"]
        assert list_runs(conn, RunFilter(mode="nope")) == []
        assert list_runs(conn, RunFilter(server="vllm")) == []
        assert list_runs(conn, RunFilter(experiment="other")) == []
        first = list_runs(conn, limit=1)[0]
        assert (first["modes"], first["servers"], first["valid"], first["measured"]) == (
            ["fast", "slow"], ["embedded"], 30, 32)
    finally:
        conn.close()


def test_a_trend_is_each_run_s_value_with_its_interval(history: tuple[Path, list[Path]]) -> None:
    conn = read_only(history[0])
    try:
        points = trend(conn, "itl_effective_ms", "synthetic", "fast", load="c=1")
        assert [p.run_id for p in points] == ["r1", "r2", "r3"]
        assert all(p.low is not None and p.high is not None and p.low <= p.value <= p.high
                   for p in points if p.value is not None)
        r1, _, r3 = points
        assert r3.value is not None and r1.value is not None and r3.value > 1.5 * r1.value
        assert r3.low is not None and r1.high is not None and r3.low > r1.high
        every = trend(conn, "output_tokens_per_s", "synthetic", "slow")
        assert [(p.run_id, p.load) for p in every] == [
            ("r1", "c=1"), ("r1", "c=2"), ("r2", "c=1"), ("r2", "c=2"), ("r3", "c=1"),
            ("r3", "c=2")]
        assert all(p.low is None for p in every)
        with pytest.raises(ConfigError, match="unknown metric 'nope'; one of: e2e_ms, "):
            trend(conn, "nope", "synthetic", "fast")
    finally:
        conn.close()


@pytest.mark.parametrize("query", [
    "DELETE FROM runs", "INSERT INTO meta VALUES ('x', 'y')", "DROP TABLE records",
    "CREATE TABLE t (x INTEGER)"])
def test_sql_refuses_every_write(history: tuple[Path, list[Path]], query: str) -> None:
    with pytest.raises(ConfigError, match=r"^kvlab history sql only reads: .*read-only"):
        run_sql(history[0], query)
    assert run_sql(history[0], "SELECT count(*) FROM runs")[1] == [(3,)]


def test_sql_reads_no_other_file_and_writes_none(history: tuple[Path, list[Path]],
                                                 tmp_path: Path) -> None:
    for query in (f"COPY runs TO '{tmp_path / 'out.csv'}'",
                  f"ATTACH '{tmp_path / 'other.duckdb'}' AS other",
                  "SET enable_external_access = true"):
        with pytest.raises(ConfigError):
            run_sql(history[0], query)
    assert list(tmp_path.iterdir()) == []
    names, rows = run_sql(history[0], "SELECT verdict, count(*) AS n FROM records "
                          "GROUP BY ALL ORDER BY n DESC, verdict")
    assert names == ["verdict", "n"]
    assert rows == [("valid", 90), ("warmup", 12), ("failed", 3), ("output_tokens", 3),
                    ("superseded", 3)]


def test_history_specs_name_a_run_directory(history: tuple[Path, list[Path]]) -> None:
    db, runs = history
    conn = read_only(db)
    try:
        assert resolve(conn, "history:synthetic@latest") == runs[2].resolve()
        assert resolve(conn, "history:synthetic@aaa111") == runs[1].resolve()
        assert resolve(conn, "history:synthetic@aaa") == runs[1].resolve()
        for spec, why in (("history:synthetic@ccc", "0 runs of 'synthetic' at a commit"),
                          ("history:other@latest", "0 runs of 'other'"),
                          ("history:synthetic", "expected history:EXPERIMENT@latest")):
            with pytest.raises(ConfigError, match=why):
                resolve(conn, spec)
    finally:
        conn.close()


def test_specs_avoid_the_other_side_and_match_one_definition(tmp_path: Path) -> None:
    """r1, r3, r4 share a definition; r2 (between them) has another. @latest is the
    newest of a definition that is not the other side; @previous the one before the
    newest; @last:K the K newest; :any matches every definition."""
    other = EXPERIMENT.replace("hand-made", "other")
    runs = [write_load_run(tmp_path / f"r{i}", f"r{i}", started=f"2026-01-0{i}T10:00:00+00:00",
                           evaluate=False) for i in range(1, 5)]
    (runs[1] / "experiment.toml").write_text(other)
    db = tmp_path / "h.duckdb"
    add_to_history(runs, db)
    conn = read_only(db)
    try:
        def names(spec: str, **kw: object) -> list[str]:
            return [p.name for p in resolve_runs(conn, spec, **kw)]  # type: ignore[arg-type]

        assert names("history:synthetic@latest") == ["r4"]
        assert names("history:synthetic@latest", avoid={"r4"}) == ["r3"]
        assert names("history:synthetic@latest", avoid={str(runs[3].resolve())}) == ["r3"]
        assert names("history:synthetic@last:2", avoid={"r4"}) == ["r3", "r1"]
        assert names("history:synthetic@previous") == ["r3"]
        assert names("history:synthetic@latest:any", avoid={"r4", "r3"}) == ["r2"]
        assert names("history:synthetic@last:2:any") == ["r4", "r3"]
        sha = hashlib.sha256(other.encode()).hexdigest()
        assert names("history:synthetic@latest", definition=sha) == ["r2"]
        with pytest.raises(ConfigError, match="r3, is the other side"):
            resolve_runs(conn, "history:synthetic@previous", avoid={"r3"})
        with pytest.raises(ConfigError, match=r"has 2 runs of 'synthetic' of the same "
                                              r"experiment definition .* besides the other"):
            resolve_runs(conn, "history:synthetic@last:3", avoid={"r1"})
    finally:
        conn.close()


def test_points_across_runs(history: tuple[Path, list[Path]]) -> None:
    conn = read_only(history[0])
    try:
        picked = selected_runs(conn, RunFilter(experiment="synthetic"))
        assert picked == ["r1", "r2", "r3"]
        assert selected_runs(conn, RunFilter(), "SELECT run_id FROM runs WHERE "
                             "git_commit = 'bbb222'") == ["r3"]
        one = pareto_points(conn, ["r3"])
        assert sorted((p.line, p.load) for p in one) == [
            ("fast", "c=1"), ("fast", "c=2"), ("slow", "c=1"), ("slow", "c=2")]
        several = pareto_points(conn, picked, mode="fast")
        assert {p.line for p in several} == {"r1 · fast", "r2 · fast", "r3 · fast"}
        assert all(p.tokens_per_s and p.itl_p95_ms and p.ttft_p95_ms for p in several)
        lines = overlay_points(conn, "e2e_ms_p95", picked, mode="slow")
        assert [(line, load) for line, load, _ in lines][:2] == [("r1 · slow", "c=1"),
                                                                ("r1 · slow", "c=2")]
    finally:
        conn.close()
