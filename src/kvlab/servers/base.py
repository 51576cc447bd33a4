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

from pathlib import Path
from typing import Any, ClassVar, Protocol

from pydantic import BaseModel, ConfigDict

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

    def build(self, capacity: int) -> Server | None:
        """The server of one capacity (context tokens per sequence); None for a kind
        kvlab does not launch."""
        raise NotImplementedError

    def capacity_problem(self, capacity: int) -> str | None:
        """Why these settings cannot serve ``capacity`` (context tokens per sequence), as
        "key: what is wrong; what to do"; None when they can. The experiment file is
        refused with it before anything starts."""
        return None

    def model_name(self) -> str:
        """The model id a launched server's requests name (OpenAI APIs' ``model``)."""
        return "default"
