"""A server process kvlab starts: spawn, wait for ``/health``, stop, never orphan.

:class:`ServerProcess` is the base of every server kvlab launches (llama-server, the
embedded ``kvlab serve``): a subclass gives its command line and its manifest facts;
the base owns the port, the spawn, readiness, the log and its tail, and the stop. Each
child runs in its own process group (a terminal Ctrl-C reaches kvlab only; stopping
signals the whole group), is registered so ``atexit`` and SIGTERM/SIGHUP stop it, and
on Linux asks the kernel to SIGKILL it if kvlab itself dies, even by SIGKILL; what it
starts in turn (vLLM's EngineCore and Workers) is ended by :mod:`kvlab.watchdog`.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import IO, Any, Protocol

import httpx

from kvlab import watchdog
from kvlab.errors import ServerLaunchError

STOP_GRACE_S = 10.0  # SIGTERM, then SIGKILL after this many seconds


def free_port(host: str = "127.0.0.1") -> int:
    """A port the OS says is free now (a tiny race with other binders remains)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def log_tail(path: Path | None, n_lines: int = 25) -> str:
    """The last lines of a log file, or a note when there is none."""
    if path is None or not Path(path).exists():
        return "(no log)"
    lines = Path(path).read_text(encoding="utf-8", errors="replace").splitlines()
    return "\n".join(lines[-n_lines:])


_PR_SET_PDEATHSIG = 1


def _die_with_parent(parent_pid: int) -> Callable[[], None]:
    """A pre-exec hook asking Linux to SIGKILL the child when kvlab dies (even by SIGKILL)."""

    def hook() -> None:  # runs in the child between fork and exec
        try:
            libc = ctypes.CDLL("libc.so.6", use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        except OSError:
            return
        if os.getppid() != parent_pid:  # kvlab died before prctl took effect
            os._exit(1)

    return hook


def spawn(argv: list[str], log: IO[bytes], env: Mapping[str, str] | None = None
          ) -> subprocess.Popen[bytes]:
    """Start ``argv`` in its own process group, stdout and stderr to ``log``, marked for
    kvlab's watchdog (it and all it starts end when kvlab ends)."""
    # PDEATHSIG fires when the *thread* that forked exits, so only the main thread
    # (which lives as long as kvlab) may ask for it.
    in_main = threading.current_thread() is threading.main_thread()
    return subprocess.Popen(
        argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
        env=watchdog.marked(env),
        start_new_session=True,  # own process group: stop_process() signals the group
        preexec_fn=(_die_with_parent(os.getpid())
                    if in_main and sys.platform == "linux" else None),
    )


# What a death by signal usually means, for the one-line error.
_SIGNAL_HINTS = {
    signal.SIGILL: "illegal instruction: this {name} was built for CPU features this "
                   "machine does not let it use",
    signal.SIGSEGV: "segmentation fault: the server crashed (a bug, or a damaged model file)",
    signal.SIGKILL: "killed: usually the kernel's OOM killer (out of memory; see `dmesg`), "
                    "or someone ran kill -9",
    signal.SIGABRT: "aborted: the server stopped on a failed check; its log's last lines say "
                    "which",
    signal.SIGBUS: "bus error: a memory-mapped file (the model?) was truncated or vanished",
}


def describe_exit(code: int, name: str = "server") -> str:
    """``Popen.returncode`` in words: "status 1", or the signal's name and usual cause.

    A negative code is a death by that signal (SIGILL is -4); ``name`` is the program.
    """
    if code >= 0:
        return f"status {code}"
    try:
        sig = signal.Signals(-code)
    except ValueError:
        return f"signal {-code}"
    hint = _SIGNAL_HINTS.get(sig)
    return f"{sig.name} ({hint.format(name=name)})" if hint else sig.name


def exit_verb(code: int, name: str = "server") -> str:
    """"exited with status N" or "died of SIGNAME (...)"."""
    described = describe_exit(code, name)
    return f"exited with {described}" if code >= 0 else f"died of {described}"


def exit_description(proc: subprocess.Popen[bytes] | None, name: str,
                     wait_s: float = 0.0) -> str | None:
    """How ``proc`` ended ("died of SIGILL (...)"), or None while it runs (after waiting
    up to ``wait_s`` seconds: a request cut by a crash can beat the kernel's reaping)."""
    if proc is None:
        return None
    if wait_s > 0:
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=wait_s)
    code = proc.poll()
    return None if code is None else exit_verb(code, name)


