"""Issue 37's scenarios, as a CI pipeline meets them: ``kvlab compare --fail-on`` on run
directories kvlab's own way (a manifest with the plan and the points done).

- a run against itself (same path, same run id): one line, exit 2;
- ``history:E@latest`` when the candidate is the newest run: never the candidate;
- B lacking a mode: exit 1, the cell named; ``--allow-missing`` lists it;
- B killed mid-point: exit 1, "8 of 40 planned", and every count says so;
- several runs per side; a noise floor measured by ``kvlab floor``, kept, and used.
"""

from __future__ import annotations

import json
import re
import shutil
import sys

import pytest

from kvlab.cli import main
from kvlab.errors import RunInterrupted
from kvlab.run.runner import (
    RunOutput,
    RunRequest,
    SilentReporter,
    evaluate_run,
    run_experiment,
)
from tests.experiments import experiment, synthetic
from tests.gate_runs import EXPERIMENT, write_gate_run

LATER = "2026-01-01T12:00:00+00:00"


def kvlab(args: list[str], monkeypatch, capsys) -> tuple[int, str, str]:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(sys, "argv", ["kvlab", *args])
    try:
        main()
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def test_a_run_against_itself_is_one_line_and_exit_2(tmp_path, monkeypatch, capsys) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("KVLAB_HISTORY", "off")
    a = write_gate_run(tmp_path / "a", "a1", seed=1)
    code, out, err = kvlab(["compare", str(a), str(a), "--fail-on", "slower"], monkeypatch,
                           capsys)
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert err.startswith(f"error: A and B are the same run (path {a.resolve()})")
    copy = shutil.copytree(a, tmp_path / "copy")
    code, out, err = kvlab(["compare", str(a), str(copy)], monkeypatch, capsys)
    assert code == 2 and "A and B are the same run (run id a1)" in err
    # two runs started in the same second share a run id, not their records
    twin = write_gate_run(tmp_path / "twin", "a1", seed=2)
    code, out, err = kvlab(["compare", str(a), str(twin), "--fail-on", "slower"],
                           monkeypatch, capsys)
    assert code != 2 and "same run" not in err, err
    b = write_gate_run(tmp_path / "b", "b1", seed=2)
    code, _, err = kvlab(["compare", f"{a},{b}", str(b), "--fail-on", "slower"], monkeypatch,
                         capsys)
    assert code == 2 and "the same run (path" in err


def test_history_latest_never_resolves_to_the_candidate(tmp_path, monkeypatch, capsys) -> None:  # type: ignore[no-untyped-def]
    """kvlab run adds the candidate to the history, so it is E's newest run: the help's
    CI example once compared it with itself and passed a 3x slower candidate."""
    db = ["--db", str(tmp_path / "h.duckdb")]
    base = write_gate_run(tmp_path / "base", "base", seed=1)
    cand = write_gate_run(tmp_path / "cand", "cand", seed=2, slowdown=3.0, started=LATER)
    assert kvlab(["history", "add", str(cand), *db], monkeypatch, capsys)[0] == 0
    code, out, err = kvlab(["compare", "history:synthetic@latest", str(cand), *db,
                            "--fail-on", "slower"], monkeypatch, capsys)
    assert code == 2 and "besides the other side's; 1 needed" in err, (out, err)
    assert kvlab(["history", "add", str(base), *db], monkeypatch, capsys)[0] == 0
    code, out, err = kvlab(["compare", "history:synthetic@latest", str(cand), *db,
                            "--fail-on", "slower"], monkeypatch, capsys)
    assert code == 1 and out.startswith(f"A = base ({base.resolve()})"), (out, err)
    assert "e2e_ms: B/A = " in out and ": regress;" in out
    # the help's CI example: the run before the newest against the newest
    code, out, _ = kvlab(["compare", "history:synthetic@previous", "history:synthetic@latest",
                          *db, "--fail-on", "slower", "--json"], monkeypatch, capsys)
    doc = json.loads(out.strip().splitlines()[-1])
    assert code == 1 and [s["run_id"] for s in doc["sides"]["a"]] == ["base"]
    assert [s["run_id"] for s in doc["sides"]["b"]] == ["cand"]
    # a side of the K newest runs, the candidate left out
    older = [write_gate_run(tmp_path / f"old{i}", f"old{i}", seed=3 + i,
                            started=f"2026-01-01T0{i}:00:00+00:00") for i in range(2)]
    assert kvlab(["history", "add", *map(str, older), *db], monkeypatch, capsys)[0] == 0
    code, out, _ = kvlab(["compare", "history:synthetic@last:3", str(cand), *db,
                          "--fail-on", "slower", "--json"], monkeypatch, capsys)
    doc = json.loads(out.strip().splitlines()[-1])
    assert [s["run_id"] for s in doc["sides"]["a"]] == ["base", "old1", "old0"]
    assert code == 1 and all(c["runs_a"] == 3 for c in doc["gate"]["checks"]
                             if c["kind"] == "slower")


