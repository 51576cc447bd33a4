"""Experiment files: a TOML description of what to measure, validated once at the edge.

An experiment names a workload (queries, capacities, output length), the request
protocol (temperature, seed, ...), the modes to measure (each one server + one API)
and the pairs of modes to compare. ``load_experiment(path)`` returns a validated
:class:`Experiment` or raises :class:`~kvlab.errors.ExperimentError` with one line:
file, key path, what is wrong.

Example::

    name = "quickstart"
    [workload]
    queries = 8                 # the first 8 built-in queries (or queries_file = "q.jsonl")
    # [workload.dataset] kind = "builtin" (the default: queries behind a padding text)
    capacities = [256, 1024]
    [[modes]]
    name = "kv-cache"
    server = "embedded"         # embedded | llamacpp | external
    api = "llamacpp-completion" # llamacpp-completion | openai-chat | openai-completion
    [modes.embedded]
    preset = "toy"
    compare = [["recompute", "kv-cache"]]
"""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_core import ErrorDetails

from kvlab.api.dialects import dialect_of
from kvlab.bench.plan.builtin import BuiltinDataset
from kvlab.bench.plan.dataset import Dataset
from kvlab.bench.plan.datasets import DATASET_KINDS, DatasetSettingsUnion
from kvlab.bench.plan.load_settings import SearchSettings, SloSettings
from kvlab.bench.plan.loads.kinds import LOAD_KINDS, LoadSettings
from kvlab.bench.plan.loads.sequential import SequentialLoad
from kvlab.errors import ExperimentError
from kvlab.rundir import ApiKind
from kvlab.servers.embedded import EmbeddedSettings
from kvlab.servers.kinds import SERVER_KINDS, ServerSettingsUnion, current_kinds

__all__ = [
    "EmbeddedSettings", "Experiment", "LoadSettings", "Mode",
    "Protocol", "SearchSettings", "SloSettings", "Workload", "load_experiment",
    "parse_experiment", "read_experiment",
]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Workload(_Strict):
    """What is sent: queries, the capacities to measure at, and the output length."""

    # where the queries and prompts come from (bench.plan.datasets); default: builtin
    dataset: DatasetSettingsUnion = Field(default_factory=BuiltinDataset)
    queries: int = Field(default=30, ge=1, le=30)  # first N built-in queries
    queries_file: str | None = None  # JSONL of {"id": ..., "text": ...}; overrides queries
    capacities: list[int] = Field(default_factory=lambda: [512, 2048, 4096], min_length=1)
    prompt_fraction: float = Field(default=0.5, gt=0.0, lt=1.0)  # target prompt / capacity
    # tokenizer.json or .gguf counting prompt tokens when a server has no /tokenize
    # (see bench.plan.sizing); a relative path is relative to the experiment file
    tokenizer: str | None = None
    output_tokens: int = Field(default=64, ge=2)  # forced length (ITL needs >= 2)
    warmup: int = Field(default=1, ge=0)  # warm-up requests per (mode, capacity)
    repetitions: int = Field(default=1, ge=1)

    @model_validator(mode="before")
    @classmethod
    def _builtin_by_default(cls, data: Any) -> Any:
        """A ``[workload.dataset]`` table without ``kind`` is the builtin kind's."""
        if isinstance(data, dict) and isinstance(data.get("dataset"), dict) \
                and "kind" not in data["dataset"]:
            data = {**data, "dataset": {**data["dataset"], "kind": "builtin"}}
        return data

    @model_validator(mode="after")
    def _capacities_fit(self) -> Workload:
        for capacity in self.capacities:
            if capacity <= self.output_tokens + 16:
                raise ValueError(
                    f"capacity {capacity} leaves no room for a prompt and "
                    f"{self.output_tokens} output tokens"
                )
        return self

    def source(self, data_file: str | None = None) -> Dataset:
        """The dataset this workload's ``[workload.dataset]`` kind builds; ``data_file``:
        the file to read instead of the table's (a resumed run's, as resolved when it
        began)."""
        return (self.dataset.with_file(data_file) if data_file else self.dataset).build(self)


