"""A server process kvlab starts: spawn, wait for ``/health``, stop, never orphan.

Shared by every managed server (llama-server, the embedded ``kvlab serve``). Each
child runs in its own process group (a terminal Ctrl-C reaches kvlab only; stopping
signals the whole group), is registered so ``atexit`` and SIGTERM/SIGHUP stop it, and
on Linux asks the kernel to SIGKILL it if kvlab itself dies, even by SIGKILL.
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
    """Start ``argv`` in its own process group, stdout and stderr to ``log``."""
    # PDEATHSIG fires when the *thread* that forked exits, so only the main thread
    # (which lives as long as kvlab) may ask for it.
    in_main = threading.current_thread() is threading.main_thread()
    return subprocess.Popen(
        argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
        env=dict(env) if env is not None else None,
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
