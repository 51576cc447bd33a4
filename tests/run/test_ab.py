"""``kvlab ab`` end to end against the synthetic server (one per module): a 3x ITL
candidate regresses, an A/A pair does not, every row is kept, bad input is one line."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kvlab.cli import app
from kvlab.errors import ConfigError
from kvlab.run.ab import AbRequest, block_rows, run_ab
from kvlab.rundir import RunDir, read_records
from tests.experiments import experiment, synthetic

WORKLOAD = {"queries": 4, "capacities": [256], "output_tokens": 8, "warmup": 1}


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    from kvlab.bench.calibrate.check import synthetic_process

    with synthetic_process() as base:
        yield base


@pytest.fixture
def files(url: str, tmp_path: Path) -> tuple[Path, Path]:
    """One file with a fast and a 3x slower mode; a second file with the slow one."""
    both = experiment("pair", synthetic(url, "fast", ttft_ms=2, itl_ms=2),
                      synthetic(url, "slow", ttft_ms=2, itl_ms=6), workload=WORKLOAD)
    alone = experiment("candidate", synthetic(url, "slow", ttft_ms=2, itl_ms=6),
                       workload=WORKLOAD)
    return both.write(tmp_path), alone.write(tmp_path)


def test_block_rows_are_abba_on_shared_prompts() -> None:
    rows = block_rows("a", "b", ["q1", "q2", "q3"], 1, 4)
    assert [r.mode for r in rows] == ["a", "a", "b", "b", "b", "b", "a", "a"]
    assert [r.query_id for r in rows[:4]] == ["q2", "q3", "q2", "q3"]
    assert [(r.query_id, r.repetition) for r in rows[4:6]] == [("q1", 2), ("q2", 2)]


def test_a_threefold_itl_regresses_and_keeps_every_row(files: tuple[Path, Path],
                                                       tmp_path: Path) -> None:
    both, _ = files
    result = run_ab(AbRequest(both, mode_a="fast", mode_b="slow",
                              metric="itl_effective_ms", max_rows=160),
                    tmp_path / "runs")
    assert result.verdict == "regress" and result.exit_code == 1
    assert result.last is not None and result.last.low > 1.05
    assert 2.0 < result.last.b_over_a < 4.0
    assert result.rows < 160  # stopped before the budget
    kept = [r for r in read_records(result.run_dir / "records.jsonl") if not r.warmup]
    assert len(kept) == result.rows == result.blocks * 8
    assert {r.mode for r in kept} == {"fast", "slow"}
    saved = json.loads(RunDir(result.run_dir).ab_path.read_text())
    assert saved["verdict"] == "regress" and len(saved["looks"]) == len(result.looks)
    assert (result.run_dir / "report.md").exists()


def test_an_aa_pair_is_not_a_regression(files: tuple[Path, Path], tmp_path: Path) -> None:
    both, _ = files
    result = run_ab(AbRequest(both, mode_a="fast", mode_b="fast",
                              metric="itl_effective_ms", max_rows=240, report=False),
                    tmp_path / "runs")
    assert result.b == "fast-b"
    assert result.verdict in ("pass", "inconclusive")
    assert result.exit_code in (0, 3)


def test_two_files_and_the_cli(files: tuple[Path, Path], tmp_path: Path) -> None:
    both, alone = files
    out = CliRunner().invoke(app, ["ab", str(both), str(alone), "--a", "fast",
                                   "--metric", "itl_effective_ms", "--max-rows", "160",
                                   "--no-report", "--quiet", "--json",
                                   "--out", str(tmp_path / "runs")])
    assert out.exit_code == 1, out.output
    result = json.loads(out.output.strip().splitlines()[-1])
    assert result["verdict"] == "regress" and result["b"] == "slow"


def test_a_spent_budget_is_inconclusive(files: tuple[Path, Path], tmp_path: Path) -> None:
    """The time budget runs out after the first block, before any look."""
    both, _ = files
    result = run_ab(AbRequest(both, mode_a="fast", mode_b="slow", metric="itl_effective_ms",
                              max_time_s=0.001, report=False), tmp_path / "runs")
    assert result.verdict == "inconclusive" and result.exit_code == 3
    assert "time budget" in result.why and result.rows == 8 and result.last is None


@pytest.mark.parametrize("request_kwargs, message", [
    (dict(mode_a="fast"), "name both sides"),
    (dict(mode_a="fast", mode_b="nope"), "no such mode"),
    (dict(mode_a="fast", mode_b="slow", block=3), "even number"),
    (dict(mode_a="fast", mode_b="slow", metric="tokens_per_second"), "not one of"),
    (dict(mode_a="fast", mode_b="slow", max_rows=8), "budget"),
])
def test_bad_input_is_one_line(files: tuple[Path, Path], tmp_path: Path,
                               request_kwargs: dict[str, object], message: str) -> None:
    both, _ = files
    with pytest.raises(ConfigError, match=message):
        run_ab(AbRequest(both, **request_kwargs), tmp_path / "runs")  # type: ignore[arg-type]
    assert not (tmp_path / "runs").exists()  # nothing sent, nothing left
