"""The embedded server (``python -m kvlab serve``) as a managed server.

One process per (mode, capacity): ``--ctx-size`` is the capacity being measured; the
toy ``--preset`` or a real ``--model`` (Gemma 3 270M loads in about 20 s). The
process runs in its own session so a terminal Ctrl-C reaches the runner only; the
runner stops the server itself (SIGTERM, then SIGKILL) on every exit path, and
:mod:`kvlab.servers.process` makes sure none outlives kvlab.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx

import kvlab
from kvlab.errors import ServerLaunchError
from kvlab.servers.process import (
    STOP_GRACE_S,
    exit_description,
    free_port,
    log_tail,
    register,
    spawn,
    stop_process,
    unregister,
    wait_ready,
)


class EmbeddedServer:
    """``kvlab serve`` on a free loopback port, configured for one capacity."""

    def __init__(
        self,
        capacity: int,
        preset: str = "toy",
        no_cache: bool = False,
        threads: int | None = None,
        port: int | None = None,
        model: str | None = None,
        slots: int = 1,
        kv_blocks: int | None = None,
        block_size: int | None = None,
    ) -> None:
        self.capacity = capacity
        # slots > 1 or kv_blocks: continuous batching over a paged KV pool.
        self.slots, self.kv_blocks, self.block_size = slots, kv_blocks, block_size
        self.preset = preset
        self.model = model  # gemma-3-270m or a GGUF path; replaces the preset
        self.no_cache = no_cache
        self.threads = threads
        self.port = port or free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.log_path: Path | None = None
        self._process: subprocess.Popen[bytes] | None = None
        self._props: dict[str, Any] | None = None
        self._started_at: float | None = None

    def argv(self) -> list[str]:
        """The exact command line the server is started with."""
        argv = [sys.executable, "-m", "kvlab", "serve", "--host", "127.0.0.1"]
        argv += ["--port", str(self.port)]
        argv += ["--model", self.model] if self.model else ["--preset", self.preset]
        argv += ["--ctx-size", str(self.capacity)]
        if self.no_cache:
            argv.append("--no-cache")
        if self.threads is not None:
            argv += ["--threads", str(self.threads)]
        if self.slots != 1:
            argv += ["--slots", str(self.slots)]
        if self.kv_blocks is not None:
            argv += ["--kv-blocks", str(self.kv_blocks)]
        if self.block_size is not None:
            argv += ["--block-size", str(self.block_size)]
        return argv

    def start(self, log_path: Path, ready_timeout_s: float = 180.0) -> None:
        """Start the process, logging to ``log_path``; return once /health is 200."""
        self.log_path = Path(log_path)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("wb") as log:
            self._process = spawn(self.argv(), log)
        register(self)
        self._started_at = time.time()
        try:
            wait_ready(self.base_url, self._process, ready_timeout_s, poll_s=0.1,
                       name="kvlab serve")
        except BaseException as exc:
            self.stop()
            if isinstance(exc, ServerLaunchError):
                raise ServerLaunchError(f"{exc}; log {self.log_path}:\n"
                                        f"{log_tail(self.log_path, 15)}") from None
            raise
        try:
            response = httpx.get(f"{self.base_url}/props", timeout=2.0)
            self._props = response.json() if response.status_code == 200 else None
        except (httpx.HTTPError, ValueError):
            self._props = None

    def is_alive(self) -> bool:
        """True while the process runs."""
        return self._process is not None and self._process.poll() is None

    def exit_description(self) -> str | None:
        """How the process ended ("died of SIGKILL (...)"), or None while it runs."""
        return exit_description(self._process, "kvlab serve")

    def stop(self, grace_s: float = STOP_GRACE_S) -> None:
        """SIGTERM, then SIGKILL after a grace period; safe to call twice."""
        stop_process(self._process, grace_s)
        unregister(self)

    def facts(self) -> dict[str, Any]:
        """What the manifest keeps about this server."""
        return {
            "kind": "embedded",
            "argv": self.argv(),
            "version": f"kvlab {kvlab.__version__}",
            "threads": self.threads,
            "pid": self._process.pid if self._process else None,
            "base_url": self.base_url,
            "props": self._props,
            "log": str(self.log_path) if self.log_path else None,
            "started_at": self._started_at,
        }
