"""A worker's clock against the coordinator's: the offset, by ping-pong, with its bound.

Each worker process (perhaps on another machine) reads its own ``perf_counter_ns``.
The coordinator asks it for a reading ``w`` between two readings of its own, ``sent``
and ``received``. Whatever the network did, the worker read its clock at some coordinator
instant in ``[sent, received]``, so

    offset = w - (sent + received) / 2        (worker clock - coordinator clock)
    |true offset - offset| <= (received - sent) / 2

The exchange with the shortest round trip gives the tightest bound (NTP's choice), so a
few exchanges are made and that one kept. A worker's run clock then starts at the
run's start plus the offset: its readings fall on the run's time axis within the bound,
while every duration within a request (TTFT, ITL) stays on the worker's clock alone.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

PING_EXCHANGES = 16  # ping-pong exchanges per measurement; the shortest round trip wins


@dataclass(frozen=True)
class ClockOffset:
    """A worker clock's offset to the coordinator's (ns): ``worker - coordinator``.

    ``error_ns`` bounds how far the true offset can be from ``offset_ns`` (half the
    round trip of the exchange kept, ``rtt_ns``); ``exchanges``: how many were made.
    """

    offset_ns: int
    error_ns: int
    rtt_ns: int
    exchanges: int

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def estimate_offset(exchanges: Sequence[tuple[int, int, int]]) -> ClockOffset:
    """The offset from ``(sent, worker reading, received)`` exchanges (coordinator ns for
    ``sent``/``received``): the one with the shortest round trip, its half round trip as
    the bound. ValueError for no exchange, or one that came back before it left."""
    if not exchanges:
        raise ValueError("no ping-pong exchange to estimate a clock offset from")
    if any(received < sent for sent, _, received in exchanges):
        raise ValueError("an exchange came back before it was sent")
    sent, reading, received = min(exchanges, key=lambda e: e[2] - e[0])
    rtt = received - sent
    # integer midpoint; the bound is rounded up so it still holds
    return ClockOffset(offset_ns=reading - (sent + received) // 2, error_ns=-(-rtt // 2),
                       rtt_ns=rtt, exchanges=len(exchanges))


async def measure_offset(ping: Callable[[], Awaitable[int]],
                         exchanges: int = PING_EXCHANGES) -> ClockOffset:
    """Ping a worker ``exchanges`` times (``ping`` returns its ``perf_counter_ns``) and
    estimate its clock's offset to this process's."""
    seen = []
    for _ in range(exchanges):
        sent = time.perf_counter_ns()
        reading = await ping()
        seen.append((sent, reading, time.perf_counter_ns()))
    return estimate_offset(seen)
