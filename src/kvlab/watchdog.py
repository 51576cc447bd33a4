"""No process kvlab starts outlives it, however kvlab ends (``kill -9`` included).

:func:`ensure`, called before kvlab starts anything, starts one watchdog: this file
run as a script (standard library only), in a session of its own so that a terminal's
Ctrl-C or a kill of kvlab's process group misses it. It holds the read end of a pipe
whose write end only kvlab holds; however kvlab ends, the kernel closes that end. Until
then the watchdog notes kvlab's descendants every :data:`POLL_S` (pid and start time,
from ``/proc``); at end-of-file it sends SIGTERM to every noted process still running,
every process whose environment holds kvlab's marker, and all their descendants, then
SIGKILL to those left after :data:`GRACE_S`, and exits.

Two ways to know a process, because each misses some: the tree loses a process the
moment its parent dies (vLLM's EngineCore is re-parented to init as soon as its API
server does), so it is noted while kvlab lives; the marker, ``KVLAB_OWNER_<token>``
in kvlab's environment and so in every process started after :func:`ensure`, finds
one started and re-parented between two polls, but not one that rewrote its
``/proc/PID/environ`` (``setproctitle``: vLLM's ``VLLM::EngineCore``, Ray's workers).

Linux only (``/proc``); elsewhere :func:`ensure` does nothing. No root, no cgroup.
docs/concepts/process-cleanup.md says why this design.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import select
import signal
import sys
import threading
import time
from collections.abc import Mapping
from pathlib import Path

PREFIX = "KVLAB_OWNER_"  # + 16 hex digits: the variable's name; its value is kvlab's pid
GRACE_S = 5.0  # SIGTERM, then SIGKILL after this long (s)
POLL_S = 0.5  # how often the watchdog notes kvlab's descendants (s)

_lock = threading.Lock()
_marker: str | None = None  # this process's variable, once its watchdog runs
_owner = 0  # the pid that started it (a forked child starts its own)
_write_end: int | None = None  # kvlab's end of the pipe: never closed, the kernel does


def ensure() -> str | None:
    """Start this process's watchdog (once) and mark the environment; returns the
    marker's name (None where there is no ``/proc``)."""
    global _marker, _owner, _write_end
    if not sys.platform.startswith("linux"):
        return None
    with _lock:
        if _marker is not None and _owner == os.getpid():
            return _marker
        marker = PREFIX + secrets.token_hex(8)
        read_end, write_end = os.pipe()  # both close-on-exec: no other child holds them
        try:
            # the read end becomes the watchdog's stdin; setsid: a session of its own
            os.posix_spawn(sys.executable, [
                sys.executable, "-I", "-S", os.path.abspath(__file__), str(os.getpid()),
                marker, str(GRACE_S)], os.environ, setsid=True, file_actions=[
                    (os.POSIX_SPAWN_DUP2, read_end, 0),
                    (os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0),
                    (os.POSIX_SPAWN_OPEN, 2, os.devnull, os.O_WRONLY, 0)])
        except OSError:
            os.close(write_end)
            return None
        finally:
            os.close(read_end)
        os.environ[marker] = str(os.getpid())
        _marker, _owner, _write_end = marker, os.getpid(), write_end
        return marker


def marked(env: Mapping[str, str] | None) -> dict[str, str] | None:
    """``env`` for a child kvlab starts, with the marker (None: inherit kvlab's own
    environment, which :func:`ensure` has marked)."""
    marker = ensure()
    if env is None or marker is None:
        return None if env is None else dict(env)
    return {**env, marker: os.environ[marker]}


def _forget_in_child() -> None:
    """A forked copy of kvlab must not hold the pipe open (the watchdog would wait for
    it too); it starts its own watchdog if it launches anything."""
    global _marker, _write_end
    if _write_end is not None:
        os.close(_write_end)
    _marker, _write_end = None, None


os.register_at_fork(after_in_child=_forget_in_child)


# ------------------------------------------------------------- processes, from /proc


