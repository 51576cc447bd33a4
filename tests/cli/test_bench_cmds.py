"""CLI: one-line errors (exit 2, no traceback), explain, evaluate on a saved run."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from kvlab.bench.records import RecordStore
from tests.bench.rows import MS, row


def kvlab(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kvlab", *args], capture_output=True,
                          text=True, timeout=120)


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["run", "no-such.toml"], "cannot read the experiment file"),
        (["evaluate", "/nonexistent-run"], "is not a run directory"),
        (["explain", "--", "-1"], "must be positive"),
    ],
)
def test_one_line_errors(args, needle) -> None:
    result = kvlab(*args)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0] and "Traceback" not in result.stderr


def test_bad_experiment_is_one_line(tmp_path) -> None:
    path = tmp_path / "x.toml"
    path.write_text('name = "x"\n[[modes]]\nname = "a"\napi = "openai"\n')
    result = kvlab("run", str(path))
    assert result.returncode == 2
    assert result.stderr.strip() == (
        f"error: {path}: modes[0].api: 'openai' is not one of "
        "llamacpp-completion, openai-chat, openai-completion"
    )


def test_explain() -> None:
    general = kvlab("explain").stdout
    assert "+25.00 %" in general and "16.67 %" in general
    assert "16.67 %" in kvlab("explain", "1.2").stdout


def test_evaluate_a_saved_run(tmp_path) -> None:
    run = tmp_path / "x-run"
    run.mkdir()
    (run / "experiment.toml").write_text(
        'name = "x"\ncompare = [["a", "b"]]\n[[modes]]\nname = "a"\n[[modes]]\nname = "b"\n')
    with RecordStore(run / "records.jsonl") as store:
        for mode, end in (("a", 1200), ("b", 1000)):
            store.append(row(mode=mode, t_end=end * MS))
    result = kvlab("evaluate", str(run), "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout.strip().splitlines()[-1])
    assert data["comparisons"][0]["metrics"]["e2e_ms"]["ratio"] == pytest.approx(1.2)
    assert (run / "report.md").exists() and (run / "evaluation.json").exists()
