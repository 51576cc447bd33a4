"""kvlab report / kvlab compare through the real entry point (kvlab.cli.main)."""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path

import pytest

from kvlab.cli import main
from kvlab.report.csv_export import RECORD_COLUMNS
from tests.report.synthetic_runs import two_mode_rows, write_run


def _run(args: list[str], monkeypatch: pytest.MonkeyPatch,
         capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    monkeypatch.setattr(sys, "argv", ["kvlab", *args])
    code = 0
    try:
        main()
    except SystemExit as exc:
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def test_report_writes_markdown_html_and_csv(tmp_path, monkeypatch, capsys) -> None:  # type: ignore[no-untyped-def]
    run = write_run(tmp_path / "run", two_mode_rows(n=5, capacities=(256,)))
    code, out, err = _run(["report", str(run), "--html", "--csv"], monkeypatch, capsys)
    assert code == 0, err
    names = [Path(line).name for line in out.split()]
    assert names == ["evaluation.json", "report.md", "report.html", "records.csv",
                     "summaries.csv"]
    assert all((run / n).is_file() for n in names)
    md = (run / "report.md").read_text(encoding="utf-8")
    assert "## Comparisons with 95 % intervals and verdicts" in md and "fast faster" in md
    with (run / "records.csv").open(newline="") as handle:
        assert tuple(next(csv.reader(handle))) == RECORD_COLUMNS


def test_report_json_and_plain_markdown_only(tmp_path, monkeypatch, capsys) -> None:  # type: ignore[no-untyped-def]
    run = write_run(tmp_path / "run", two_mode_rows(n=5, capacities=(256,)))
    code, out, _ = _run(["report", str(run), "--json"], monkeypatch, capsys)
    doc = json.loads(out.strip().splitlines()[-1])
    assert code == 0 and [Path(p).name for p in doc["written"]] == ["evaluation.json",
                                                                     "report.md"]
    assert not (run / "report.html").exists()


@pytest.mark.parametrize("make", ["missing", "empty_dir", "file"])
def test_report_bad_input_is_one_line_exit_2(make, tmp_path, monkeypatch, capsys) -> None:  # type: ignore[no-untyped-def]
    target = tmp_path / "x"
    if make == "empty_dir":
        target.mkdir()
    elif make == "file":
        target.write_text("not a run")
    code, out, err = _run(["report", str(target), "--html"], monkeypatch, capsys)
    assert code == 2 and out == ""
    assert err.startswith("error: ") and len(err.strip().splitlines()) == 1
    assert "Traceback" not in err


def test_compare_json_and_table(tmp_path, monkeypatch, capsys) -> None:  # type: ignore[no-untyped-def]
    a = write_run(tmp_path / "a", two_mode_rows(n=5, capacities=(256,)))
    b = write_run(tmp_path / "b", two_mode_rows(n=5, capacities=(256,), speedup=1.5),
                  {"run_id": "r2", "kvlab_version": "test"})
    code, out, _ = _run(["compare", str(a), str(b), "--json"], monkeypatch, capsys)
    doc = json.loads(out.strip().splitlines()[-1])
    assert code == 0 and doc["modes"] == ["slow", "fast"]
    fast = next(c for c in doc["comparisons"] if c["mode"] == "fast")
    prefill = next(m for m in fast["metrics"] if m["metric"] == "prefill_ms")
    assert prefill["verdict"] == "slower" and prefill["interval"]["high"] < 1
    code, out, _ = _run(["compare", str(a), str(b)], monkeypatch, capsys)
    assert code == 0 and "B slower" in out and "fast @ 256, sequential" in out


def test_compare_refuses_incomparable_runs(tmp_path, monkeypatch, capsys) -> None:  # type: ignore[no-untyped-def]
    a = write_run(tmp_path / "a", two_mode_rows(n=5, capacities=(256,)))
    rows = [r.model_copy(update={"requested_tokens": 32})
            for r in two_mode_rows(n=5, capacities=(256,))]
    b = write_run(tmp_path / "b", rows, {"run_id": "r2", "kvlab_version": "test"})
    code, out, err = _run(["compare", str(a), str(b)], monkeypatch, capsys)
    assert code == 2 and out == ""
    assert err.strip() == ("error: runs are not comparable: different output tokens "
                           "(A requested [8], B requested [32])")


def test_compare_two_peer_files_with_verdicts(tmp_path, monkeypatch, capsys) -> None:  # type: ignore[no-untyped-def]
    from tests.peers.files import guidellm_report, vllm_result, write

    slow = write(tmp_path / "a.json", guidellm_report(n=8, gap=0.012))
    fast = write(tmp_path / "b.json", guidellm_report(n=8, gap=0.010))
    code, out, err = _run(["compare", str(slow), str(fast), "--json"], monkeypatch, capsys)
    assert code == 0, err
    data = json.loads(out.strip().splitlines()[-1])
    (cell,) = data["comparisons"]
    assert cell["mode"] == "guidellm"
    itl = next(m for m in cell["metrics"] if m["metric"] == "itl_effective_ms")
    assert itl["ratio"] == pytest.approx(1.2) and itl["paired"] is True
    e2e = next(m for m in cell["metrics"] if m["metric"] == "e2e_ms")
    assert e2e["verdict"] == "faster"
    # A vLLM file whose requests stopped short is refused, and named, in one line.
    short = write(tmp_path / "short.json", vllm_result(output_lens=[64] * 5 + [3]))
    code, _, err = _run(["compare", str(short), str(fast)], monkeypatch, capsys)
    assert code == 2 and str(short) in err and len(err.strip().splitlines()) == 1


def test_summary_prints_the_page_and_writes_index(tmp_path, monkeypatch, capsys) -> None:  # type: ignore[no-untyped-def]
    write_run(tmp_path / "runs" / "synthetic-20260101-120000",
              two_mode_rows(n=5, capacities=(256,)))
    code, out, err = _run(["report", str(tmp_path / "runs" / "synthetic-20260101-120000")],
                          monkeypatch, capsys)  # evaluation.json, as kvlab run leaves it
    assert code == 0, err
    code, out, err = _run(["summary", str(tmp_path)], monkeypatch, capsys)
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0] == f"Results in {tmp_path}/" and lines[1].startswith("Machine: ")
    assert "- synthetic: e2e at capacity 256: slow " in out and "fast faster" in out
    assert out.count("(step not run)") == 8  # kv-bench, memory and the make run runs
    assert "(step not run: make run-full runs it)" in out  # the cross-check
    assert f"Wrote {tmp_path / 'index.html'}" in out and (tmp_path / "index.html").is_file()
    code, out, _ = _run(["summary", str(tmp_path), "--json", "--no-html"], monkeypatch, capsys)
    doc = json.loads(out.strip().splitlines()[-1])
    assert code == 0 and doc["index_html"] is None and len(doc["headlines"]) == 10
    code, _, err = _run(["summary", str(tmp_path / "nope")], monkeypatch, capsys)
    assert code == 2 and err.startswith("error: ") and "no such folder" in err
