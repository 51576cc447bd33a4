"""prove and kv-bench through the real entry point (kvlab.cli.main), in process."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import torch

from kvlab.cli import main


def _run(args: list[str], monkeypatch: pytest.MonkeyPatch,
         capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    monkeypatch.setattr(sys, "argv", ["kvlab", *args])
    threads = torch.get_num_threads()
    try:
        with pytest.raises(SystemExit) as exit_info:
            main()
    finally:
        torch.set_num_threads(threads)
    out, err = capsys.readouterr()
    return int(exit_info.value.code or 0), out, err


def test_prove_passes_and_prints_the_checks(monkeypatch, capsys) -> None:  # type: ignore[no-untyped-def]
    code, out, _ = _run(["prove", "--prompt-tokens", "12", "--new-tokens", "4"],
                        monkeypatch, capsys)
    assert code == 0
    assert "q4  1 1 1 1 1 ." in out and "q5  1 1 1 1 1 1" in out
    for preset in ("toy:", "toy-gqa:", "toy-mqa:"):
        assert preset in out
    assert "1,090,080 at max_len 512" in out
    assert "15 = 12 + 4 - 1" in out and "FAIL" not in out
    assert "all checks passed" in out


def test_prove_json(monkeypatch, capsys) -> None:  # type: ignore[no-untyped-def]
    code, out, _ = _run(["prove", "--prompt-tokens", "6", "--new-tokens", "3", "--json",
                         "--preset", "toy-mqa"], monkeypatch, capsys)
    doc = json.loads(out.strip().splitlines()[-1])
    assert code == 0 and doc["ok"] is True
    assert [p["preset"] for p in doc["proofs"]] == ["toy-mqa", "toy-gqa"]
    assert all(p["cache_lengths"] == [8, 8, 8] for p in doc["proofs"])


def test_kv_bench_writes_files(tmp_path: Path, monkeypatch, capsys) -> None:  # type: ignore[no-untyped-def]
    out_dir = tmp_path / "kvb"
    code, out, _ = _run(["kv-bench", "--contexts", "16", "--contexts", "8", "--new-tokens", "3",
                         "--repeats", "1", "--threads", "1", "--out", str(out_dir)],
                        monkeypatch, capsys)
    assert code == 0
    assert "decode speedup" in out and "cannot exceed about N = 3" in out
    for name in ("kv-bench.json", "kv-bench.csv", "kv-bench.png"):
        assert (out_dir / name).stat().st_size > 0
    doc = json.loads((out_dir / "kv-bench.json").read_text())
    assert [row["context"] for row in doc["rows"]] == [8, 16]
    assert doc["machine"]["cores"] >= 1 and len(doc["machine"]["load_average"]) == 3


def test_kv_bench_json_last_line(tmp_path: Path, monkeypatch, capsys) -> None:  # type: ignore[no-untyped-def]
    code, out, _ = _run(["kv-bench", "--contexts", "16,8,8", "--new-tokens", "2", "--repeats",
                         "1", "--threads", "1", "--out", str(tmp_path), "--json"],
                        monkeypatch, capsys)
    doc = json.loads(out.strip().splitlines()[-1])
    assert code == 0 and len(doc["files"]) == 3
    assert [row["context"] for row in doc["rows"]] == [8, 16]  # sorted, each once


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["prove", "--preset", "nope"], "unknown model preset 'nope'"),
        (["prove", "--prompt-tokens", "0"], "must be positive"),
        (["prove", "--new-tokens", "-3"], "must be positive"),
        (["prove", "--prompt-tokens", "9000"], "max_len is 8192"),
        (["kv-bench", "--contexts", "32,abc"], "--contexts: 'abc' is not a whole number"),
        (["kv-bench", "--contexts", "0"], "must be positive"),
        (["kv-bench", "--new-tokens", "0"], "at least 2"),
        (["kv-bench", "--repeats", "0"], "must be positive"),
        (["kv-bench", "--preset", "nope"], "unknown model preset"),
        (["prove", "--model", "nope"], "unknown model 'nope'"),
        (["prove", "--model", "/no/such.gguf"], "does not exist"),
        (["kv-bench", "--model", "nope"], "unknown model 'nope'"),
        (["engine-check", "--against", "vllm"], "--against takes transformers"),
        (["engine-check", "--queries", "31"], "queries must be within 1..30"),
        (["engine-speed", "--new-tokens", "1"], "--new-tokens >= 2"),
        (["engine-speed", "--contexts", "x"], "--contexts: 'x' is not a whole number"),
        (["engine-check", "--capacities", "512", "--capacities", "-1"],
         "--capacities: -1 must be positive"),
    ],
)
def test_bad_input_is_one_line_exit_2(args, fragment, monkeypatch, capsys) -> None:  # type: ignore[no-untyped-def]
    code, _, err = _run(args, monkeypatch, capsys)
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and fragment in lines[0]
    assert "Traceback" not in err
