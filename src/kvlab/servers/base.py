"""What the runner needs from a server it manages (embedded or llama-server).

A managed server is started before its mode's requests and stopped after them, on
every exit path. ``facts()`` goes into the run's manifest.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol


class ManagedServer(Protocol):
    """A server process kvlab starts, waits for, and stops."""

    base_url: str  # e.g. "http://127.0.0.1:43121", valid once started

    def start(self, log_path: Path, ready_timeout_s: float = 180.0) -> None:
        """Start the process, logging to ``log_path``; return once /health is 200.

        Raises :class:`kvlab.errors.ServerLaunchError` (with the log's tail) if the
        process exits or is not ready in time; the process is stopped first.
        """
        ...

    def stop(self) -> None:
        """SIGTERM, then SIGKILL after a grace period; safe to call twice."""
        ...

    def facts(self) -> dict[str, Any]:
        """Argv, version, /props and anything else the manifest should keep."""
        ...
