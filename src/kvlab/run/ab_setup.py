"""The experiment ``kvlab ab`` measures: a baseline mode and a candidate mode, made one.

The two modes come from one experiment file (``--a MODE --b MODE``) or from two files
(each file's only mode, or the named one). They become one experiment, written as
TOML into the run directory like any run's ``experiment.toml``: the baseline file's
workload and protocol (the candidate file's must be the same: both sides are sent the
same prompts), one capacity, the two modes as ``A`` and ``B`` of its one comparison,
sequential rows in the interleaved order (both servers up at once). A candidate mode
named like the baseline's (an A/A pair: the same mode twice) is renamed
``<name>-b``. ``--set KEY=VALUE`` changes each file as ``kvlab run --set`` does (a
``modes.<name>`` key only the file that has that mode).
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kvlab.errors import ConfigError
from kvlab.experiment import Experiment, load_experiment, read_experiment
from kvlab.run.overrides import Setting, overridden_text, toml_value

_SHARED = ("workload", "protocol")  # what both sides must agree on


@dataclass(frozen=True)
class AbPair:
    """The experiment of one A/B: its TOML text (kept in the run directory), the
    validated experiment, the baseline's and the candidate's mode names and the
    capacity both are measured at."""

    text: str
    experiment: Experiment
    a: str
    b: str
    capacity: int


def _settings_for(text: str, settings: Sequence[Setting]) -> dict[str, Any]:
    """The ``--set`` settings that apply to a file: every key but a mode's, and a
    mode's only where the file has that mode."""
    names = {m.get("name") for m in tomllib.loads(text).get("modes", [])
             if isinstance(m, dict)}
    chosen = {s.key: s.value for s in settings if s.path[0] != "modes" or s.path[1] in names}
    return {"set": chosen} if chosen else {}


def _read(path: Path, settings: Sequence[Setting]) -> tuple[str, dict[str, Any]]:
    """A file's text with the settings written in, checked as an experiment, and its
    data."""
    text = read_experiment(path)
    text = overridden_text(text, _settings_for(text, settings), str(path))
    load_experiment(path, text)  # the file's own errors first, named by its path
    return text, tomllib.loads(text)


def _mode(data: Mapping[str, Any], name: str | None, path: Path, flag: str) -> dict[str, Any]:
    modes = [m for m in data.get("modes", []) if isinstance(m, dict)]
    names = [str(m.get("name")) for m in modes]
    if name is None:
        if len(modes) != 1:
            raise ConfigError(f"{path} has {len(modes)} modes ({', '.join(names)}): name the "
                              f"one to measure with {flag} MODE")
        return dict(modes[0])
    if name not in names:
        raise ConfigError(f"{flag} {name}: {path} has no such mode (modes: "
                          f"{', '.join(names)})")
    return dict(modes[names.index(name)])


def make_pair(baseline: Path, candidate: Path | None, mode_a: str | None, mode_b: str | None,
              capacity: int | None = None, settings: Sequence[Setting] = ()) -> AbPair:
    """The one experiment of an A/B (see the module's docstring); ConfigError or
    ExperimentError in one line for what cannot be paired."""
    _, data_a = _read(baseline, settings)
    if candidate is None:
        if mode_a is None or mode_b is None:
            raise ConfigError("with one experiment file, name both sides: --a MODE --b MODE "
                              "(the same mode twice for an A/A check)")
        data_b, source_b = data_a, baseline
    else:
        _, data_b = _read(candidate, settings)
        source_b = candidate
        for table in _SHARED:
            if data_a.get(table, {}) != data_b.get(table, {}):
                raise ConfigError(f"[{table}] differs between {baseline} and {candidate}: "
                                  "kvlab ab sends both sides the same requests; make the "
                                  f"[{table}] tables equal (or --set them)")
    a = _mode(data_a, mode_a, baseline, "--a")
    b = _mode(data_b, mode_b, source_b, "--b")
    if b["name"] == a["name"]:
        b["name"] = f"{a['name']}-b"
    capacities = sorted({*(a.get("capacities") or data_a.get("workload", {})
                           .get("capacities", [])),
                         *(b.get("capacities") or data_a.get("workload", {})
                           .get("capacities", []))})
    chosen = capacity if capacity is not None else (min(capacities) if capacities else None)
    if capacity is not None and capacities and capacity not in capacities:
        raise ConfigError(f"--capacity {capacity}: the modes are measured at "
                          f"{', '.join(map(str, capacities))}")
    for mode in (a, b):
        mode.pop("capacities", None)
    data = {key: value for key, value in data_a.items()
            if key not in ("modes", "compare", "order", "load", "search", "slo")}
    data["name"] = f"ab-{data_a['name']}"
    data["description"] = f"kvlab ab: {a['name']} (A) against {b['name']} (B)"
    data["order"] = "interleaved"
    data["compare"] = [[a["name"], b["name"]]]
    if chosen is not None:
        data["workload"] = {**data.get("workload", {}), "capacities": [chosen]}
    data["modes"] = [a, b]
    text = toml_document(data)
    experiment = load_experiment(baseline, text)  # relative paths: the baseline's folder
    return AbPair(text, experiment, a["name"], b["name"], experiment.all_capacities()[0])


def toml_document(data: Mapping[str, Any]) -> str:
    """``data`` (as tomllib reads a file) written as a TOML document: plain keys,
    then tables and arrays of tables, nested tables as dotted headers."""
    lines: list[str] = []
    _table_lines(lines, (), data)
    return "\n".join(lines).strip() + "\n"


def _header(path: Sequence[str]) -> str:
    return ".".join(p if p.replace("_", "").replace("-", "").isalnum() else json.dumps(p)
                    for p in path)


def _is_tables(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(v, dict) for v in value)


def _table_lines(lines: list[str], path: tuple[str, ...], table: Mapping[str, Any]) -> None:
    for key, value in table.items():
        if not isinstance(value, dict) and not _is_tables(value):
            lines.append(f"{_header([key])} = {toml_value(value)}")
    for key, value in table.items():
        if isinstance(value, dict):
            lines += ["", f"[{_header([*path, key])}]"]
            _table_lines(lines, (*path, key), value)
        elif _is_tables(value):
            for item in value:
                lines += ["", f"[[{_header([*path, key])}]]"]
                _table_lines(lines, (*path, key), item)
