"""The typed state of a run: what ``manifest.json`` holds, kept in memory while it runs.

The run's journal (:mod:`kvlab.run.journal`) changes a :class:`RunState` in memory
(a server stopped, a load point done, a capacity's prompts sized) and saves it through
the run's one writer (:class:`kvlab.rundir.writer.RunWriter`); nothing reads the
file back to learn what the program itself just did. Keys a newer or older kvlab wrote
are kept as they are (``extra="allow"``), so reading and saving a run never drops a fact.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

from pydantic import (
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidatorFunctionWrapHandler,
    WrapValidator,
)

from kvlab.errors import ConfigError
from kvlab.rundir.prepared import Sizing


class _Facts(BaseModel):
    model_config = ConfigDict(extra="allow")


class Host(_Facts):
    """The machine a run began on, as ``run.rundir.host_facts()`` records it (None: not
    recorded, e.g. a peer's file): platform, CPU model and flags, logical cores, memory
    (bytes), Python and torch versions, host name, when (ISO 8601), clock, time zone."""

    platform: str | None = None
    cpu: str | None = None
    cpu_flags: list[str] | None = None
    cores: int | None = None
    memory_bytes: int | None = None
    python: str | None = None
    torch: str | None = None
    hostname: str | None = None
    recorded_at: str | None = None


def _unrecorded(value: object, handler: ValidatorFunctionWrapHandler) -> object:
    """A fact that does not read as its type reads as not recorded (None)."""
    try:
        return handler(value)
    except ValidationError:
        return None


class ServerFacts(_Facts):
    """What every server kind's ``facts()`` holds in common, read back: its kind, the
    command line (launched kinds), version (``""``: the kind records none), the log's
    path, and for a server kvlab did not launch (``launched`` False) its URL. A launched
    kind that knows them also records its KV budget (``kv_served``: the data of
    ``memory.served.ServedKv``), its weights' bytes (``weights_bytes``) and the names of
    its /metrics counters (``metric_names``: ``metric_names.MetricNames``' data); None:
    not recorded, or not of its type."""

    kind: str | None = None
    argv: list[str] | None = None
    version: object = ""
    log: str | None = None
    log_path: str | None = None
    launched: bool | None = None
    base_url: str | None = None
    kv_served: Annotated[dict[str, object] | None, WrapValidator(_unrecorded)] = None
    weights_bytes: Annotated[int | None, WrapValidator(_unrecorded)] = None
    metric_names: Annotated[dict[str, object] | None, WrapValidator(_unrecorded)] = None
    kv_check: dict[str, object] | None = None  # servers.kvlog.KvCheck's data (llama-server)


class WorkerFacts(_Facts):
    """One load worker as the load driver's facts name it: its index, host and cores."""

    worker: int
    host: str = "?"
    cores: int | None = None


class LoadWorkers(_Facts):
    """An invocation's load workers, read back from the load driver's facts: how many ran,
    the Ray version, the cluster's address (None or ``local``: a local Ray kvlab
    started), its nodes and each worker."""

    count: int | None = None
    address: str | None = None
    ray_version: str = "?"
    nodes: int | None = None
    workers: list[WorkerFacts] = Field(default_factory=list)


class WorkerClock(_Facts):
    """One worker's clock at a load point: its index, the requests it sent, and its
    clock's offset to the coordinator's with its bound and round trip (ns)."""

    worker: int
    requests: int
    offset_ns: int | float
    error_ns: int | float
    rtt_ns: int | float


class ServerEntry(_Facts):
    """One server's time in the run: a (mode, capacity) up, then stopped."""

    mode: str = ""
    capacity: int = 0
    started: str | None = None  # local wall-clock time (ISO 8601)
    facts: dict[str, object] | None = None  # the Server's facts(); None: an external endpoint
    stopped: str | None = None

    @property
    def known(self) -> ServerFacts | None:
        """:attr:`facts` read as :class:`ServerFacts` (None: an external endpoint)."""
        return None if self.facts is None else ServerFacts.model_validate(self.facts)


class InvocationEntry(_Facts):
    """One invocation of the runner (a run, or each resume)."""

    started: str | None = None
    modes: list[str] = Field(default_factory=list)
    order: list[tuple[str, int]] = Field(default_factory=list)  # (mode, capacity) blocks
    # bench.plan.order.OrderChoice.to_dict() and the sequence of blocks
    run_order: dict[str, object] = Field(default_factory=dict)
    # the load workers of this invocation (the load driver's facts, e.g. Ray's: driver,
    # version, address, nodes, and each worker's node, host and process); None: none
    workers: dict[str, object] | None = None
    stopped: str | None = None
    # 1-, 5- and 15-minute load averages at start and stop (servers.preflight.load_average)
    load_average_started: list[float] | None = None
    load_average_stopped: list[float] | None = None

    @property
    def load_workers(self) -> LoadWorkers | None:
        """:attr:`workers` read as :class:`LoadWorkers` (None: no load workers)."""
        return None if not self.workers else LoadWorkers.model_validate(self.workers)


class Overrides(_Facts):
    """What ``kvlab run`` changed in the experiment file, as the manifest keeps it:
    ``queries`` (``--queries N``) and ``set`` (``--set KEY=VALUE``: dotted key -> value,
    in the order given)."""

    queries: int | None = None
    set: dict[str, object] = Field(default_factory=dict)


class NoLaunch(_Facts):
    """``kvlab run --no-launch``: the URL (no credentials) of each MODE[@CAPACITY]."""

    endpoints: dict[str, str]


class PointClocks(_Facts):
    """The clocks of one load point's workers: per worker its index, requests, and clock
    offset to the coordinator's with its bound (bench.workers.clocks.ClockOffset, ns)."""

    mode: str
    capacity: int
    load: str
    clocks: list[dict[str, object]]

    @property
    def readings(self) -> list[WorkerClock]:
        """:attr:`clocks` read as :class:`WorkerClock`."""
        return [WorkerClock.model_validate(c) for c in self.clocks]


# Keys written only once they have a value (a manifest without them is as before).
_OPTIONAL = ("queries", "overrides", "tokenizer", "dataset_file", "repeat_aa", "no_launch",
             "prompt_sizing", "points_done", "rows_planned", "order", "workers",
             "worker_clocks", "worker_calibration")


class RunState(_Facts):
    """Everything a run decided and saw besides its records (``manifest.json``)."""

    run_id: str = ""
    kvlab_version: str | None = None
    # the commit of kvlab's source (kvlab.version), "-dirty" when a tracked file was
    # modified; None: unknown (a wheel built outside a git checkout)
    git_commit: str | None = None
    experiment_name: str = ""
    experiment_file: str | None = None  # the experiment file verbatim, as the user wrote it
    host: dict[str, object] = Field(default_factory=dict)  # run.rundir.host_facts()
    # each invocation of the runner (the run, then each resume); older manifests call
    # them "sessions", a word kvlab keeps for conversations of turns
    invocations: list[InvocationEntry] = Field(
        default_factory=list, validation_alias=AliasChoices("invocations", "sessions"))
    servers: list[ServerEntry] = Field(default_factory=list)
    run_order: list[tuple[str, int]] = Field(default_factory=list)  # every invocation's blocks
    calibration: dict[str, object] | None = None  # kvlab calibrate's limits when the run began
    queries: int | None = None  # an older manifest's queries per (mode, capacity)
    overrides: dict[str, object] | None = None  # kvlab run --queries N ("queries"), --set ("set")
    tokenizer: str | None = None  # the tokenizer file counting prompt tokens
    dataset_file: str | None = None  # the dataset's file, resolved when the run began
    repeat_aa: str | None = None  # the mode measured twice (kvlab run --repeat-aa)
    no_launch: NoLaunch | None = None
    prompt_sizing: dict[str, Sizing] | None = None  # capacity (as a string) -> its sizing
    points_done: list[tuple[str, int, str]] | None = None  # (mode, capacity, load label)
    # the first invocation's plan: (mode, capacity, load label or None, rows; None when a
    # point runs for a duration), so "n valid of m" reads m from what was planned
    rows_planned: list[tuple[str, int, str | None, int | None]] | None = None
    order: dict[str, object] | None = None  # the order the last invocation used
    # the load driver's settings as asked (bench.drivers.kinds: kvlab run --workers or
    # [load] workers); a resume uses them again unless told otherwise. None: in-process
    workers: dict[str, object] | None = None
    # kvlab calibrate --workers N's limits for the run's N load workers, when it began
    worker_calibration: dict[str, object] | None = None
    worker_clocks: list[PointClocks] | None = None  # every sharded point, as measured
    imported_from: str | None = None  # a peer's result file read as a run (not written)

    def to_json(self) -> dict[str, Any]:
        """The manifest as JSON data; optional keys appear once set."""
        unset = {k for k in (*_OPTIONAL, "imported_from") if getattr(self, k) is None}
        data = self.model_dump(mode="json", exclude=unset)
        # an entry's keys appear once known (an invocation's "stopped" once it stopped)
        data["servers"] = [e.model_dump(mode="json", exclude_none=True) for e in self.servers]
        data["invocations"] = [e.model_dump(mode="json", exclude_none=True)
                               for e in self.invocations]
        return data

    def dumps(self) -> str:
        """``manifest.json``'s text."""
        return json.dumps(self.to_json(), indent=2, default=str) + "\n"

    @property
    def machine(self) -> Host:
        """:attr:`host` read as :class:`Host`."""
        return Host.model_validate(self.host)

    def load_workers(self) -> int | None:
        """How many load workers the last invocation that had any ran (None: none did)."""
        counts = [LoadWorkers.model_validate(s.workers).count for s in self.invocations
                  if s.workers]
        return int(counts[-1]) if counts and counts[-1] is not None else None

    def point_done(self, mode: str, capacity: int, label: str) -> bool:
        """True once the load point (mode, capacity, label) completed."""
        return (mode, capacity, label) in set(self.points_done or [])

    def cell_plans(self, sent: dict[tuple[str, int, str | None], int]
                   ) -> dict[tuple[str, int, str | None], tuple[int | None, bool]]:
        """Each cell planned (and each cell ``sent``: rows sent per cell): its rows
        planned and whether it finished. A load point finished once in ``points_done``;
        sequential rows once as many were sent as planned. Empty when the run recorded
        no plan (an older run, a peer's file)."""
        if self.rows_planned is None:
            return {}
        done = set(self.points_done or [])
        out: dict[tuple[str, int, str | None], tuple[int | None, bool]] = {}
        for mode, capacity, load, rows in self.rows_planned:
            key = (mode, capacity, load)
            if load is None:
                finished = rows is None or sent.get(key, 0) >= rows
            else:
                finished = (mode, capacity, load) in done
            out[key] = (rows, finished)
        return out

    @classmethod
    def read(cls, path: Path) -> RunState:
        """A manifest file; an empty state when there is none; ConfigError (one line)
        when it is not a manifest."""
        if not path.is_file():
            return cls()
        try:
            return cls.model_validate_json(path.read_text(encoding="utf-8"))
        except (ValidationError, OSError) as exc:
            first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise ConfigError(f"{path}: not a kvlab manifest ({first})") from None
