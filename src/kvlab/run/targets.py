"""What a (mode, capacity) is measured against: a server kvlab launches, a server the
user started, or an external endpoint.

A :class:`ServerTarget` brings one up when its plan's ``Launch`` step comes (starts the
server, checks the user's server, or checks an external endpoint's ``/v1/models``),
gives the endpoint its requests go to (``endpoint_for``: API keys come from the
environment, never from files), counts prompt tokens for prompt sizing, reads the
server's ``/metrics`` around the requests, says whether its server died, and stops
it. The executor reaches targets through the :class:`Target` interface only, so a test
can put a target of its own in their place.

``kvlab run --no-launch`` (an :class:`Attach` plan): every mode of a launched kind is
measured against a server the user started, given as ``MODE=URL`` (every capacity of
the mode) or ``MODE@CAPACITY=URL`` (that capacity; the more specific one wins); see
:mod:`kvlab.run.attached`.
"""

from __future__ import annotations

import asyncio
import os
import re
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlsplit

from kvlab.bench.client.endpoints import Endpoint
from kvlab.bench.client.gauges import DEFAULT_INTERVAL_S, GaugeRecorder
from kvlab.bench.client.urls import redact_url, require_http_url
from kvlab.bench.plan.sizing import Counter
from kvlab.errors import ConfigError
from kvlab.experiment import Experiment
from kvlab.run.attached import AttachedServer
from kvlab.run.runplan import Launch, ModePlan
from kvlab.run.tree_memory import TreeMemoryRecorder
from kvlab.rundir import RunClock, RunDir
from kvlab.servers.base import Server


class Target(Protocol):
    """One (mode, capacity) of a plan, as the executor uses it."""

    async def up(self, log: Path, ready_timeout_s: float, note: Callable[[str], None]
                 ) -> Endpoint:
        """Bring it up (start, or check) and return where its requests go."""
        ...

    def counter(self, params: dict[str, Any], tokenizer: Path | None
                ) -> AbstractAsyncContextManager[Counter]:
        """What counts prompt tokens as this target does (bench.plan.sizing), while
        the context lasts."""
        ...

    def gauges(self, path: Path, clock: RunClock, load: str | None, start: int,
               end: Callable[[], int], poll: bool) -> AbstractAsyncContextManager[None]:
        """Read its ``/metrics`` into ``path`` around requests at run positions
        ``start`` .. ``end()``, and every interval during them with ``poll``."""
        ...

    async def declared_width(self) -> int | None:
        """The vector length its server declares for embeddings (None: it declares
        none)."""
        ...

    def died(self) -> str | None:
        """Why its server stopped (its signal, if any); None while it runs (or it is
        not kvlab's to watch)."""
        ...

    def down(self) -> dict[str, Any] | None:
        """Stop it (a launched server) and return what the manifest keeps (None: an
        external endpoint)."""
        ...


def endpoint_for(mode: ModePlan, server: Server | None, timeout_s: float) -> Endpoint:
    """Where this mode's requests go. API keys come from the environment, never files."""
    if server is not None:
        return Endpoint(server.base_url, mode.api, model=mode.settings.model_name(),
                        name=mode.name, timeout_s=timeout_s)
    external = mode.settings.address()
    assert external is not None, f"mode {mode.name}: no server and no address"
    if external.endpoint is not None:
        from kvlab.bench.client.endpoint_config import load_endpoints, select_endpoint

        resolved = select_endpoint(load_endpoints(), external.endpoint)
        require_http_url(resolved.base_url, f"mode {mode.name}: endpoint {external.endpoint}")
        return Endpoint(
            resolved.base_url, mode.api, model=resolved.model, api_key=resolved.api_key,
            name=mode.name, timeout_s=timeout_s,
        )
    api_key = None
    if external.api_key_env:
        api_key = os.environ.get(external.api_key_env)
        if not api_key:
            raise ConfigError(
                f"mode {mode.name}: environment variable {external.api_key_env} is not set"
            )
    assert external.base_url is not None
    require_http_url(external.base_url, f"mode {mode.name}: base_url")
    return Endpoint(external.base_url, mode.api, model=external.model, api_key=api_key,
                    name=mode.name, timeout_s=timeout_s)


