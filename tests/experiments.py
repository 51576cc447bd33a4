"""Experiment files for tests, built from Python values instead of TOML text.

A test that needs an experiment file on disk builds it here: :func:`experiment` takes
the tables as keyword arguments (``workload``, ``load``, ``protocol``, ``slo``,
``search``, ``compare``, ``order``) and the modes (:func:`embedded`, :func:`llamacpp`,
:func:`vllm`, :func:`external`, :func:`synthetic`), and :meth:`Experiment.write` puts
the TOML where the test wants it. The file is read back by ``load_experiment`` as any
other, so a test still goes through the experiment file's own validation.

Example::

    path = experiment("sharded", synthetic(url), workload={**SMALL, "queries": 4},
                      load=dict(kind="concurrency", values=[2], requests=200)
                      ).write(tmp_path)
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

Table = Mapping[str, Any]

SMALL: Table = {"queries": 1, "capacities": [256], "output_tokens": 4}  # one short row


def _value(value: Any) -> str:
    """One TOML value: strings, numbers, booleans, lists and inline tables."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)  # a TOML basic string is a JSON string
    if isinstance(value, Mapping):
        return "{ " + ", ".join(f"{k} = {_value(v)}" for k, v in value.items()) + " }"
    if isinstance(value, Sequence):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    raise TypeError(f"no TOML value for {value!r}")


def _table(header: str, table: Table) -> list[str]:
    return [f"[{header}]", *(f"{k} = {_value(v)}" for k, v in table.items() if v is not None)]


@dataclass(frozen=True)
class Mode:
    """One ``[[modes]]`` entry: its name, server kind and API, the kind's table
    (``[modes.<server>]``), extra body fields (``[modes.body]``) and other keys."""

    name: str
    server: str = "embedded"
    api: str | None = None
    settings: Table = field(default_factory=dict)
    body: Table = field(default_factory=dict)
    keys: Table = field(default_factory=dict)  # capacities, stream, ...

    def lines(self) -> list[str]:
        out = ["[[modes]]", f"name = {_value(self.name)}", f"server = {_value(self.server)}"]
        if self.api is not None:
            out.append(f"api = {_value(self.api)}")
        out += [f"{k} = {_value(v)}" for k, v in self.keys.items()]
        if self.settings:
            out += _table(f"modes.{self.server}", self.settings)
        if self.body:
            out += _table("modes.body", self.body)
        return out


def embedded(name: str, api: str | None = None, *, threads: int = 1, body: Table | None = None,
             **settings: Any) -> Mode:
    """A mode on kvlab's own server (one thread unless told)."""
    keys = _keys(settings)
    return Mode(name, "embedded", api, {"threads": threads, **settings}, body or {}, keys)


def llamacpp(name: str, api: str | None = None, **settings: Any) -> Mode:
    """A mode on llama-server, kvlab's bundled model unless ``model`` is given."""
    keys = _keys(settings)
    return Mode(name, "llamacpp", api, settings, {}, keys)


def vllm(name: str, api: str | None = "openai-completion", **settings: Any) -> Mode:
    """A mode on a vLLM kvlab launches."""
    keys = _keys(settings)
    return Mode(name, "vllm", api, settings, {}, keys)


def external(name: str, base_url: str, model: str | None = None, api: str = "openai-chat", *,
             body: Table | None = None, **settings: Any) -> Mode:
    """A mode on an endpoint kvlab does not launch."""
    keys = _keys(settings)
    return Mode(name, "external", api, {"base_url": base_url, "model": model, **settings},
                body or {}, keys)


def synthetic(url: str, name: str = "chat", ttft_ms: float = 2, itl_ms: float = 2,
              api: str = "openai-chat") -> Mode:
    """A mode on kvlab's synthetic server at ``url`` (``kvlab.bench.calibrate.server``):
    each answer's schedule is in its body."""
    return external(name, f"{url}/v1", "synthetic", api,
                    body={"synthetic": {"ttft_ms": ttft_ms, "itl_ms": itl_ms}})


_MODE_KEYS = ("capacities", "stream", "batch", "history")


def _keys(settings: dict[str, Any]) -> dict[str, Any]:
    """The mode's own keys taken out of ``settings`` (they are not the kind's table)."""
    return {k: settings.pop(k) for k in _MODE_KEYS if k in settings}


@dataclass(frozen=True)
class Experiment:
    """An experiment file's content, ready to write."""

    name: str
    modes: tuple[Mode, ...]
    tables: dict[str, Table]
    top: dict[str, Any]

    def text(self) -> str:
        """The TOML text."""
        lines = [f"{k} = {_value(v)}" for k, v in self.top.items()]
        for header, table in self.tables.items():
            if table:
                lines += ["", *_table(header, table)]
        for mode in self.modes:
            lines += ["", *mode.lines()]
        return "\n".join(lines) + "\n"

    def write(self, folder: Path, file: str | None = None) -> Path:
        """The file ``folder/<name>.toml`` (or ``file``), written."""
        path = Path(folder) / (file or f"{self.name}.toml")
        path.write_text(self.text(), encoding="utf-8")
        return path


def experiment(name: str, *modes: Mode, workload: Table | None = None, load: Table | None = None,
               protocol: Table | None = None, slo: Table | None = None,
               search: Table | None = None, dataset: Table | None = None,
               compare: Sequence[tuple[str, str]] = (), order: str | None = None,
               description: str | None = None) -> Experiment:
    """An experiment of ``modes`` with these tables (left out: the file's defaults;
    :data:`SMALL` is the smallest workload a test can judge)."""
    work = dict(workload or {})
    top: dict[str, Any] = {"name": name}
    if description is not None:
        top["description"] = description
    if compare:
        top["compare"] = [list(pair) for pair in compare]
    if order is not None:
        top["order"] = order
    tables = {"workload": work, "workload.dataset": dict(dataset or {}),
              "protocol": dict(protocol or {}), "load": dict(load or {}),
              "slo": dict(slo or {}), "search": dict(search or {})}
    return Experiment(name, modes, tables, top)
