"""What ``kvlab run`` changes in an experiment file: ``--queries N`` and ``--set KEY=VALUE``.

A setting names a key of the file by its dotted path and gives a TOML value:
``workload.capacities=[256, 2048]``, ``load.values=[1, 4, 8]``,
``modes.vllm.vllm.enforce_eager=true`` (``modes.<mode name>.<key path>``: the mode
called ``vllm``, its ``[modes.vllm]`` table). :func:`overridden_text` writes them into
the file's text, one line changed or added per key and marked by a comment, every
other line kept; the result is re-read and checked to differ from the original in
those keys only, so a layout it cannot edit (a multi-line array, an inline table)
raises ConfigError instead of changing anything else. The planner validates the
result as it validates any experiment file; the run directory keeps it as
experiment.toml, and manifest.json the file verbatim and the settings.
"""

from __future__ import annotations

import copy
import json
import math
import re
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kvlab.errors import ConfigError
from kvlab.rundir import Overrides

_BARE_KEY = re.compile(r"^[A-Za-z0-9_-]+$")
_HEADER = re.compile(r"^\s*(\[\[?)\s*([^\[\]]+?)\s*\]\]?\s*(#.*)?$")


@dataclass(frozen=True)
class Setting:
    """One ``--set KEY=VALUE``: the key's dotted path and the value as TOML reads it."""

    path: tuple[str, ...]
    value: Any

    @property
    def key(self) -> str:
        """The dotted path as given (``workload.capacities``)."""
        return ".".join(self.path)


def parse_setting(spec: str) -> Setting:
    """``KEY=VALUE`` (VALUE in TOML: ``5``, ``[1, 4]``, ``true``, ``"text"``) as a
    Setting; ConfigError in one line otherwise."""
    key, sep, raw = spec.partition("=")
    path = tuple(part.strip() for part in key.strip().split("."))
    if not sep or not all(_BARE_KEY.match(p) for p in path):
        raise ConfigError(f"--set {spec!r}: give KEY=VALUE with KEY a dotted path of the "
                          "experiment file, e.g. --set workload.capacities=[256,2048]")
    if path[0] == "modes" and len(path) < 3:
        raise ConfigError(f"--set {key.strip()}: a mode's key is modes.<mode name>.<key>, "
                          "e.g. modes.vllm.vllm.enforce_eager=true")
    try:
        value = tomllib.loads(f"v = {raw.strip()}")["v"]
    except tomllib.TOMLDecodeError:
        raise ConfigError(f"--set {key.strip()}: {raw.strip()!r} is not a TOML value (a "
                          "string needs quotes: KEY='\"text\"')") from None
    try:
        json.dumps(value, allow_nan=False)
    except ValueError:
        raise ConfigError(f"--set {key.strip()}: give a number, string, boolean, array or "
                          "table (manifest.json keeps it as JSON)") from None
    return Setting(path, value)


def settings_of(overrides: Mapping[str, Any]) -> list[Setting]:
    """The settings a manifest's ``overrides`` keep (``"set": {key: value}``), in order."""
    given = Overrides.model_validate(overrides).set
    return [Setting(tuple(k.split(".")), v) for k, v in given.items()]


def overridden_text(text: str, overrides: Mapping[str, Any], source: str = "<experiment>"
                    ) -> str:
    """The experiment file's text with a run's ``overrides`` written in: its ``set``
    settings, then ``queries`` (``--queries N``) as ``workload.queries``."""
    for setting in settings_of(overrides):
        text = set_key(text, setting, source, note="set by kvlab run --set")
    if "queries" in overrides:
        queries = int(overrides["queries"])
        text = set_key(text, Setting(("workload", "queries"), queries), source,
                       note=f"set by kvlab run --queries {queries}")
    return text


def set_key(text: str, setting: Setting, source: str = "<experiment>",
            note: str = "set by kvlab run --set") -> str:
    """``text`` with the one key of ``setting`` changed (or added under its table, or
    its table added), marked by ``# note``; ConfigError if the result would differ
    from the original in anything else."""
    original = tomllib.loads(text)
    expected = copy.deepcopy(original)
    _put(expected, setting, source)
    lines = text.splitlines()
    place, key = _place(original, setting, source), setting.path[-1]
    line = f"{key} = {toml_value(setting.value)}  # {note}"
    span = _span(lines, place)
    if span is None:
        _insert_table(lines, place, line)
    else:
        start, end = span
        at = next((j for j in range(start, end)
                   if re.match(rf"^\s*{re.escape(key)}\s*=", lines[j])), None)
        if at is None:
            lines.insert(start, line)
        else:
            lines[at] = line
    changed = "\n".join(lines) + "\n"
    try:
        same = tomllib.loads(changed) == expected
    except tomllib.TOMLDecodeError:
        same = False
    if not same:
        where = f"under {place.header()}" if place.mode is not None or place.table \
            else "at the top of the file"
        raise ConfigError(f"{source}: cannot set {setting.key} in this file's layout; put "
                          f"{key} = ... on one line {where} and retry")
    return changed


