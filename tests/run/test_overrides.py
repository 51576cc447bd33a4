"""kvlab run's overrides written into the experiment file's text: --queries and --set."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from kvlab.errors import ConfigError
from kvlab.experiment import parse_experiment
from kvlab.run.overrides import (
    Setting,
    overridden_text,
    parse_setting,
    set_key,
    toml_value,
)

EXPERIMENTS = Path(__file__).parents[2] / "experiments"
FILE = '''name = "x"  # top
[workload]
queries = 30  # full
capacities = [256, 1024]

[[modes]]
name = "a"
[modes.embedded]
threads = 1

[[modes]]
name = "b"

[load]
kind = "concurrency"
values = [1, 2, 4]
'''


def changed_lines(before: str, after: str) -> list[str]:
    """The lines of ``after`` that ``before`` lacks."""
    return [line for line in after.splitlines() if line not in before.splitlines()]


def test_queries_change_one_line_only() -> None:
    changed = overridden_text(FILE, {"queries": 8})
    assert changed_lines(FILE, changed) == ["queries = 8  # set by kvlab run --queries 8"]
    assert changed.replace(changed.splitlines()[2], "queries = 30  # full") == FILE
    assert parse_experiment(changed).workload.queries == 8
    # no queries key, and no [workload] table at all: added where TOML reads it
    added = overridden_text('name = "x"\n[workload]\ncapacities = [256]\n[[modes]]\n'
                            'name = "a"\n', {"queries": 3})
    assert parse_experiment(added).workload.queries == 3
    bare = parse_experiment(overridden_text('name = "x"\n[[modes]]\nname = "a"\n',
                                            {"queries": 2}))
    assert bare.workload.queries == 2 and bare.modes[0].name == "a"


@pytest.mark.parametrize(("spec", "line", "read"), [
    ("workload.capacities=[256,2048]", "capacities = [256, 2048]",
     lambda e: e.workload.capacities == [256, 2048]),
    ("load.values=[1, 8]", "values = [1, 8]", lambda e: e.load.values == [1, 8]),
    ("modes.a.embedded.threads=2", "threads = 2",
     lambda e: e.modes[0].settings.threads == 2 and e.modes[1].settings.threads is None),
    ("modes.b.embedded.threads=2", "threads = 2",  # a table the mode did not have
     lambda e: e.modes[1].settings.threads == 2 and e.modes[0].settings.threads == 1),
    ("modes.b.stream=false", "stream = false", lambda e: not e.modes[1].stream),
    ("protocol.seed=7", "seed = 7", lambda e: e.protocol.seed == 7),  # a new table
    ("description='quick'", 'description = "quick"', lambda e: e.description == "quick"),
])
def test_a_setting_changes_or_adds_one_key(spec, line, read) -> None:
    changed = overridden_text(FILE, {"set": {parse_setting(spec).key: parse_setting(spec).value}})
    added = changed_lines(FILE, changed)
    assert [a.split("  #")[0] for a in added if not a.startswith("[")] == [line]
    assert all(a.endswith("# set by kvlab run --set") for a in added if not a.startswith("["))
    assert read(parse_experiment(changed))


def test_settings_and_queries_together() -> None:
    changed = overridden_text(FILE, {"queries": 5, "set": {"load.values": [1, 4],
                                                           "workload.output_tokens": 8}})
    e = parse_experiment(changed)
    assert (e.workload.queries, e.load.values, e.workload.output_tokens) == (5, [1, 4], 8)
    assert len(changed_lines(FILE, changed)) == 3


@pytest.mark.parametrize("text", [
    'name = "x"\nworkload = { queries = 4 }\n[[modes]]\nname = "a"\n',  # an inline table
    'name = "x"\n[workload]\ncapacities = [\n  256,\n]\n[[modes]]\nname = "a"\n',  # 2 lines
])
def test_a_layout_it_cannot_edit_is_refused(text) -> None:
    with pytest.raises(ConfigError, match=r"cannot set workload\.(queries|capacities) in this"):
        overridden_text(text, {"queries": 2, "set": {"workload.capacities": [512]}})


@pytest.mark.parametrize(("spec", "needle"), [
    ("workload.capacities", "give KEY=VALUE"),
    ("work load.x=1", "give KEY=VALUE"),
    ("modes.a=1", "a mode's key is modes.<mode name>.<key>"),
    ("workload.capacities=[256,", "is not a TOML value"),
    ("protocol.seed=nan", "give a number, string"),
])
def test_bad_settings_are_one_line(spec, needle) -> None:
    with pytest.raises(ConfigError, match=needle):
        parse_setting(spec)


def test_a_mode_it_does_not_have_is_named() -> None:
    with pytest.raises(ConfigError, match=r"no mode 'c' \(modes: a, b\)"):
        set_key(FILE, Setting(("modes", "c", "stream"), False))


@pytest.mark.parametrize("value", [3, 2.5, True, "a \"quoted\" text", [1, [2, "x"]],
                                   {"512": 4, "a b": "c"}])
def test_values_are_written_as_toml_reads_them(value) -> None:
    assert tomllib.loads(f"v = {toml_value(value)}")["v"] == value


@pytest.mark.parametrize("path", sorted(EXPERIMENTS.glob("*.toml")), ids=lambda p: p.stem)
def test_every_shipped_file_takes_a_setting_of_each_table(path) -> None:
    """The shipped files' layout is one key per line: make run's settings can edit them."""
    text = path.read_text(encoding="utf-8")
    data = tomllib.loads(text)
    keys = {"workload.output_tokens": 9, "protocol.seed": 7,
            f"modes.{data['modes'][-1]['name']}.stream": False}
    if "load" in data and "values" in data["load"]:
        keys["load.values"] = data["load"]["values"][:1]
    changed = tomllib.loads(overridden_text(text, {"set": keys}, str(path)))
    assert changed["workload"]["output_tokens"] == 9 and changed["protocol"]["seed"] == 7
    assert changed["modes"][-1]["stream"] is False
