"""One list syntax: every option that takes a list of numbers accepts a comma list and
repetition, says so in --help, and parses with kvlab.cli.lists."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from typing import Any

import pytest
import typer

from kvlab.cli import app, main
from kvlab.cli.lists import float_list, int_list
from kvlab.errors import ConfigError

# Every option of kvlab that takes a list of numbers (command -> options).
LIST_OPTIONS = {
    "memory": {"--context", "--seqs", "--kv-blocks"},
    "kv-bench": {"--contexts"},
    "engine-check": {"--capacities"},
    "engine-speed": {"--contexts"},
    "engine-batch": {"--dtypes", "--batch-sizes"},
    "engine-profile": {"--dtypes", "--batch-sizes"},
    "calibrate": {"--concurrency", "--ramp"},
}


def test_comma_lists_and_repetition_parse_alike() -> None:
    assert int_list(["2048,8192"], "-L") == int_list(["2048", "8192"], "-L") == [2048, 8192]
    assert int_list(["300, 300", "4000"], "--seqs") == [300, 300, 4000]  # repeats kept
    assert int_list(None, "-L") == int_list([], "-L") == []  # not given: the default
    assert float_list(["0.5,2", "1e3"], "--ramp") == [0.5, 2.0, 1000.0]


@pytest.mark.parametrize(("values", "message"), [
    (["2048,x"], "-L: 'x' is not a whole number"),
    (["1.5"], "-L: '1.5' is not a whole number"),
    (["512", "0"], "-L: 0 must be positive"),
    ([","], "-L: give at least one whole number"),
])
def test_bad_lists_name_the_option(values: list[str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        int_list(values, "-L")


def test_not_a_number_is_not_positive() -> None:
    with pytest.raises(ConfigError, match="--ramp: nan must be positive"):
        float_list(["nan"], "--ramp")


def _commands() -> dict[str, Any]:
    """kvlab's click commands by name (typer >= 0.26 vendors its own click)."""
    return dict(typer.main.get_command(app).commands)  # type: ignore[attr-defined]


def test_every_list_option_is_repeatable_and_says_both_forms() -> None:
    commands = _commands()
    found = {}
    for name, command in commands.items():
        for param in command.params:
            if param.param_type_name == "option" and "comma list" in (param.help or ""):
                long_name = next(o for o in param.opts if o.startswith("--"))
                found.setdefault(name, set()).add(long_name)
                assert param.multiple, f"{name} {param.opts}: a list option must repeat"
                assert "Repeat the option or give a comma list" in (param.help or "")
                flag = re.search(r"comma list: (\S+) (\S+),(\S+) = \1 \2 \1 \3\.", param.help or "")
                assert flag is not None and flag[1] in param.opts, param.help
    assert found == LIST_OPTIONS


def test_help_shows_both_forms() -> None:
    env = {**os.environ, "COLUMNS": "400", "TERMINAL_WIDTH": "400"}
    shown = subprocess.run([sys.executable, "-m", "kvlab", "memory", "--help"], env=env,
                           capture_output=True, text=True, timeout=120, check=True).stdout
    assert "Repeat the option or give a comma list: -L 2048,8192 = -L 2048 -L 8192." in shown


def _memory_json(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
                 *args: str) -> dict:  # type: ignore[type-arg]
    monkeypatch.setattr(sys, "argv", ["kvlab", "memory", *args, "--json"])
    with pytest.raises(SystemExit) as done:
        main()
    assert done.value.code in (0, None)
    return json.loads(capsys.readouterr().out.strip().splitlines()[-1])


def test_memory_takes_both_forms(monkeypatch: pytest.MonkeyPatch,
                                 capsys: pytest.CaptureFixture[str]) -> None:
    comma = _memory_json(monkeypatch, capsys, "-p", "toy", "-L", "2048,8192")
    repeated = _memory_json(monkeypatch, capsys, "-p", "toy", "-L", "2048", "-L", "8192")
    assert comma == repeated
    assert [r["context"] for r in comma["models"][0]["rows"]] == [2048, 8192]
    lengths = _memory_json(monkeypatch, capsys, "-p", "gemma-3-270m", "--paged", "16",
                           "--seqs", "300", "--seqs", "1800,4000", "-L", "4096")
    assert lengths["models"][0]["rows"][0]["lengths"] == [300, 1800, 4000]
    count = _memory_json(monkeypatch, capsys, "-p", "toy", "--seqs", "3", "-L", "64")
    assert count["models"][0]["rows"][0]["n_seq"] == 3