def test_b_lacking_a_mode_fails_named(tmp_path, monkeypatch, capsys) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("KVLAB_HISTORY", "off")
    a = write_gate_run(tmp_path / "a", "a1", seed=1)
    b = write_gate_run(tmp_path / "b", "b1", seed=1, modes=("slow",))
    args = ["compare", str(a), str(b), "--fail-on", "slower:e2e_ms:5%"]
    code, out, _ = kvlab(args, monkeypatch, capsys)
    assert code == 1, out
    assert "fast @ 256 c=4 plan: not measured in B: 0 of 40 planned: fail" in out
    code, out, _ = kvlab([*args, "--allow-missing", "--json"], monkeypatch, capsys)
    doc = json.loads(out.strip().splitlines()[-1])["gate"]
    assert code != 1 and doc["allow_missing"] and len(doc["missing"]) == 1
    assert "allowed" in doc["missing"][0]


def test_b_killed_mid_point_fails_with_k_of_n_planned(tmp_path, monkeypatch, capsys) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("KVLAB_HISTORY", "off")
    a = write_gate_run(tmp_path / "a", "a1", seed=1)
    b = write_gate_run(tmp_path / "b", "b1", seed=1, sent=8)  # fast: 8 of its 40 sent
    code, out, _ = kvlab(["compare", str(a), str(b), "--fail-on", "slower"], monkeypatch,
                         capsys)
    assert code == 1, out
    assert "run 1 of B: 8 of 40 planned, not finished" in out
    assert "B 8 valid of 40 planned (8 sent), not finished" in out
    evaluation = evaluate_run(b)
    fast = next(s for s in evaluation.summaries if s.mode == "fast")
    assert fast.count.planned == 40 and not fast.count.finished
    doc = json.loads((b / "evaluation.json").read_text())
    counts = {s["mode"]: s["valid"] for s in doc["summaries"]}
    assert counts["fast"]["planned"] == 40 and counts["fast"]["finished"] is False
    assert counts["slow"]["planned"] == 40 and counts["slow"]["finished"] is True
    assert "8 of 40 planned, not finished" in (b / "report.md").read_text()
    from kvlab.report.html import write_html

    assert "8 of 40 planned, not finished" in write_html(b, evaluation=evaluation).read_text()


def test_several_runs_per_side_are_judged_together(tmp_path, monkeypatch, capsys) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("KVLAB_HISTORY", "off")
    a = ",".join(str(write_gate_run(tmp_path / f"a{i}", f"a{i}", seed=i)) for i in range(3))
    b = ",".join(str(write_gate_run(tmp_path / f"b{i}", f"b{i}", seed=10 + i))
                 for i in range(3))
    code, out, _ = kvlab(["compare", a, b, "--fail-on", "slower", "--json"], monkeypatch,
                         capsys)
    doc = json.loads(out.strip().splitlines()[-1])
    slower = [c for c in doc["gate"]["checks"] if c["kind"] == "slower"]
    assert code != 1 and len(doc["sides"]["a"]) == 3 and len(slower) == 2
    assert all(c["runs_a"] == c["runs_b"] == 3 and "resampled" in c["between"]
               for c in slower)
    slow = ",".join(str(write_gate_run(tmp_path / f"s{i}", f"s{i}", seed=20 + i,
                                       slowdown=2.0)) for i in range(3))
    code, out, _ = kvlab(["compare", a, slow, "--fail-on", "slower"], monkeypatch, capsys)
    assert code == 1 and "fast @ 256 c=4 e2e_ms: B/A = " in out


def test_a_noise_floor_is_measured_kept_and_used(tmp_path, monkeypatch, capsys) -> None:  # type: ignore[no-untyped-def]
    db = tmp_path / "h.duckdb"
    monkeypatch.setenv("KVLAB_HISTORY", str(db))
    runs = [write_gate_run(tmp_path / f"a{i}", f"a{i}", seed=i) for i in range(4)]
    cand = write_gate_run(tmp_path / "cand", "cand", seed=9, started=LATER)
    compare = ["compare", str(runs[3]), str(cand), "--fail-on", "slower"]
    code, out, _ = kvlab(compare, monkeypatch, capsys)
    assert "no noise floor known (no run history)" in out
    code, out, err = kvlab(["floor", ",".join(str(r) for r in runs[:3])], monkeypatch, capsys)
    assert code == 0 and "noise floor of 10 cell metrics from 3 runs kept in" in out, err
    assert "fast @ 256 c=4 e2e_ms: " in out
    code, out, _ = kvlab(compare, monkeypatch, capsys)
    assert "noise floor from kvlab floor" in out and "(3 runs, kvlab floor " in out
    assert code != 1
    # kept across a rebuild (the sidecar), and the fallback to the history's runs
    assert kvlab(["history", "add", *map(str, runs[:3])], monkeypatch, capsys)[0] == 0
    assert kvlab(["history", "rebuild"], monkeypatch, capsys)[0] == 0
    code, out, _ = kvlab(["history", "sql", "SELECT count(*) FROM noise_floors", "--json"],
                         monkeypatch, capsys)
    assert json.loads(out)["rows"] == [[10]]
    (tmp_path / "h.duckdb.floors").unlink()
    assert kvlab(["history", "rebuild"], monkeypatch, capsys)[0] == 0
    code, out, _ = kvlab(compare, monkeypatch, capsys)
    assert "noise floor from 3 history runs" in out
    # a floor needs 3 runs of one definition
    other = write_gate_run(tmp_path / "other", "other", seed=5,
                           experiment=EXPERIMENT.replace("hand-made", "other"))
    code, _, err = kvlab(["floor", str(runs[0]), str(runs[1]), str(other)], monkeypatch,
                         capsys)
    assert code == 2 and "one experiment definition" in err
    code, _, err = kvlab(["floor", str(runs[0]), str(runs[1])], monkeypatch, capsys)
    assert code == 2 and "at least 3 identical runs (given 2)" in err


