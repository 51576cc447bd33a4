"""The embedded server (``python -m kvlab serve``) as a managed server.

One process per (mode, capacity): ``--ctx-size`` is the capacity being measured. The
process runs in its own session so a terminal Ctrl-C reaches the runner only; the
runner stops the server itself (SIGTERM, then SIGKILL) on every exit path.
"""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx

import kvlab
from kvlab.errors import ServerLaunchError

STOP_GRACE_S = 10.0


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago (bind to port 0)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def log_tail(path: Path, lines: int = 15) -> str:
    """The last ``lines`` lines of a log file ("" if it does not exist)."""
    try:
        return "\n".join(Path(path).read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


class EmbeddedServer:
    """``kvlab serve`` on a free loopback port, configured for one capacity."""

    def __init__(
        self,
        capacity: int,
        preset: str = "toy",
        no_cache: bool = False,
        threads: int | None = None,
        port: int | None = None,
    ) -> None:
        self.capacity = capacity
        self.preset = preset
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
        argv += ["--port", str(self.port), "--preset", self.preset]
        argv += ["--ctx-size", str(self.capacity)]
        if self.no_cache:
            argv.append("--no-cache")
        if self.threads is not None:
            argv += ["--threads", str(self.threads)]
        return argv

    def start(self, log_path: Path, ready_timeout_s: float = 180.0) -> None:
        """Start the process, logging to ``log_path``; return once /health is 200."""
        self.log_path = Path(log_path)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("wb") as log:
            self._process = subprocess.Popen(
                self.argv(),
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        self._started_at = time.time()
        deadline = time.monotonic() + ready_timeout_s
        with httpx.Client(timeout=2.0) as client:
            while True:
                code = self._process.poll()
                if code is not None:
                    self.stop()
                    raise ServerLaunchError(
                        f"kvlab serve exited with status {code} during start-up; "
                        f"log {self.log_path}:\n{log_tail(self.log_path)}"
                    )
                try:
                    if client.get(f"{self.base_url}/health").status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                if time.monotonic() > deadline:
                    self.stop()
                    raise ServerLaunchError(
                        f"kvlab serve not ready after {ready_timeout_s:.0f} s; "
                        f"log {self.log_path}:\n{log_tail(self.log_path)}"
                    )
                time.sleep(0.1)
            try:
                response = client.get(f"{self.base_url}/props")
                self._props = response.json() if response.status_code == 200 else None
            except (httpx.HTTPError, ValueError):
                self._props = None

    def is_alive(self) -> bool:
        """True while the process runs."""
        return self._process is not None and self._process.poll() is None

    def stop(self) -> None:
        """SIGTERM, then SIGKILL after a grace period; safe to call twice."""
        process = self._process
        if process is None or process.poll() is not None:
            return
        try:
            process.send_signal(signal.SIGTERM)
            process.wait(timeout=STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=STOP_GRACE_S)

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
