"""A server the user started (``kvlab run --no-launch``): checked, never started or stopped.

An :class:`AttachedServer` checks ``/health`` when its (mode, capacity) comes up in the
run order, reads ``/props`` (kept in the manifest; a context size that is neither the
capacity nor llama.cpp's padding of it to a multiple of 256 is refused), and is never
started or stopped: kvlab cannot restart a server it does not own at another
``--ctx-size``/``-c``, so each capacity needs a server started with that capacity.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from kvlab.bench.client.urls import redact_url
from kvlab.errors import EndpointUnreachable
from kvlab.servers.process import STOP_GRACE_S


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

    @property
    def pid(self) -> int | None:
        """None: kvlab did not start this server (its memory is not sampled)."""
        return None

    def exit_description(self, wait_s: float = 0.0) -> str | None:
        """None: kvlab does not know how another owner's process ended."""
        return None

    def props(self) -> dict[str, Any] | None:
        return self._props

    def facts(self) -> dict[str, Any]:
        """For the manifest: not launched, where it was, and its ``/props``."""
        return {"launched": False, "base_url": redact_url(self.base_url),
                "props": self._props}
