"""evaluation.json's layouts on disk brought to the current one (rundir.evaluation)."""

from __future__ import annotations

import pytest

from kvlab.rundir.evaluation import EvaluationFileError, migrate, read_evaluation


def test_a_version_1_file_reads_with_empty_counts() -> None:
    old = {"run_id": "r", "summaries": [{"mode": "a", "capacity": 512, "load": None}],
           "comparisons": [{"a": "a", "b": "b", "metrics": {"ttft_ms": {"ratio": 1.0}}}],
           "intervals": {"pairs": [{"mode_a": "a"}]}}
    data = migrate(old)
    assert data["schema_version"] == 1 and data["experiment"] == "" and data["load"] == []
    (summary,) = data["summaries"]  # type: ignore[misc]
    assert summary["valid"]["measured"] == 0 and summary["mean_intervals"] == {}
    (comparison,) = data["comparisons"]  # type: ignore[misc]
    assert comparison["reasons"] == [] and comparison["load"] is None
    assert comparison["metrics"]["ttft_ms"] == {"interval": None, "verdict": None,
                                                "ratio": 1.0}
    assert data["intervals"]["pairs"][0]["count_a"]["valid"] == 0  # type: ignore[index]
    assert old == {"run_id": "r", "summaries": [{"mode": "a", "capacity": 512, "load": None}],
                   "comparisons": [{"a": "a", "b": "b", "metrics": {"ttft_ms": {"ratio": 1.0}}}],
                   "intervals": {"pairs": [{"mode_a": "a"}]}}  # the data read is not changed


def test_a_current_file_keeps_its_version_and_keys() -> None:
    data = migrate({"schema_version": 2, "violations": [{"reason": "x"}], "extra": [1]})
    assert data["schema_version"] == 2 and data["extra"] == [1]
    assert data["violations"] == [{"other_mode": None, "load": None, "detail": "",
                                   "reason": "x"}]


def test_a_file_that_is_not_json_is_one_line(tmp_path) -> None:
    path = tmp_path / "evaluation.json"
    path.write_text("{cut")
    with pytest.raises(EvaluationFileError, match=r"evaluation\.json: not an evaluation\.json"):
        read_evaluation(path)