class StopAfter(SilentReporter):
    """A run stopped after ``n`` measured records, inside its load point (as a server
    that died would stop it; a KeyboardInterrupt here would upset CPython 3.11.7's ast
    module for later tests in the same process)."""

    def __init__(self, n: int) -> None:
        self.n = n

    def advance(self, record: object) -> None:
        self.n -= 1
        if self.n == 0:
            raise RunInterrupted("stopped by the test after its 3rd measured record")


def test_a_real_run_cut_off_mid_point_fails_the_gate(tmp_path, monkeypatch, capsys) -> None:  # type: ignore[no-untyped-def]
    """kvlab run against the synthetic server records its plan; a candidate stopped
    after 3 of its point's 8 requests fails, named "k of 8 planned"."""
    from kvlab.bench.calibrate.check import synthetic_process

    monkeypatch.setenv("KVLAB_HISTORY", "off")
    with synthetic_process() as url:
        path = experiment("synthetic", synthetic(url, ttft_ms=2, itl_ms=1),
                          workload=dict(queries=4, capacities=[256], output_tokens=4),
                          load=dict(kind="concurrency", values=[2], requests=8)
                          ).write(tmp_path)
        base = run_experiment(RunRequest(path), RunOutput(tmp_path / "a", html=False))
        with pytest.raises(RunInterrupted):
            run_experiment(RunRequest(path), RunOutput(tmp_path / "b", html=False,
                                                       reporter=StopAfter(3)))
    (cut,) = (tmp_path / "b").iterdir()
    manifest = json.loads((cut / "manifest.json").read_text())
    assert manifest["rows_planned"] == [["chat", 256, "c=2", 8]]
    assert "points_done" not in manifest
    assert json.loads((base.run_dir.path / "manifest.json").read_text())["points_done"] == [
        ["chat", 256, "c=2"]]
    code, out, _ = kvlab(["compare", str(base.run_dir.path), str(cut), "--fail-on", "slower"],
                         monkeypatch, capsys)
    assert code == 1, out
    # the requests in flight when it stopped still land: k of 8, k < 8
    found = re.search(r"chat @ 256 c=2 plan: run 1 of B: (\d) of 8 planned, not finished: "
                      r"fail", out)
    assert found is not None and 3 <= int(found[1]) < 8, out


def test_kvlab_floor_runs_the_experiment_k_times(tmp_path, monkeypatch, capsys) -> None:  # type: ignore[no-untyped-def]
    """--experiment FILE --times 3: three runs on the synthetic server, each added to the
    history, and their floor kept; the gate then finds it for a fourth run."""
    from kvlab.bench.calibrate.check import synthetic_process

    db = tmp_path / "h.duckdb"
    monkeypatch.setenv("KVLAB_HISTORY", str(db))
    with synthetic_process() as url:
        path = experiment("synthetic", synthetic(url, ttft_ms=2, itl_ms=1),
                          workload=dict(queries=10, capacities=[256], output_tokens=4)
                          ).write(tmp_path)
        code, out, err = kvlab(["floor", "--experiment", str(path), "--times", "3", "--out",
                                str(tmp_path / "runs")], monkeypatch, capsys)
        assert code == 0, err
        one = run_experiment(RunRequest(path), RunOutput(tmp_path / "more", html=False))
        two = run_experiment(RunRequest(path), RunOutput(tmp_path / "more", html=False))
    assert "noise floor of 5 cell metrics from 3 runs kept in" in out
    code, out, _ = kvlab(["history", "runs", "--json"], monkeypatch, capsys)
    assert len(json.loads(out)["runs"]) == 3
    code, out, _ = kvlab(["compare", str(one.run_dir.path), str(two.run_dir.path),
                          "--fail-on", "slower"], monkeypatch, capsys)
    assert "noise floor from kvlab floor" in out and "80% upper bound used" in out
