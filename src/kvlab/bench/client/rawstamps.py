"""The kernel's receive stamps for kvlab's own HTTP client (:mod:`kvlab.bench.client.rawhttp`).

A socket with ``SO_TIMESTAMPNS`` gets, with every ``recvmsg``, the wall-clock time its
last segment reached the machine's TCP stack; :data:`WALL` turns that into
``perf_counter_ns`` time, and :func:`keep_kernel_stamps_on` makes sure the kernel is
stamping before the first request.
"""

from __future__ import annotations

import atexit
import socket
import struct
import sys
import time

# SO_TIMESTAMPNS: 35 on x86, arm and most Linux ports (Python does not export it).
SO_TIMESTAMPNS: int | None = getattr(
    socket, "SO_TIMESTAMPNS", 35 if sys.platform == "linux" else None)
# Non-blocking sockets + loop.add_reader + recvmsg: POSIX selector event loops only.
RAW_SUPPORTED = sys.platform != "win32" and hasattr(socket.socket, "recvmsg")
ANC_SIZE = socket.CMSG_SPACE(16)  # recvmsg room for one struct timespec
TIMESPEC = struct.Struct("@qq")  # (seconds, nanoseconds) of the wall clock


class _WallClock:
    """``time_ns() - perf_counter_ns()``, to turn the kernel's wall-clock stamps into
    ``perf_counter_ns`` time.

    Read once per ``REFRESH_NS`` from the narrowest of a few bracketed samples: reading
    the two clocks one after the other lets a thread switch (the GIL) or a preemption
    fall between them, which shifts every stamp late by that pause (up to ms), so a
    stamp could land after the read that carried it and be dropped.
    """

    REFRESH_NS = 500_000_000  # a clock step shows within half a second

    def __init__(self) -> None:
        self._offset = 0
        self._next = 0

    def offset_ns(self, now: int) -> int:
        """The offset (ns) at ``now`` (``perf_counter_ns``)."""
        if now >= self._next:
            best = None
            for _ in range(5):
                before = time.perf_counter_ns()
                wall = time.time_ns()
                width = time.perf_counter_ns() - before
                if best is None or width < best[0]:
                    best = (width, wall - before - width // 2)
            self._offset = best[1]  # type: ignore[index]
            self._next = now + self.REFRESH_NS
        return self._offset


WALL = _WallClock()  # the process's one offset
_keeper: socket.socket | None = None


def keep_kernel_stamps_on(timeout_s: float = 0.2) -> bool:
    """Turn the kernel's receive stamps on for good in this process; True once they are.

    Linux stamps received packets only while some socket asks for it, and turns stamping
    on lazily (a deferred work item) when the first one does: the first segments of a
    fresh connection, after every stamped socket had closed, came without a stamp
    (missing on about half of such connections here). One idle socket that keeps asking
    holds stamping on; a loopback probe waits (at most ``timeout_s``) until it is on.
    """
    global _keeper
    if SO_TIMESTAMPNS is None or not RAW_SUPPORTED:
        return False
    if _keeper is not None:
        return True
    try:
        keeper = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        keeper.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    except OSError:
        return False
    _keeper = keeper
    atexit.register(keeper.close)  # held for good, closed at exit (no ResourceWarning)
    deadline = time.monotonic() + timeout_s
    try:
        with socket.create_server(("127.0.0.1", 0)) as listener:
            while time.monotonic() < deadline:
                with socket.socket() as probe:
                    probe.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
                    probe.connect(listener.getsockname())
                    peer, _ = listener.accept()
                    with peer:
                        peer.sendall(b"x")
                        _data, anc, _f, _a = probe.recvmsg(1, ANC_SIZE)
                if anc:
                    return True
                time.sleep(0.002)
    except OSError:
        pass
    return False