def wait_ready(base_url: str, proc: subprocess.Popen[bytes], timeout_s: float,
               poll_s: float = 0.05, name: str = "llama-server") -> list[int]:
    """Poll ``/health`` until 200; return the distinct status codes seen, in order.

    503 means "loading model"; a refused connection means "not listening yet". Raises
    ServerLaunchError if the process exits or ``timeout_s`` passes.
    """
    seen: list[int] = []
    deadline = time.monotonic() + timeout_s
    with httpx.Client(timeout=2.0) as client:
        while True:
            code = proc.poll()
            if code is not None:
                raise ServerLaunchError(f"{name} {exit_verb(code, name)} during start-up")
            try:
                status = client.get(f"{base_url}/health").status_code
                if not seen or seen[-1] != status:
                    seen.append(status)
                if status == 200:
                    return seen
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise ServerLaunchError(
                    f"{name} was not ready after {timeout_s:.0f} s "
                    f"(/health statuses seen: {seen or 'none'}); see its log")
            time.sleep(poll_s)


def stop_process(proc: subprocess.Popen[bytes] | None, grace_s: float = STOP_GRACE_S) -> None:
    """SIGTERM the process group, SIGKILL after ``grace_s``; nothing if already gone."""
    if proc is None or proc.poll() is not None:
        return
    _signal_group(proc, signal.SIGTERM)
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        _signal_group(proc, signal.SIGKILL)
        proc.wait(timeout=grace_s)


def _signal_group(proc: subprocess.Popen[bytes], sig: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, sig)  # start_new_session made pid the group id


# ------------------------------------------------- no server outlives kvlab, any exit


class Stoppable(Protocol):
    def stop(self, grace_s: float = STOP_GRACE_S) -> None: ...


_LIVE: set[Any] = set()
_LIVE_LOCK = threading.Lock()
_HANDLERS_INSTALLED = False


def stop_all() -> None:
    """Stop every server this process started and has not stopped yet."""
    with _LIVE_LOCK:
        servers = list(_LIVE)
    for server in servers:
        server.stop(grace_s=5.0)


def _on_terminate(signum: int, _frame: Any) -> None:
    stop_all()
    signal.signal(signum, signal.SIG_DFL)  # then die the way the signal asked
    os.kill(os.getpid(), signum)


def register(server: Stoppable) -> None:
    """Stop ``server`` at exit and on SIGTERM/SIGHUP unless it was stopped before."""
    global _HANDLERS_INSTALLED
    with _LIVE_LOCK:
        _LIVE.add(server)
        if _HANDLERS_INSTALLED:
            return
        _HANDLERS_INSTALLED = True
    atexit.register(stop_all)  # normal exit, sys.exit, and Ctrl-C (KeyboardInterrupt)
    # SIGTERM/SIGHUP kill Python without running atexit; take them over unless the
    # application already has its own handler. SIGKILL is covered by PDEATHSIG.
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGTERM, signal.SIGHUP):
            if signal.getsignal(sig) in (signal.SIG_DFL, None):
                signal.signal(sig, _on_terminate)


def unregister(server: Stoppable) -> None:
    """``server`` was stopped: forget it."""
    with _LIVE_LOCK:
        _LIVE.discard(server)


# ------------------------------------------------------------------ the launched server


