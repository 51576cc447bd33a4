"""RunDir, the one reader of a run directory: its files by their models, and the writes
made outside a run's writer (reports, CSVs, evaluation.json, the experiment's copy)."""

from __future__ import annotations

import json

import pytest

from kvlab.errors import ConfigError
from kvlab.rundir import RecordStore, RunDir, RunState, load_run
from kvlab.rundir.evaluation import EvaluationFileError
from tests.rows import row


def test_a_run_reads_its_records_and_state_and_knows_it_has_records(tmp_path) -> None:
    run = RunDir(tmp_path)
    assert not run.has_records and run.records == [] and run.state == RunState()
    with RecordStore(run.records_path) as store:
        store.append(row())
    (tmp_path / "manifest.json").write_text(RunState(run_id="r9").dumps())
    again = load_run(tmp_path)
    assert again.has_records and len(again.records) == 1 and again.run_id == "r9"
    assert again.records_bytes() == run.records_path.read_bytes()
    assert RunDir(tmp_path / "none").records_bytes() is None


def test_the_experiment_is_the_file_else_the_manifests_copy(tmp_path) -> None:
    run = RunDir(tmp_path)
    assert run.experiment_text is None and run.experiment_bytes is None
    (tmp_path / "manifest.json").write_text(RunState(experiment_file="name = 'x'\n").dumps())
    assert RunDir(tmp_path).experiment_text == "name = 'x'\n"
    assert RunDir(tmp_path).experiment_bytes == b"name = 'x'\n"
    run.write_experiment("name = 'y'\r\n")
    assert RunDir(tmp_path).experiment_bytes == b"name = 'y'\r\n"  # byte for byte


def test_evaluation_json_is_saved_and_read_back_in_the_current_layout(tmp_path) -> None:
    run = RunDir(tmp_path)
    with pytest.raises(EvaluationFileError, match="cannot read it"):
        run.evaluation_data()
    run.save_evaluation({"schema_version": 2, "run_id": "r", "summaries": []})
    assert run.evaluation_path.read_text().endswith("}\n")
    data = run.evaluation_data()
    assert data["run_id"] == "r" and data["load"] == [] and data["intervals"] == {"pairs": []}
    run.evaluation_path.write_text("[1, 2]")
    with pytest.raises(EvaluationFileError, match="not a JSON object"):
        run.evaluation_data()


def test_reports_and_csvs_are_written_where_the_run_keeps_them(tmp_path) -> None:
    run = RunDir(tmp_path)
    assert run.first_report() is None
    assert run.write_report("# r\n") == run.report_path
    assert run.first_report() == run.report_path
    run.write_html("<html></html>")
    assert run.first_report() == run.html_path  # the one a reader opens first
    written = run.write_csvs((["a", "b"], [{"a": 1, "b": "x"}]), (["m"], []))
    assert written == [run.records_csv_path, run.summaries_csv_path]
    assert run.records_csv_path.read_text().splitlines() == ["a,b", "1,x"]
    assert run.summaries_csv_path.read_text().splitlines() == ["m"]


def test_runs_under_a_folder_are_found_at_any_depth(tmp_path) -> None:
    for name in ("a", "deep/b"):
        (tmp_path / name).mkdir(parents=True)
        RecordStore(RunDir(tmp_path / name).records_path).close()
    (tmp_path / "empty").mkdir()
    assert RunDir.under(tmp_path) == [tmp_path / "a", tmp_path / "deep" / "b"]
    assert RunDir(tmp_path / "a").watched_paths[0] == tmp_path / "a" / "records.jsonl"


def test_a_folder_that_is_not_a_run_is_one_line(tmp_path) -> None:
    with pytest.raises(ConfigError, match=r"no records\.jsonl"):
        load_run(tmp_path)
    with pytest.raises(ConfigError, match="not a run directory"):
        RunDir.open(tmp_path)
    (tmp_path / "records.jsonl").write_text(json.dumps({"run_id": 1}) + "\n{}\n")
    with pytest.raises(ConfigError, match="cannot read the records"):
        load_run(tmp_path)
