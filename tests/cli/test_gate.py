"""kvlab compare --fail-on as a CI pipeline runs it: real runs on the synthetic server.

A/A: the same experiment run twice passes the gate. A/B: the candidate's ITL is 30 ms
instead of 10 (e2e at least 470 ms instead of about 170), so it is slower beyond any
threshold under its slowdown and the gate fails, naming the cells; a rule kvlab cannot
read is exit 2. A candidate whose requests all failed fails the gate (its valid share
fell), and a cell the gate cannot judge exits 2 unless --accept-unjudged.

Both thresholds come from the noise this machine can put between two runs, measured in
the same test: a request's e2e waits for the CPU about four times (the server's wake-up
for the request, its first and last writes, the client's read), each late by up to the
worst wake-up lateness w seen. The A/A threshold is 4w over 170 ms. The candidate's
deadlines are absolute, so it is never faster than its schedule (470 ms) while the
base is at most 170 + 4w ms: its gate threshold is half that guaranteed slowdown.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from kvlab.bench.calibrate.server import synthetic_process
from kvlab.cli import main
from kvlab.run.runner import RunOutput, RunRequest, run_experiment
from kvlab.rundir import Outcome
from tests.lateness import LatenessProbe
from tests.report.synthetic_runs import two_mode_rows, write_run

SHIPPED = Path(__file__).parents[2] / "experiments" / "synthetic-endpoint.toml"
E2E_MS = 20 + 15 * 10  # the schedule: TTFT 20 ms, then 15 gaps of 10 ms
SLOW_E2E_MS = 20 + 15 * 30  # the candidate's: 15 gaps of 30 ms


def run(tmp_path: Path, url: str, name: str, itl_ms: int) -> Path:
    path = tmp_path / f"{name}.toml"
    text = SHIPPED.read_text().replace("http://127.0.0.1:8090", url)
    path.write_text(text.replace("body]\n", f"body]\nsynthetic = {{ ttft_ms = 20, itl_ms = "
                                 f"{itl_ms} }}\n"))
    return run_experiment(RunRequest(path), RunOutput(tmp_path / name, html=False)).run_dir.path


def compare(args: list[str], monkeypatch, capsys) -> tuple[int, str, str]:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(sys, "argv", ["kvlab", "compare", *args])
    try:
        main()
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.slow
def test_an_aa_run_passes_and_a_slower_candidate_fails(tmp_path, monkeypatch, capsys) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("KVLAB_HISTORY", str(tmp_path / "history.duckdb"))
    with synthetic_process() as url, LatenessProbe() as probe:
        base = run(tmp_path, url, "base", 10)
        again = run(tmp_path, url, "again", 10)
        slower = run(tmp_path, url, "slower", 30)
    guaranteed = SLOW_E2E_MS / (E2E_MS + probe.lateness_ms(hops=4))  # B/A at least
    code, out, err = compare([str(base), str(again), "--fail-on", "slower", "--fail-on",
                              "slower:itl_effective_ms"], monkeypatch, capsys)
    # identical runs: never a regression (pass, or inconclusive when the rows are noisy)
    assert code in (0, 3), (out, err, probe)
    assert "regress" not in out.split("gate: fail when")[-1].replace("false regress", "")
    assert "valid_share: A 100.0%, B 100.0%" in out
    assert "no noise floor known" in out and "over 4 slower checks (Holm)" in out

    code, out, _ = compare([str(base), str(slower), "--fail-on", "slower", "--json"],
                           monkeypatch, capsys)
    doc = json.loads(out.strip().splitlines()[-1])
    assert code == 1 and doc["gate"]["failed"], (doc["gate"], probe)
    assert {(c["kind"], c["capacity"], c["verdict"]) for c in doc["gate"]["checks"]} == {
        ("slower", 512, "regress"), ("slower", 2048, "regress"),
        ("failures", 512, "pass"), ("failures", 2048, "pass")}
    assert all(c["b_over_a"] > guaranteed for c in doc["gate"]["checks"]
               if c["kind"] == "slower")

    code, out, err = compare([str(base), str(slower), "--fail-on", "slower:e2e_ms"],
                             monkeypatch, capsys)
    assert code == 1 and "gate: FAILED (2 of 4 checks failed; exit 1)" in out
    assert "synthetic-chat @ 512 sequential e2e_ms: B/A = " in out

    code, out, err = compare([str(base), str(again), "--fail-on", "quicker"], monkeypatch,
                             capsys)
    assert code == 2 and out == "" and err.startswith("error: --fail-on 'quicker'")


def failed_run(path: Path) -> Path:
    """A run of mode "fast" whose every measured request was answered HTTP 500 (a fault
    no real server gives on demand: the rows are written by hand)."""
    rows = [r.model_copy(update={"outcome": Outcome.HTTP_ERROR, "http_status": 500,
                                 "error": "internal error", "output_tokens": None,
                                 "prompt_tokens": None})
            if not r.warmup else r for r in fast_rows()]
    return write_run(path, rows, {"run_id": "b1", "kvlab_version": "test"})


def fast_rows() -> list:
    return [r for r in two_mode_rows(n=6, capacities=(256,)) if r.mode == "fast"]


def test_a_candidate_whose_requests_all_failed_fails_the_gate(tmp_path, monkeypatch,  # type: ignore[no-untyped-def]
                                                              capsys) -> None:
    """Issue 28: B's measured requests all answered HTTP 500; the gate once printed
    "gate: passed (0 of 1 checks failed)" and exited 0."""
    base = write_run(tmp_path / "a", fast_rows(), {"run_id": "a1", "kvlab_version": "test"})
    broken = failed_run(tmp_path / "b")
    monkeypatch.setenv("KVLAB_HISTORY", "off")
    code, out, _ = compare([str(base), str(broken), "--fail-on", "slower"], monkeypatch,
                           capsys)
    assert code == 1, out
    assert "B 0 valid of 6 (refused: 6 failed)" in out
    assert "fast @ 256 sequential e2e_ms: not judged (refused: no valid row in B)" in out
    assert "fast @ 256 sequential valid_share: A 100.0%, B 0.0%" in out
    assert "gate: FAILED (1 of 2 checks failed, 1 not judged" in out
    code, out, _ = compare([str(base), str(broken), "--fail-on", "slower", "--json"],
                           monkeypatch, capsys)
    doc = json.loads(out.strip().splitlines()[-1])["gate"]
    assert code == 1 and doc["exit_code"] == 1 and len(doc["unjudged"]) == 1


def test_an_unjudged_cell_exits_2_unless_accepted(tmp_path, monkeypatch, capsys) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("KVLAB_HISTORY", "off")
    base = write_run(tmp_path / "a", fast_rows(), {"run_id": "a1", "kvlab_version": "test"})
    broken = failed_run(tmp_path / "b")
    args = [str(base), str(broken), "--fail-on", "slower", "--fail-on", "failures:100%"]
    code, out, _ = compare(args, monkeypatch, capsys)
    assert code == 2 and "gate: NOT JUDGED (0 of 2 checks failed, 1 not judged" in out
    code, out, _ = compare([*args, "--accept-unjudged"], monkeypatch, capsys)
    assert code == 0 and "1 not judged, accepted by --accept-unjudged; exit 0" in out
    assert "not judged (refused: no valid row in B)" in out  # still listed, with its reason