class ServerProcess:
    """One server process kvlab owns, on a loopback port (see :class:`kvlab.servers.base.Server`).

    A subclass gives :meth:`argv` and :meth:`facts`, and may override :meth:`prepare`
    (resolve what the command line needs, just before the spawn), :meth:`env`,
    :meth:`headers` (for ``/props``) and :meth:`cleanup` (after the stop). ``port``
    None: a free port is picked when the server starts.
    """

    program = "server"  # its name in messages ("llama-server", "kvlab serve")
    host = "127.0.0.1"
    poll_s = 0.05  # /health polling period while it starts (s)

    def __init__(self, port: int | None = None) -> None:
        self.port = port
        self.log_path: Path | None = None
        self.startup_s: float | None = None  # spawn until /health 200 (s)
        self.started_at: float | None = None  # wall-clock time of the spawn (Unix s)
        self.health_statuses: list[int] = []  # distinct /health codes seen while starting
        self._proc: subprocess.Popen[bytes] | None = None
        self._props: dict[str, Any] | None = None
        self._lock = threading.Lock()
        self._stopped_by_kvlab = False  # stop() ended it (so its SIGTERM is no crash)

    @property
    def base_url(self) -> str:
        """``http://host:port``; "" before a port is chosen."""
        return f"http://{self.host}:{self.port}" if self.port is not None else ""

    @property
    def pid(self) -> int | None:
        """The server's process id (None before start)."""
        return self._proc.pid if self._proc else None

    # -- what a subclass gives ---------------------------------------------------------

    def argv(self) -> list[str]:
        """The exact command line the server is started with."""
        raise NotImplementedError

    def facts(self) -> dict[str, Any]:
        """What the manifest keeps about this server (no secrets)."""
        raise NotImplementedError

    def prepare(self) -> None:
        """Resolve what :meth:`argv` needs (binary, model, key file); runs before spawn."""

    def env(self) -> Mapping[str, str] | None:
        """The child's environment (None: kvlab's own)."""
        return None

    def headers(self) -> dict[str, str]:
        """Headers of kvlab's own requests to the server (``/props``)."""
        return {}

    def cleanup(self) -> None:
        """Remove what :meth:`prepare` made; runs after every stop."""

    # -- lifecycle ---------------------------------------------------------------------

    def start(self, log_path: Path, ready_timeout_s: float = 180.0) -> None:
        """Launch, logging to ``log_path``, then wait for ``/health`` 200;
        ServerLaunchError with the log's tail (the process stopped) otherwise."""
        with self._lock:
            if self.is_alive():
                raise ServerLaunchError(f"this {self.program} was already started; "
                                        "stop it first")
            self._stopped_by_kvlab = False
            self.prepare()
            if self.port is None:
                self.port = free_port(self.host)
            self.log_path = Path(log_path)
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
            started = time.perf_counter()
            self.started_at = time.time()
            with self.log_path.open("wb") as log:  # the child keeps its own descriptor
                self._proc = spawn(self.argv(), log, env=self.env())
            register(self)
        try:
            self.health_statuses = wait_ready(self.base_url, self._proc, ready_timeout_s,
                                              poll_s=self.poll_s, name=self.program)
        except ServerLaunchError as exc:
            self.stop()
            raise ServerLaunchError(f"{exc}\n--- {self.log_path} (last lines) ---\n"
                                    f"{log_tail(self.log_path)}") from None
        except BaseException:
            self.stop()
            raise
        self.startup_s = time.perf_counter() - started
        self.props()  # cached now: the runner asks for facts() after stop()

    def is_alive(self) -> bool:
        """True while the process runs."""
        return self._proc is not None and self._proc.poll() is None

    def exit_description(self, wait_s: float = 0.0) -> str | None:
        """How the process ended on its own ("died of SIGILL (...)"); None while it runs
        (after waiting up to ``wait_s`` seconds for it to end) or when kvlab stopped it."""
        if self._stopped_by_kvlab:
            return None
        return exit_description(self._proc, self.program, wait_s)

    def stop(self, grace_s: float = STOP_GRACE_S) -> None:
        """SIGTERM the process group, SIGKILL after ``grace_s``; safe to call twice."""
        self._stopped_by_kvlab = self._stopped_by_kvlab or self.is_alive()
        stop_process(self._proc, grace_s)
        self.cleanup()
        unregister(self)

    def props(self) -> dict[str, Any] | None:
        """``GET /props`` (cached after the first success); None if unavailable."""
        if self._props is None and self.is_alive():
            try:
                response = httpx.get(f"{self.base_url}/props", headers=self.headers(),
                                     timeout=10.0)
                if response.status_code == 200:
                    self._props = response.json()
            except (httpx.HTTPError, ValueError):
                return None
        return self._props