class Protocol(_Strict):
    """Request parameters shared by every mode (design.md, protocol rules)."""

    temperature: float = Field(default=0.0, ge=0.0)
    seed: int = 42
    ignore_eos: bool = True
    cache_prompt: bool = False
    # A per-request "cache_salt" (vLLM honours it: no request can hit another's cached
    # prefix blocks). Off by default: kvlab launches its servers with prefix caching
    # off, and a salt hides reuse that validation would otherwise report; turn it on
    # for a server whose prefix cache you cannot turn off (see request_salt).
    cache_salt: bool = False
    request_timeout_s: float = Field(default=120.0, gt=0)
    ready_timeout_s: float = Field(default=180.0, gt=0)

    def params(self) -> dict[str, Any]:
        """The body fields every request carries (a request may add its cache_salt, a
        mode its ``body``)."""
        return {"temperature": self.temperature, "seed": self.seed,
                "ignore_eos": self.ignore_eos, "cache_prompt": self.cache_prompt}


class Mode(_Strict):
    """One configuration to measure: a server, an API and how to call it.

    The file names the kind (``server = "llamacpp"``) and gives its settings as the
    ``[modes.<kind>]`` table; validated, they are ``settings``, an instance of the
    kind's class in :mod:`kvlab.servers.kinds`, which builds the server."""

    name: str = Field(min_length=1, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
    server: str = "embedded"  # a kind of kvlab.servers.kinds
    api: ApiKind = ApiKind.LLAMACPP_COMPLETION
    stream: bool = True
    body: dict[str, Any] = Field(default_factory=dict)  # extra request-body fields
    batch: int = Field(default=1, ge=1)  # inputs per request (an embeddings API's)
    # a session's turns: "resend" the whole history each turn, or let the "server" keep
    # it (OpenAI Responses' previous_response_id: only each new turn is sent)
    history: Literal["resend", "server"] = "resend"
    capacities: list[int] | None = None  # overrides workload.capacities for this mode
    settings: ServerSettingsUnion = Field(default_factory=EmbeddedSettings)

    @model_validator(mode="before")
    @classmethod
    def _settings_of_its_kind(cls, data: Any) -> Any:
        """``server = "k"`` and a ``[modes.k]`` table -> ``settings`` of kind k."""
        if not isinstance(data, dict):
            return data
        data = dict(data)
        if "settings" in data:
            raise ValueError("settings: unknown key (give the [modes.<server>] table)")
        kind = data.get("server", "embedded")
        tables = {k: data.pop(k) for k in SERVER_KINDS if k in data}
        for k in tables:
            if k != kind:
                raise ValueError(f"[{k}] settings given but server is {kind!r}")
        if kind in SERVER_KINDS:
            table = tables.get(kind) or {}
            if isinstance(table, dict):
                if "kind" in table:
                    raise ValueError(f"{kind}.kind: unknown key")
                table = {**table, "kind": kind}
            data["settings"] = table
        return data

    @field_validator("server")
    @classmethod
    def _known_kind(cls, value: str) -> str:
        if value not in SERVER_KINDS:
            raise ValueError(f"{value!r} is not one of {', '.join(SERVER_KINDS)}")
        return value

    @model_validator(mode="after")
    def _fits_its_api(self) -> Mode:
        dialect = dialect_of(self.api)
        if not dialect.generates and self.stream:
            raise ValueError(f"stream: the {self.api} API answers whole; set stream = false")
        if self.history == "server" and not dialect.keeps_state:
            raise ValueError(f"history: a {self.api} server keeps no conversation; "
                             'history = "server" needs api = "openai-responses"')
        if self.batch > 1 and dialect.generates:
            raise ValueError(f"batch: a {self.api} request holds one prompt; batches of "
                             "inputs are an embeddings API's (api = \"openai-embeddings\")")
        return self

    @property
    def inputs_batch(self) -> int | None:
        """Inputs per request of an embeddings mode; None: one prompt per request."""
        return None if dialect_of(self.api).generates else self.batch


class Experiment(_Strict):
    """A validated experiment file."""

    name: str = Field(min_length=1, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
    description: str = ""
    workload: Workload = Field(default_factory=Workload)
    protocol: Protocol = Field(default_factory=Protocol)
    modes: list[Mode] = Field(min_length=1)
    compare: list[tuple[str, str]] = Field(default_factory=list)
    order: Literal["blocked", "abba", "interleaved"] = "blocked"  # see bench.plan.order
    load: LoadSettings = Field(default_factory=SequentialLoad)  # bench.plan.loads.kinds
    slo: SloSettings = Field(default_factory=SloSettings)
    search: SearchSettings | None = None  # the highest rate meeting objectives

    @model_validator(mode="before")
    @classmethod
    def _sequential_by_default(cls, data: Any) -> Any:
        """A ``[load]`` table without ``kind`` is the sequential kind's."""
        if isinstance(data, dict) and isinstance(data.get("load"), dict) \
                and "kind" not in data["load"]:
            data = {**data, "load": {**data["load"], "kind": SequentialLoad().kind}}
        return data

    @model_validator(mode="after")
    def _order_needs_sequential(self) -> Experiment:
        if self.order != "blocked" and not self.load.one_by_one:
            raise ValueError(f"order: {self.order!r} alternates sequential requests; "
                             f"use order = \"blocked\" with a {self.load.name} load")
        return self

    @model_validator(mode="after")
    def _load_fits_workload(self) -> Experiment:
        search = self.search
        if problem := self.load.problem(self.workload.dataset, search is not None):
            raise ValueError(problem)
        for i, mode in enumerate(self.modes):
            if self.load.sends_sessions and not dialect_of(mode.api).chat:
                raise ValueError(f"modes[{i}].api: a sessions load sends each turn's history "
                                 'as chat messages; set api = "openai-chat", '
                                 '"anthropic-messages" or "openai-responses"')
            if mode.history == "server" and not self.load.sends_sessions:
                raise ValueError(f'modes[{i}].history: "server" continues a session: it '
                                 'needs [load] kind = "sessions"')
        if search is not None and search.goodput is not None and SloSettings() == self.slo:
            raise ValueError("search.goodput: the share of requests meeting [slo]; set "
                             "[slo] ttft_ms, itl_ms or e2e_ms")
        return self

    def repeat_aa(self, name: str) -> Experiment:
        """This experiment reduced to mode ``name`` measured twice (A/A: the noise
        floor); the copy is ``<name>-again`` and the pair is the only comparison."""
        mode = self.mode(name)
        again = mode.model_copy(update={"name": f"{name}-again"})
        return self.model_copy(update={"modes": [mode, again],
                                       "compare": [(name, again.name)]})

    @model_validator(mode="after")
    def _names(self) -> Experiment:
        names = [m.name for m in self.modes]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"modes: duplicate mode name {duplicates[0]!r}")
        for i, (a, b) in enumerate(self.compare):
            for name in (a, b):
                if name not in names:
                    raise ValueError(
                        f"compare[{i}]: {name!r} is not a mode (modes: {', '.join(names)})"
                    )
            if a == b:
                raise ValueError(f"compare[{i}]: compares {a!r} with itself")
        for i, mode in enumerate(self.modes):  # refused here, before any server starts
            if problem := mode.settings.capacity_problem(max(self.capacities(mode))):
                raise ValueError(f"modes[{i}].{mode.server}.{problem}")
        for capacity in self.all_capacities():
            if problem := self.workload.dataset.capacity_problem(capacity):
                raise ValueError(f"workload.dataset.{problem}")
        return self

    def mode(self, name: str) -> Mode:
        """The mode called ``name``; ExperimentError if there is none."""
        for mode in self.modes:
            if mode.name == name:
                return mode
        names = ", ".join(m.name for m in self.modes)
        raise ExperimentError(f"experiment {self.name!r} has no mode {name!r} (modes: {names})")

    def capacities(self, mode: Mode) -> list[int]:
        """The capacities this mode is measured at."""
        return list(mode.capacities or self.workload.capacities)

    def all_capacities(self) -> list[int]:
        """Every capacity any mode uses, ascending."""
        return sorted({c for m in self.modes for c in self.capacities(m)})


def _describe_error(error: ErrorDetails) -> str:
    """One phrase for a pydantic error; never echoes a value except for choices."""
    kind = error["type"]
    if kind == "extra_forbidden":
        loc = error["loc"]
        owners = [k for k, cls in LOAD_KINDS.items() if loc[-1] in cls.model_fields]
        if loc[0] == "load" and len(loc) == 3 and owners:  # another load kind's key
            return f"applies to {' and '.join(owners)} loads only, not {loc[1]}"
        return "unknown key"
    if kind == "missing":
        return "required key is missing"
    if kind in ("literal_error", "enum"):
        expected = str(error.get("ctx", {}).get("expected", ""))
        choices = expected.replace("'", "").replace(" or ", ", ")
        return f"{error['input']!r} is not one of {choices}"
    if kind == "union_tag_invalid":  # a kind = "..." no registry knows
        ctx = error.get("ctx", {})
        choices = str(ctx.get("expected_tags", "")).replace("'", "")
        return f"kind {ctx.get('tag')!r} is not one of {choices}"
    message = str(error["msg"])
    return message.removeprefix("Value error, ")


def _key_path(loc: tuple[Any, ...]) -> str:
    parts: list[str] = []
    for item in loc:
        if isinstance(item, int):
            parts.append(f"[{item}]")
        else:
            parts.append(("." if parts else "") + str(item))
    return "".join(parts)


def _file_loc(loc: tuple[Any, ...]) -> tuple[Any, ...]:
    """A pydantic error location as the file's key path: a mode's ``settings`` are its
    ``[modes.<kind>]`` table, and a dataset's kind tag is not a key of the file."""
    out: list[Any] = []
    for i, part in enumerate(loc):
        if part in ("tuple[str, str]", "settings"):
            continue
        if i > 0 and loc[i - 1] == "dataset" and part in DATASET_KINDS:
            continue
        if i == 1 and loc[0] == "load" and part in LOAD_KINDS:
            continue
        out.append(part)
    return tuple(out)


def parse_experiment(text: str, source: str = "<experiment>") -> Experiment:
    """Validate TOML text; ``source`` names it in error messages."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ExperimentError(f"{source}: not valid TOML: {exc}") from None
    for old, new in current_kinds(data.get("modes")):
        print(f"{source}: server kind {old!r} is deprecated; write {new!r} "
              f'(server = "{new}", [modes.{new}])', file=sys.stderr)
    try:
        return Experiment.model_validate(data)
    except ValidationError as exc:
        errors = exc.errors()
        first = errors[0]
        # A nested ValueError from a model validator has no loc inside that model; a
        # mode's settings are the [modes.<kind>] table of the file.
        loc = _file_loc(first["loc"])
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        where = f"{_key_path(loc)}: " if loc else ""  # top-level checks name their key
        raise ExperimentError(f"{source}: {where}{_describe_error(first)}{more}") from None


def read_experiment(path: Path | str) -> str:
    """The text of an experiment file; ExperimentError in one line if it cannot be read."""
    try:
        return Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ExperimentError(f"{path}: cannot read the experiment file ({exc.strerror})") from None


def load_experiment(path: Path | str, text: str | None = None) -> Experiment:
    """Read and validate an experiment file (``text``: its text as changed by ``kvlab run``'s
    overrides; relative paths in it are still relative to ``path``)."""
    path = Path(path)
    text = read_experiment(path) if text is None else text
    experiment = parse_experiment(text, str(path))
    if experiment.workload.queries_file is not None:
        queries = Path(experiment.workload.queries_file)
        if not queries.is_absolute():
            experiment.workload.queries_file = str((path.parent / queries).resolve())
    experiment.workload.dataset = experiment.workload.dataset.resolved(path.parent)
    if experiment.workload.tokenizer is not None:
        tokenizer = Path(experiment.workload.tokenizer).expanduser()
        if not tokenizer.is_absolute():
            tokenizer = (path.parent / tokenizer).resolve()
        experiment.workload.tokenizer = str(tokenizer)
    return experiment