def start_ticks(pid: int) -> int | None:
    """When process ``pid`` started (clock ticks since boot, /proc/PID/stat field 22);
    None when it does not run (gone, or a zombie waiting to be reaped)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return None if fields[0] == "Z" else int(fields[19])


def descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (children first), from /proc; [] elsewhere."""
    found: list[int] = []
    frontier = [pid]
    while frontier:
        parent = frontier.pop()
        for task in Path(f"/proc/{parent}/task").glob("*/children"):
            with contextlib.suppress(OSError):
                for child in task.read_text().split():
                    found.append(int(child))
                    frontier.append(int(child))
    return found


def holds(pid: int, marker: str) -> bool:
    """True when process ``pid``'s environment holds ``marker`` (False once it is gone,
    a zombie, another user's, or its environment was overwritten)."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as environ:
            return b"\0" + marker.encode() + b"=" in b"\0" + environ.read()
    except OSError:
        return False


def holders(marker: str) -> list[int]:
    """The processes whose environment holds ``marker`` (this one excluded)."""
    return [int(entry) for entry in os.listdir("/proc")
            if entry.isdigit() and int(entry) != os.getpid() and holds(int(entry), marker)]


# ------------------------------------------------------------------ the watchdog itself


def note(owner: int, seen: dict[int, int]) -> None:
    """Add ``owner``'s descendants now to ``seen`` (pid -> start ticks); forget those
    that ended."""
    for pid in descendants(owner):
        if pid != os.getpid() and pid not in seen and (ticks := start_ticks(pid)) is not None:
            seen[pid] = ticks
    for pid, ticks in list(seen.items()):
        if start_ticks(pid) != ticks:
            del seen[pid]


def targets(marker: str, seen: Mapping[int, int]) -> dict[int, int]:
    """What to end (pid -> start ticks): the noted processes still running, the marker's
    holders, and every descendant of either."""
    found = {pid: ticks for pid, ticks in seen.items() if start_ticks(pid) == ticks}
    for pid in holders(marker):
        if (ticks := start_ticks(pid)) is not None:
            found.setdefault(pid, ticks)
    for pid in list(found):
        for child in descendants(pid):
            if (ticks := start_ticks(child)) is not None:
                found.setdefault(child, ticks)
    found.pop(os.getpid(), None)
    return found


def _signal(pid: int, ticks: int, sig: int) -> None:
    """Send ``sig`` to ``pid`` if it is still the process that started at ``ticks``;
    through a pidfd the check and the signal reach the same process, even if the pid
    is reused meanwhile."""
    try:
        pidfd: int | None = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    except OSError:  # no pidfds (Linux before 5.3): check, then a plain kill
        pidfd = None
    try:
        if start_ticks(pid) == ticks:
            if pidfd is None:
                os.kill(pid, sig)
            else:
                signal.pidfd_send_signal(pidfd, sig)
    except (ProcessLookupError, PermissionError):
        pass
    finally:
        if pidfd is not None:
            os.close(pidfd)


def reap(marker: str, seen: Mapping[int, int] | None = None, grace_s: float = GRACE_S
         ) -> None:
    """SIGTERM every target (see :func:`targets`); SIGKILL those left after ``grace_s``,
    until none is left (one may start another meanwhile)."""
    seen = dict(seen or {})
    for pid, ticks in targets(marker, seen).items():
        _signal(pid, ticks, signal.SIGTERM)
        seen.setdefault(pid, ticks)  # its children are found while it lives
    deadline = time.monotonic() + grace_s
    while (left := targets(marker, seen)) and time.monotonic() < deadline:
        seen.update(left)
        time.sleep(0.1)
    for _ in range(100):
        left = targets(marker, seen)
        if not left:
            return
        seen.update(left)
        for pid, ticks in left.items():
            _signal(pid, ticks, signal.SIGKILL)
        time.sleep(0.05)


def watch(owner: int, marker: str, grace_s: float) -> None:
    """Note ``owner``'s descendants until its end of the pipe (our stdin) closes, then
    :func:`reap`."""
    for sig in (signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    seen: dict[int, int] = {}
    while True:
        readable, _, _ = select.select([0], [], [], POLL_S)
        if readable and not os.read(0, 4096):
            break  # end-of-file: kvlab is gone (nobody ever writes)
        note(owner, seen)
    reap(marker, seen, grace_s)


if __name__ == "__main__":
    watch(int(sys.argv[1]), sys.argv[2], float(sys.argv[3]))
