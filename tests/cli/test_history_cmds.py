"""kvlab history and kvlab export as a user types them, and kvlab run adding its run."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from kvlab.bench.calibrate.server import synthetic_process
from kvlab.cli import main
from kvlab.history.schema import connect
from tests.history.runs import write_load_run

SHIPPED = Path(__file__).parents[2] / "experiments" / "synthetic-endpoint.toml"


def kvlab(args: list[str], monkeypatch, capsys) -> tuple[int, str, str]:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(sys, "argv", ["kvlab", *args])
    try:
        main()
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def last_json(out: str) -> dict:
    return json.loads(out.strip().splitlines()[-1])


def test_add_runs_trend_sql_and_export(tmp_path: Path, monkeypatch, capsys) -> None:  # type: ignore[no-untyped-def]
    for i, day in enumerate((1, 2)):
        write_load_run(tmp_path / "runs" / f"r{i}", f"r{i}", commit=f"c{i}",
                       started=f"2026-01-0{day}T10:00:00+00:00", slowdown=1 + i)
    db = ["--db", str(tmp_path / "h.duckdb")]
    code, out, _ = kvlab(["history", "add", str(tmp_path / "runs"), *db], monkeypatch, capsys)
    assert code == 0 and out.startswith("2 runs added, 0 unchanged, 74 records")
    code, out, _ = kvlab(["history", "add", str(tmp_path / "runs"), *db, "--json"],
                         monkeypatch, capsys)
    assert last_json(out)["unchanged"] == 2

    code, out, _ = kvlab(["history", "runs", "--commit", "c1", *db, "--json"], monkeypatch,
                         capsys)
    assert [r["run_id"] for r in last_json(out)["runs"]] == ["r1"]

    plot = tmp_path / "trend.html"
    code, out, _ = kvlab(["history", "trend", "itl_effective_ms", "-e", "synthetic", "-m",
                          "fast", "--load", "c=1", "--plot", str(plot), *db], monkeypatch,
                         capsys)
    assert code == 0 and f"wrote {plot}" in out and "r0" in out and "r1" in out
    assert "data:image/png;base64," in plot.read_text()

    code, out, _ = kvlab(["history", "sql", "SELECT run_id, count(*) AS n FROM records "
                          "GROUP BY ALL ORDER BY ALL", *db, "--json"], monkeypatch, capsys)
    assert last_json(out) == {"columns": ["run_id", "n"], "rows": [["r0", 37], ["r1", 37]]}
    code, out, err = kvlab(["history", "sql", "DELETE FROM records", *db], monkeypatch,
                           capsys)
    assert code == 2 and out == "" and err.startswith("error: kvlab history sql only reads")
    assert len(err.strip().splitlines()) == 1

    for args in (["history:synthetic@latest"], ["history:synthetic@c0"],
                 ["--query", "SELECT run_id FROM runs"]):
        out_dir = tmp_path / "parquet" / str(len(args))
        code, out, _ = kvlab(["export", *args, "--parquet", str(out_dir), *db], monkeypatch,
                             capsys)
        assert code == 0 and str(out_dir / "records.parquet") in out
    one = pq.read_table(tmp_path / "parquet" / "1" / "runs.parquet").column("run_id")
    assert one.to_pylist() == ["r0"]  # the last export: @c0 wrote into the same folder
    every = pq.read_table(tmp_path / "parquet" / "2" / "records.parquet")
    assert every.num_rows == 74

    pareto = tmp_path / "pareto.png"
    code, out, _ = kvlab(["history", "pareto", "-e", "synthetic", "--out", str(pareto), *db],
                         monkeypatch, capsys)
    assert code == 0 and pareto.read_bytes().startswith(b"\x89PNG")
    code, _, err = kvlab(["history", "overlay", "e2e_ms_p95", "--out", str(tmp_path / "x.svg"),
                          *db], monkeypatch, capsys)
    assert code == 2 and "give a .png or .html file" in err


def test_one_line_errors(tmp_path: Path, monkeypatch, capsys) -> None:  # type: ignore[no-untyped-def]
    db = ["--db", str(tmp_path / "none.duckdb")]
    for args, needle in ((["history", "runs", *db], "no run history at"),
                         (["history", "add", str(tmp_path / "nope"), *db],
                          "no such file or directory"),
                         (["export", "--parquet", str(tmp_path)], "give a run"),
                         (["compare", "history:x@latest", "history:x@latest", "--db",
                           str(tmp_path / "other.duckdb")], "no run history at"),
                         (["compare", "history:x@latest", "history:x@latest", *db],
                          "the history has 0 runs of 'x'")):
        code, out, err = kvlab(args, monkeypatch, capsys)
        assert code == 2 and needle in out + err, (args, out, err)
    monkeypatch.setenv("KVLAB_HISTORY", "off")
    code, _, err = kvlab(["history", "runs"], monkeypatch, capsys)
    assert code == 2 and err == "error: KVLAB_HISTORY=off turns the run history off; unset " \
        "it or give --db PATH\n"


def synthetic_experiment(tmp_path: Path, url: str, itl_ms: int) -> Path:
    path = tmp_path / f"itl{itl_ms}.toml"
    text = SHIPPED.read_text().replace("http://127.0.0.1:8090", url)
    path.write_text(text.replace("body]\n", f"body]\nsynthetic = {{ ttft_ms = 20, itl_ms = "
                                 f"{itl_ms} }}\n"))
    return path


@pytest.mark.slow
def test_kvlab_run_adds_its_run_and_compare_reads_history_specs(  # type: ignore[no-untyped-def]
        tmp_path: Path, monkeypatch, capsys) -> None:
    db = tmp_path / "history.duckdb"
    monkeypatch.setenv("KVLAB_HISTORY", str(db))
    out_dir = ["--out", str(tmp_path / "runs"), "-q"]
    with synthetic_process() as url:
        base, slower = (synthetic_experiment(tmp_path, url, itl) for itl in (10, 30))
        assert kvlab(["run", str(base), *out_dir], monkeypatch, capsys)[0] == 0
        assert kvlab(["run", str(slower), *out_dir], monkeypatch, capsys)[0] == 0
        assert kvlab(["run", str(base), *out_dir, "--no-history"], monkeypatch, capsys)[0] == 0
        monkeypatch.setenv("KVLAB_HISTORY", "off")
        assert kvlab(["run", str(base), *out_dir], monkeypatch, capsys)[0] == 0
        # a history that cannot be written: one line, and the run's own status
        monkeypatch.setenv("KVLAB_HISTORY", str(tmp_path / "a-file" / "h.duckdb"))
        (tmp_path / "a-file").write_text("")
        code, _, err = kvlab(["run", str(base), *out_dir], monkeypatch, capsys)
        assert code == 0
        assert [line for line in err.splitlines() if line.startswith("history:")] == [
            next(line for line in err.splitlines() if " not added (" in line)]
    monkeypatch.setenv("KVLAB_HISTORY", str(db))
    conn = connect(db, read_only=True)
    try:
        paths = [p for (p,) in conn.execute("SELECT path FROM runs ORDER BY started, path")
                 .fetchall()]
        counts = conn.execute("SELECT count(*), count(*) FILTER (verdict = 'valid') "
                              "FROM records").fetchall()
    finally:
        conn.close()
    assert len(paths) == 2 and len(list((tmp_path / "runs").iterdir())) == 5
    assert counts == [(2 * 12, 2 * 10)]  # 5 queries x 2 capacities, + 1 warm-up each
    # the slower run has another definition (its own experiment file): only :any finds it
    code, _, err = kvlab(["compare", paths[0], "history:synthetic-endpoint@latest"],
                         monkeypatch, capsys)
    assert code == 2 and "of the same experiment definition (add :any for any)" in err
    code, out, _ = kvlab(["compare", paths[0], "history:synthetic-endpoint@latest:any",
                          "--fail-on", "slower:e2e_ms"], monkeypatch, capsys)
    assert code == 1 and f"B = {Path(paths[1]).name} ({paths[1]})" in out
    assert "gate: FAILED (2 of 4 checks failed; exit 1)" in out
