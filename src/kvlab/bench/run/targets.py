"""What a (mode, capacity) is measured against: a server kvlab launches, or an endpoint.

``make_server`` builds the server of a launched mode (its kind's settings build it; the
session starts and stops it); ``endpoint_for`` says where the requests go and with which
credentials (API keys come from the environment, never from files).

``kvlab run --no-launch`` (an :class:`Attach` plan): every mode of a launched kind is
measured against a server the user started, given as ``MODE=URL`` (every capacity of
the mode) or ``MODE@CAPACITY=URL`` (that capacity; the more specific one wins). kvlab
cannot restart a server it does not own at another ``--ctx-size``/``-c``, so each
capacity needs a server started with that capacity. An :class:`AttachedServer` checks
``/health`` when its (mode, capacity) comes up in the run order, reads ``/props``
(kept in the manifest; a context size that is neither the capacity nor llama.cpp's
padding of it to a multiple of 256 is refused), and is never started or stopped.
"""

from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from kvlab.bench.client.endpoints import Endpoint
from kvlab.bench.client.urls import redact_url, require_http_url
from kvlab.errors import ConfigError, EndpointUnreachable
from kvlab.experiment import Experiment, Mode
from kvlab.servers.base import Server
from kvlab.servers.process import STOP_GRACE_S


def make_server(experiment: Experiment, mode: Mode, capacity: int,
                attach: Attach | None = None) -> Server | None:
    """The server of ``mode`` at ``capacity``, built by its kind's settings; None for
    an external endpoint; with ``attach`` (``--no-launch``), the user's server for a
    launched kind."""
    if attach is not None and mode.settings.launched:
        return AttachedServer(attach.url(mode.name, capacity), mode.name, capacity,
                              attach.run_path)
    return mode.settings.build(capacity)


def endpoint_for(experiment: Experiment, mode: Mode, server: Server | None) -> Endpoint:
    """Where this mode's requests go. API keys come from the environment, never files."""
    timeout = experiment.protocol.request_timeout_s
    if server is not None:
        return Endpoint(server.base_url, mode.api, model=mode.settings.model_name(),
                        name=mode.name, timeout_s=timeout)
    external = mode.external
    assert external is not None
    if external.endpoint is not None:
        from kvlab.bench.client.endpoint_config import load_endpoints, select_endpoint

        resolved = select_endpoint(load_endpoints(), external.endpoint)
        require_http_url(resolved.base_url, f"mode {mode.name}: endpoint {external.endpoint}")
        return Endpoint(
            resolved.base_url, mode.api, model=resolved.model, api_key=resolved.api_key,
            name=mode.name, timeout_s=timeout,
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
                    name=mode.name, timeout_s=timeout)


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


def context_size(props: dict[str, Any] | None) -> int | None:
    """The slot's context size a llama.cpp-style ``/props`` reports, if any."""
    settings = (props or {}).get("default_generation_settings")
    n_ctx = settings.get("n_ctx") if isinstance(settings, dict) else None
    return n_ctx if isinstance(n_ctx, int) and not isinstance(n_ctx, bool) else None


def accepted_context_sizes(capacity: int) -> set[int]:
    """Slot context sizes that mean "started with ``-c capacity``": the capacity itself,
    or llama.cpp's padding of it up to a multiple of 256."""
    return {capacity, -(-capacity // 256) * 256}


class AttachedServer:
    """A server the user started (``--no-launch``): checked, never started or stopped."""

    def __init__(self, base_url: str, mode: str, capacity: int,
                 run_path: Path | None = None) -> None:
        self.base_url = base_url.rstrip("/")
        self.mode = mode
        self.capacity = capacity
        self.run_path = run_path
        self._props: dict[str, Any] | None = None

    def _fail(self, why: str) -> EndpointUnreachable:
        resume = f"; then: kvlab run --resume {self.run_path} (records so far are kept)" \
            if self.run_path is not None else ""
        return EndpointUnreachable(
            f"{self.mode} @ {self.capacity}: {why}; start the server for this mode and "
            f"capacity (e.g. the matching profile of experiments/compose.yaml){resume}")

    def start(self, log_path: Path, ready_timeout_s: float = 180.0) -> None:
        """Wait for ``/health`` 200 (a 503 while loading is waited on, up to
        ``ready_timeout_s``; no connection fails at once); read ``/props``."""
        import httpx

        url = redact_url(self.base_url)
        deadline = time.monotonic() + ready_timeout_s
        while True:
            try:
                status = httpx.get(self.base_url + "/health", timeout=10.0).status_code
            except httpx.HTTPError as exc:
                raise self._fail(f"nothing answers {url}/health ({type(exc).__name__})") \
                    from None
            if status == 200:
                break
            if status != 503 or time.monotonic() > deadline:
                raise self._fail(f"{url}/health answers {status}")
            time.sleep(0.5)
        try:
            answer = httpx.get(self.base_url + "/props", timeout=10.0)
            self._props = answer.json() if answer.status_code == 200 else None
        except (httpx.HTTPError, ValueError):
            self._props = None  # /props is optional (not every server has it)
        n_ctx = context_size(self._props)
        if n_ctx is not None and n_ctx not in accepted_context_sizes(self.capacity):
            raise self._fail(f"the server at {url} runs with a context of {n_ctx} tokens, "
                             f"not {self.capacity} (/props)")

    def stop(self, grace_s: float = STOP_GRACE_S) -> None:
        """Nothing: kvlab does not own this server."""

    def is_alive(self) -> bool:
        """Always True: kvlab cannot see another owner's process (a dead one shows as
        failed requests)."""
        return True

    def exit_description(self, wait_s: float = 0.0) -> str | None:
        """None: kvlab does not know how another owner's process ended."""
        return None

    def props(self) -> dict[str, Any] | None:
        return self._props

    def facts(self) -> dict[str, Any]:
        """For the manifest: not launched, where it was, and its ``/props``."""
        return {"launched": False, "base_url": redact_url(self.base_url),
                "props": self._props}
