"""A run's experiment as a model, and a peer's file read as a run (store.runs)."""

from __future__ import annotations

import pytest

from kvlab.errors import ConfigError
from kvlab.rundir import RunDir, RunState
from kvlab.store.runs import experiment_of, known_experiment

TEXT = """name = "two"

[workload]
queries = 2

[[modes]]
name = "a"
server = "embedded"

[[modes]]
name = "b"
server = "embedded"
"""


def test_the_experiment_is_read_from_the_file_else_the_manifests_copy(tmp_path) -> None:
    run = RunDir(tmp_path)
    assert known_experiment(run) is None
    with pytest.raises(ConfigError, match=r"no experiment\.toml"):
        experiment_of(run)
    (tmp_path / "manifest.json").write_text(RunState(experiment_file=TEXT,
                                                     repeat_aa="a").dumps())
    aa = experiment_of(RunDir(tmp_path))
    assert aa.name == "two" and [m.name for m in aa.modes] == ["a", "a-again"]  # A/A
    RunDir(tmp_path).write_experiment(TEXT.replace('"two"', '"file"'))
    assert experiment_of(RunDir(tmp_path)).name == "file"
