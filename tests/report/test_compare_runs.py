"""Run against run: matching (mode, capacity) rows, refusing incomparable workloads."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvlab.analysis.stats import Verdict
from kvlab.errors import ValidationFailure
from kvlab.report.compare_runs import compare_runs
from kvlab.rundir import load_run
from tests.report.synthetic_runs import two_mode_rows, write_run

R = 300


def _runs(tmp_path: Path, rows_b: list) -> tuple:  # type: ignore[type-arg]
    a = write_run(tmp_path / "a", two_mode_rows(n=6, capacities=(256,)))
    b = write_run(tmp_path / "b", rows_b)
    return load_run(a), load_run(b)


def test_same_work_is_compared_mode_by_mode(tmp_path: Path) -> None:
    # B's "fast" mode is only 1.5x faster than "slow" in prefill (A's was 2x): B slower.
    a, b = _runs(tmp_path, two_mode_rows(n=6, capacities=(256,), speedup=1.5))
    result = compare_runs(a, b, resamples=R)
    assert result.modes == ["slow", "fast"]
    by_mode = {mode: {c.metric: c for c in comp.metrics} for mode, comp in result.comparisons}
    assert by_mode["slow"]["prefill_ms"].verdict == Verdict.NO_DIFFERENCE
    assert by_mode["fast"]["prefill_ms"].verdict == Verdict.SLOWER
    assert abs(by_mode["fast"]["prefill_ms"].ratio - 0.75) < 1e-9
    assert by_mode["fast"]["e2e_ms"].paired
    doc = result.to_dict()
    assert doc["comparisons"][1]["mode"] == "fast"
    assert doc["comparisons"][1]["metrics"][1]["verdict"] == "slower"
    assert "### mode fast" in result.markdown()


def test_different_prompts_are_refused(tmp_path: Path) -> None:
    rows = two_mode_rows(n=6, capacities=(256,))
    rows = [r.model_copy(update={"prompt_sha256": "f" * 64}) if r.query_id == "q02" else r
            for r in rows]
    with pytest.raises(ValidationFailure, match="query q02 at capacity 256 has prompt sha256"):
        compare_runs(*_runs(tmp_path, rows), resamples=R)


def test_different_output_tokens_are_refused(tmp_path: Path) -> None:
    rows = [r.model_copy(update={"requested_tokens": 16})
            for r in two_mode_rows(n=6, capacities=(256,))]
    with pytest.raises(ValidationFailure, match=r"different output tokens \(A requested \[8\]"):
        compare_runs(*_runs(tmp_path, rows), resamples=R)


def test_no_common_mode_is_refused(tmp_path: Path) -> None:
    rows = [r.model_copy(update={"mode": "other-" + r.mode})
            for r in two_mode_rows(n=6, capacities=(256,))]
    with pytest.raises(ValidationFailure, match="no common mode"):
        compare_runs(*_runs(tmp_path, rows), resamples=R)


def test_no_common_capacity_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValidationFailure, match=r"no \(mode, capacity\) in common"):
        compare_runs(*_runs(tmp_path, two_mode_rows(n=6, capacities=(512,))), resamples=R)