def toml_value(value: Any) -> str:
    """``value`` (as tomllib reads one) written as an inline TOML value."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return repr(value) if math.isfinite(value) else str(value)
    if isinstance(value, str):
        return json.dumps(value)  # a JSON string is a TOML basic string
    if isinstance(value, Sequence):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, Mapping):
        keys = (k if _BARE_KEY.match(k) else json.dumps(k) for k in value)
        return "{ " + ", ".join(f"{k} = {toml_value(v)}"
                                for k, v in zip(keys, value.values(), strict=True)) + " }"
    raise ConfigError(f"cannot write {type(value).__name__} as a TOML value")


def _mode_index(data: Mapping[str, Any], name: str, source: str) -> int:
    modes = data.get("modes")
    names = [m.get("name") for m in modes] if isinstance(modes, list) else []
    if name not in names:
        raise ConfigError(f"{source}: --set modes.{name}...: no mode {name!r} (modes: "
                          f"{', '.join(str(n) for n in names) or 'none'})")
    return names.index(name)


def _put(data: dict[str, Any], setting: Setting, source: str) -> None:
    """Set the key in the parsed document (a mode found by its name)."""
    path = setting.path
    node: dict[str, Any] = data
    if path[0] == "modes":
        node = data["modes"][_mode_index(data, path[1], source)]
        path = path[2:]
    for part in path[:-1]:
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            raise ConfigError(f"{source}: --set {setting.key}: {part} is not a table")
        node = child
    node[path[-1]] = setting.value


@dataclass(frozen=True)
class _Place:
    """Where a key's table is: a top-level table (``mode`` None; ``()`` the file's top)
    or the sub-table ``table`` of the mode at index ``mode`` (``()``: the mode's own)."""

    mode: int | None
    table: tuple[str, ...]

    def header(self) -> str:
        return f"[{'.'.join(('modes', *self.table) if self.mode is not None else self.table)}]"


def _place(data: Mapping[str, Any], setting: Setting, source: str) -> _Place:
    if setting.path[0] == "modes":
        return _Place(_mode_index(data, setting.path[1], source), setting.path[2:-1])
    return _Place(None, setting.path[:-1])


def _headers(lines: list[str]) -> list[tuple[int, bool, tuple[str, ...]]]:
    """Each table header: its line, whether it is an array of tables, its dotted name."""
    out = []
    for i, line in enumerate(lines):
        m = _HEADER.match(line)
        if m:
            out.append((i, m.group(1) == "[[", tuple(p.strip() for p in m.group(2).split("."))))
    return out


def _mode_headers(headers: list[tuple[int, bool, tuple[str, ...]]], index: int) -> range:
    """The positions in ``headers`` of mode ``index``: its [[modes]] and its sub-tables."""
    arrays = [k for k, h in enumerate(headers) if h[1] and h[2] == ("modes",)]
    end = arrays[index] + 1
    while end < len(headers) and not headers[end][1] and headers[end][2][:1] == ("modes",):
        end += 1
    return range(arrays[index], end)


def _span(lines: list[str], place: _Place) -> tuple[int, int] | None:
    """The lines of the place's keys [start, end), or None if its table has no header."""
    headers = _headers(lines)
    ends = [h[0] for h in headers[1:]] + [len(lines)]
    if place.mode is not None:
        mine = _mode_headers(headers, place.mode)
        found = [k for k in mine if (k == mine.start and not place.table)
                 or (headers[k][2] == ("modes", *place.table) and not headers[k][1])]
    elif not place.table:
        return 0, headers[0][0] if headers else len(lines)
    else:
        found = [k for k, h in enumerate(headers) if not h[1] and h[2] == place.table]
    return (headers[found[0]][0] + 1, ends[found[0]]) if found else None


def _insert_table(lines: list[str], place: _Place, line: str) -> None:
    """Add the place's table with its one key: a mode's sub-table at the end of that
    mode, a top-level table at the end of the file."""
    if place.mode is None:
        lines += ["", place.header(), line]
        return
    headers = _headers(lines)
    after = _mode_headers(headers, place.mode).stop
    end = headers[after][0] if after < len(headers) else len(lines)
    lines[end:end] = [place.header(), line]