class ServerTarget:
    """A (mode, capacity) of a plan on a real server: launched by kvlab, started by the
    user (``launch.url``), or an external endpoint; ``run_path`` is named in the resume
    hint of an attached server's errors."""

    def __init__(self, mode: ModePlan, launch: Launch, timeout_s: float,
                 run_path: Path | None = None) -> None:
        self.mode = mode
        self.capacity = launch.capacity
        self.timeout_s = timeout_s
        self.server: Server | None = (
            AttachedServer(launch.url, mode.name, launch.capacity, run_path)
            if launch.url is not None else mode.settings.build(launch.capacity))
        self.endpoint: Endpoint | None = None

    async def up(self, log: Path, ready_timeout_s: float, note: Callable[[str], None]
                 ) -> Endpoint:
        server = self.server
        if server is not None:
            note(f"checking {redact_url(server.base_url)}" if isinstance(server, AttachedServer)
                 else f"starting {self.mode.server} server")
            server.start(log, ready_timeout_s)
        self.endpoint = endpoint_for(self.mode, server, self.timeout_s)
        if server is None:
            from kvlab.bench.client.models import check_models

            await asyncio.to_thread(check_models, self.endpoint)
        return self.endpoint

    @asynccontextmanager
    async def counter(self, params: dict[str, Any], tokenizer: Path | None
                      ) -> AsyncIterator[Counter]:
        import httpx

        from kvlab.bench.plan.sizing import choose_counter

        assert self.endpoint is not None, "bring the target up first"
        async with httpx.AsyncClient() as client:
            yield await choose_counter(client, self.endpoint, params, tokenizer)

    @asynccontextmanager
    async def gauges(self, path: Path, clock: RunClock, load: str | None, start: int,
                     end: Callable[[], int], poll: bool) -> AsyncIterator[None]:
        """Not for a server without ``/metrics``; an external endpoint's key goes in the
        headers only. With ``poll``, a server kvlab launched also has its process tree's
        resident memory sampled beside ``path``, into ``process_memory.jsonl``."""
        endpoint = self.endpoint
        assert endpoint is not None, "bring the target up first"
        headers = endpoint.dialect.headers(endpoint.api_key)
        pid = self.server.pid if self.server is not None else None
        async with GaugeRecorder(endpoint.base_url, path, clock, mode=self.mode.name,
                                 capacity=self.capacity, load=load, start_position=start,
                                 end_position=end, headers=headers,
                                 interval_s=DEFAULT_INTERVAL_S if poll else None), \
                TreeMemoryRecorder(pid, RunDir(path.parent).memory_path, clock,
                                   mode=self.mode.name, capacity=self.capacity, load=load,
                                   interval_s=DEFAULT_INTERVAL_S) \
                if poll and pid is not None else nullcontext():
            yield

    async def declared_width(self) -> int | None:
        from kvlab.bench.client.models import declared_width

        assert self.endpoint is not None, "bring the target up first"
        return await asyncio.to_thread(declared_width, self.endpoint)

    def died(self) -> str | None:
        server = self.server
        if server is None or server.is_alive():
            return None
        return server.exit_description() or "exited"

    def down(self) -> dict[str, Any] | None:
        if self.server is None:
            return None
        self.server.stop()
        return {**self.mode.settings.recorded(), **self.server.facts()}


_SPEC = re.compile(r"^(?P<mode>[A-Za-z0-9][A-Za-z0-9._-]*)(@(?P<cap>[0-9]+))?=(?P<url>.+)$")


@dataclass
class Attach:
    """``--no-launch``: the URL of the server the user started for each (mode, capacity);
    a key's capacity None stands for every capacity of that mode."""

    urls: dict[tuple[str, int | None], str]
    run_path: Path | None = field(default=None)  # named in the resume hint of an error

    def url(self, mode: str, capacity: int) -> str:
        """The URL of ``mode`` at ``capacity``: MODE@CAPACITY wins over MODE."""
        found = self.urls.get((mode, capacity)) or self.urls.get((mode, None))
        if found is None:
            raise ConfigError(f"--no-launch: no --endpoint for mode {mode} at capacity "
                              f"{capacity}; add --endpoint {mode}@{capacity}=URL")
        return found

    def to_manifest(self) -> dict[str, str]:
        """``{"MODE": url, "MODE@CAPACITY": url}``, URLs without credentials."""
        return {(m if c is None else f"{m}@{c}"): redact_url(u)
                for (m, c), u in sorted(self.urls.items(), key=lambda kv: (kv[0][0],
                                                                           kv[0][1] or 0))}


def parse_endpoint_specs(specs: list[str]) -> dict[tuple[str, int | None], str]:
    """``["mono=http://h:8080", "mono@2048=http://h:8082"]`` -> {(mode, capacity): url}."""
    urls: dict[tuple[str, int | None], str] = {}
    for spec in specs:
        match = _SPEC.match(spec.strip())
        if match is None:
            raise ConfigError(f"--endpoint {spec!r}: expected MODE=URL or MODE@CAPACITY=URL, "
                              "e.g. mono=http://127.0.0.1:8080")
        url = match["url"].rstrip("/")
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ConfigError(f"--endpoint {match['mode']}: {redact_url(url) or url!r} is not "
                              "an http(s) URL, e.g. http://127.0.0.1:8080")
        key = (match["mode"], int(match["cap"]) if match["cap"] else None)
        if key in urls and urls[key] != url:
            raise ConfigError(f"--endpoint {spec.split('=', 1)[0]} is given twice")
        urls[key] = url
    return urls


def attach_plan(experiment: Experiment, specs: list[str]) -> Attach:
    """Check ``--endpoint`` specs against the experiment: modes and capacities exist, only
    modes of a launched kind (embedded, llamacpp, ...) take one, and each of their
    capacities has one."""
    urls = parse_endpoint_specs(specs)
    names = [m.name for m in experiment.modes]
    for mode_name, capacity in urls:
        if mode_name not in names:
            raise ConfigError(f"--endpoint {mode_name}: no such mode in {experiment.name} "
                              f"(modes: {', '.join(names)})")
        mode = experiment.mode(mode_name)
        if not mode.settings.launched:
            raise ConfigError(f"--endpoint {mode_name}: mode {mode_name} is external; its "
                              "endpoint comes from the experiment file")
        if capacity is not None and capacity not in experiment.capacities(mode):
            allowed = ", ".join(str(c) for c in experiment.capacities(mode))
            raise ConfigError(f"--endpoint {mode_name}@{capacity}: mode {mode_name} is not "
                              f"measured at capacity {capacity} (capacities: {allowed})")
    attach = Attach(urls)
    for mode in experiment.modes:
        if not mode.settings.launched:
            continue
        missing = [c for c in experiment.capacities(mode) if (mode.name, c) not in urls
                   and (mode.name, None) not in urls]
        if missing:
            raise ConfigError(
                f"--no-launch: mode {mode.name} ({mode.server}) has no --endpoint"
                + (f" for capacity {', '.join(map(str, missing))}"
                   if len(missing) < len(experiment.capacities(mode)) else "")
                + f"; give --endpoint {mode.name}=URL (or {mode.name}@CAPACITY=URL per "
                "capacity) for the server you started")
    return attach
