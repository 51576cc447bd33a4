"""What a run needs from a server, and what a server kind's settings must provide.

A (mode, capacity) is measured against a :class:`Server`: one kvlab launches (a
:class:`~kvlab.servers.process.ServerProcess`: ``kvlab serve``, ``llama-server``) or
one the user started (``kvlab run --no-launch``). The run starts it before the
mode's requests, asks :meth:`Server.is_alive` after a failed request, and stops it
and keeps :meth:`Server.facts` in the manifest on every exit path.

Each server kind has one :class:`ServerSettings` class (the ``[modes.<kind>]`` table
of an experiment) whose :meth:`~ServerSettings.build` makes the server of one
capacity; :mod:`kvlab.servers.kinds` lists the kinds.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Protocol

from pydantic import BaseModel, ConfigDict

from kvlab.memory.served import PoolName
from kvlab.metric_names import MetricNames
from kvlab.servers.process import STOP_GRACE_S


class Server(Protocol):
    """A server one (mode, capacity) is measured against."""

    @property
    def base_url(self) -> str:
        """e.g. ``"http://127.0.0.1:43121"``; valid once started."""
        ...

    @property
    def pid(self) -> int | None:
        """The process kvlab started (its descendants are the server's too); None when
        kvlab did not start it, or not yet."""
        ...

    def start(self, log_path: Path, ready_timeout_s: float = 180.0) -> None:
        """Start (or check) the server, logging to ``log_path``; return once it is ready.

        Raises :class:`kvlab.errors.ServerLaunchError` (with the log's tail) if the
        process exits or is not ready in time; the process is stopped first.
        """
        ...

    def stop(self, grace_s: float = STOP_GRACE_S) -> None:
        """SIGTERM, then SIGKILL after ``grace_s``; safe to call twice."""
        ...

    def is_alive(self) -> bool:
        """False once the server is known to have exited (a crash mid-run)."""
        ...

    def exit_description(self, wait_s: float = 0.0) -> str | None:
        """How it ended on its own ("died of SIGKILL (...)"); None while it runs (after
        waiting up to ``wait_s`` seconds) or when kvlab stopped it."""
        ...

    def facts(self) -> dict[str, Any]:
        """What the manifest keeps about it (JSON-ready: argv, version, /props, log);
        never a secret."""
        ...


@dataclass(frozen=True)
class Address:
    """Where the requests of a server kvlab does not launch go: an endpoint name of
    .env (``endpoint``) or a URL, the model id, and the NAME of the environment variable
    holding its key (never the key)."""

    endpoint: str | None = None
    base_url: str | None = None
    model: str | None = None
    api_key_env: str | None = None

    def describe(self) -> str:
        """The endpoint's name, else its URL (the dry run's words)."""
        return self.endpoint or self.base_url or ""


class ServerSettings(BaseModel):
    """The settings of one server kind: the ``[modes.<kind>]`` table of a mode.

    A subclass declares ``kind: Literal["<kind>"] = "<kind>"`` (the experiment's
    ``server = "<kind>"``) and builds its server with :meth:`build`.
    """

    model_config = ConfigDict(extra="forbid")

    # False: an endpoint kvlab does not start (external); --no-launch replaces only
    # launched kinds.
    launched: ClassVar[bool] = True
    # False: this kind's server is too heavy to run beside another, so an interleaved
    # order falls back to ABBA (see bench.plan.order.resolve_order).
    interleaves: ClassVar[bool] = True
    # The program named in messages ("llama-server").
    program: ClassVar[str] = "server"
    # Older spellings of the kind an experiment file may still give (server = "..." or
    # the [modes.<spelling>] table): read as this kind, with one deprecation line.
    old_spellings: ClassVar[tuple[str, ...]] = ()

    # What the run's checks read of it, declared here so that no module outside
    # servers/ asks which kind it is. The names of its /metrics counters and gauges
    # (kvlab.metric_names: prompt, cached and generated tokens, preemptions, queue, KV
    # use); None: kvlab reads none (an endpoint's readings may still be recognised).
    metric_names: ClassVar[MetricNames | None] = None
    # The rule its KV pool follows (kvlab.memory.served.POOLS: the knee, the bytes, the
    # prefix pool; `kvlab memory --knee KIND`); None: it has no KV budget kvlab reads.
    # Its server then records the budget as launched (facts()["kv_served"], a ServedKv
    # of this pool) and its weights' bytes (facts()["weights_bytes"]); its process
    # tree is the one of its `pid`. A kind without them gets "not measured: <kind>
    # exposes no ..." lines in the checks that need them.
    kv_pool: ClassVar[PoolName | None] = None

    def recorded(self) -> dict[str, object]:
        """What the run keeps beside its server's facts in the manifest: the names of
        its counters (``metric_names``; None: it declares none)."""
        return {"metric_names": None if self.metric_names is None
                else self.metric_names.to_dict()}

    def build(self, capacity: int) -> Server | None:
        """The server of one capacity (context tokens per sequence); None for a kind
        kvlab does not launch."""
        raise NotImplementedError

    def address(self) -> Address | None:
        """Where requests go when :meth:`build` gives no server (a kind kvlab does not
        launch); None for a launched kind."""
        return None

    def capacity_problem(self, capacity: int) -> str | None:
        """Why these settings cannot serve ``capacity`` (context tokens per sequence), as
        "key: what is wrong; what to do"; None when they can. The experiment file is
        refused with it before anything starts."""
        return None

    def model_name(self) -> str:
        """The model id a launched server's requests name (OpenAI APIs' ``model``)."""
        return "default"
