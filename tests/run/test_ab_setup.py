"""The one experiment ``kvlab ab`` makes of a baseline and a candidate (no server)."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from kvlab.errors import ConfigError
from kvlab.run.ab_setup import make_pair, toml_document
from kvlab.run.overrides import parse_setting
from tests.experiments import embedded, experiment

WORKLOAD = {"queries": 2, "capacities": [128, 256], "output_tokens": 4}


def test_two_modes_of_one_file_become_a_and_b_at_one_capacity(tmp_path: Path) -> None:
    path = experiment("two", embedded("x"), embedded("y", no_cache=True),
                      workload=WORKLOAD, load=dict(kind="concurrency", values=[1, 2],
                                                   requests=4)).write(tmp_path)
    pair = make_pair(path, None, "x", "y")
    assert (pair.a, pair.b, pair.capacity) == ("x", "y", 128)
    assert pair.experiment.order == "interleaved"
    assert pair.experiment.load.one_by_one  # the file's load points are not ab's
    assert pair.experiment.compare == [("x", "y")]
    assert tomllib.loads(pair.text)["modes"][1]["embedded"]["no_cache"] is True


def test_the_same_mode_twice_is_an_aa_pair(tmp_path: Path) -> None:
    path = experiment("one", embedded("x"), workload=WORKLOAD).write(tmp_path)
    pair = make_pair(path, None, "x", "x", capacity=256)
    assert (pair.a, pair.b, pair.capacity) == ("x", "x-b", 256)


def test_two_files_must_ask_the_same_workload(tmp_path: Path) -> None:
    base = experiment("base", embedded("x"), workload=WORKLOAD).write(tmp_path)
    other = experiment("cand", embedded("y"), workload={**WORKLOAD, "output_tokens": 8}
                       ).write(tmp_path)
    with pytest.raises(ConfigError, match=r"\[workload\] differs"):
        make_pair(base, other, None, None)
    same = make_pair(base, other, None, None,
                     settings=(parse_setting("workload.output_tokens=8"),))
    assert (same.a, same.b) == ("x", "y")


@pytest.mark.parametrize("kwargs, message", [
    (dict(mode_a="x", mode_b="x", capacity=512), "capacity 512"),
    (dict(mode_a=None, mode_b="x"), "name both sides"),
])
def test_what_cannot_be_paired_is_one_line(tmp_path: Path, kwargs: dict[str, object],
                                           message: str) -> None:
    path = experiment("one", embedded("x"), workload=WORKLOAD).write(tmp_path)
    with pytest.raises(ConfigError, match=message):
        make_pair(path, None, **kwargs)  # type: ignore[arg-type]


def test_toml_document_reads_back_as_written() -> None:
    data = {"name": "n", "workload": {"queries": 2, "dataset": {"kind": "builtin"}},
            "modes": [{"name": "a", "server": "embedded", "embedded": {"threads": 1},
                       "body": {"stream_options": {"include_usage": True}}}],
            "compare": [["a", "b"]]}
    assert tomllib.loads(toml_document(data)) == data
