"""When the requests of an open-loop load point arrive: offsets from the point's start.

Three arrival processes at a mean rate ``R`` (requests/s), each seeded so a point is
reproducible:

- ``constant``: ``1/R`` apart.
- ``poisson``: exponential gaps of mean ``1/R`` (independent arrivals).
- ``gamma``: gamma gaps of mean ``1/R`` and shape ``k``, the *burstiness* (vLLM's
  ``--burstiness``): ``k = 1`` is Poisson; ``k < 1`` clusters arrivals into bursts
  separated by lulls (the gaps' coefficient of variation is ``1/√k``); ``k > 1`` spaces
  them more evenly, towards ``constant`` as ``k`` grows.

**Ramp-up** (``ramp_up_s = T``): the rate rises linearly from 0 to ``R`` over the first
``T`` seconds, then stays at ``R``. The arrivals are those of the same process at rate
1 (in units of "expected arrivals so far", ``s``), moved onto the clock by the inverse
of the expected count ``Λ(t) = R·t²/(2T)`` for ``t < T`` and ``R·T/2 + R·(t − T)``
after: ``t = √(2·s·T/R)`` during the ramp, ``T + (s − R·T/2)/R`` after it.

A **trace** (``trace_offsets_ns``) gives its own times: arrival ``i`` leaves at
``(time_i − time_0) / speed``, so ``speed = 2`` replays it twice as fast.

The first arrival is always at 0.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterator, Sequence
from typing import Literal

Arrival = Literal["poisson", "constant", "gamma"]
ARRIVALS: tuple[Arrival, ...] = ("poisson", "constant", "gamma")

_NS_PER_S = 1_000_000_000


def unit_arrivals(arrival: Arrival, burstiness: float, rng: random.Random) -> Iterator[float]:
    """Arrival times of the process at rate 1 (mean gap 1), starting at 0."""
    s = 0.0
    i = 0
    while True:
        yield float(i) if arrival == "constant" else s
        i += 1
        if arrival == "poisson":
            s += rng.expovariate(1.0)
        elif arrival == "gamma":
            s += rng.gammavariate(burstiness, 1.0 / burstiness)


def ramp_time_s(s: float, rate: float, ramp_up_s: float) -> float:
    """Seconds at which ``s`` arrivals are expected when the rate rises linearly from 0
    to ``rate`` (requests/s) over ``ramp_up_s`` seconds, then stays there."""
    during = rate * ramp_up_s / 2.0  # arrivals expected over the ramp
    if s <= during:
        return math.sqrt(2.0 * s * ramp_up_s / rate)
    return ramp_up_s + (s - during) / rate


def rate_offsets_ns(rate: float, n: int | None, duration_s: float | None = None, *,
                    arrival: Arrival = "poisson", burstiness: float = 1.0, seed: int = 42,
                    ramp_up_s: float | None = None) -> list[int]:
    """Send deadlines (ns from the point's start) of ``n`` arrivals at ``rate``
    requests/s, or of those before ``duration_s`` seconds when ``n`` is None."""
    if rate <= 0:
        raise ValueError(f"an arrival rate must be positive, got {rate}")
    if arrival == "gamma" and burstiness <= 0:
        raise ValueError(f"burstiness must be positive, got {burstiness}")
    rng = random.Random(seed)
    limit_ns = None if n is not None else int((duration_s or 0.0) * _NS_PER_S)
    offsets: list[int] = []
    times_ns: Iterator[float]
    if ramp_up_s:
        times_ns = (ramp_time_s(s, rate, ramp_up_s) * _NS_PER_S
                    for s in unit_arrivals(arrival, burstiness, rng))
    else:
        times_ns = _steady_ns(rate, arrival, burstiness, rng)
    for t in times_ns:
        at = round(t)
        if (n is not None and len(offsets) >= n) or (limit_ns is not None and at >= limit_ns):
            return offsets
        offsets.append(at)
    return offsets  # pragma: no cover - the generators never end


def _steady_ns(rate: float, arrival: Arrival, burstiness: float,
               rng: random.Random) -> Iterator[float]:
    """Arrival times (ns) at a steady ``rate``; ``constant`` as ``i / rate`` exactly, so
    no rounding drifts over a long point."""
    t = 0.0  # seconds: a running sum of gaps
    i = 0
    while True:
        yield i * _NS_PER_S / rate if arrival == "constant" else t * _NS_PER_S
        i += 1
        if arrival == "poisson":
            t += rng.expovariate(rate)
        elif arrival == "gamma":
            t += rng.gammavariate(burstiness, 1.0 / (burstiness * rate))


def trace_offsets_ns(times_ms: Sequence[float], speed: float = 1.0) -> list[int]:
    """Send deadlines (ns from the point's start) replaying a trace's arrival times
    (ms, in time order) ``speed`` times as fast."""
    if speed <= 0:
        raise ValueError(f"a replay speed must be positive, got {speed}")
    if not times_ms:
        return []
    first = times_ms[0]
    return [round((t - first) * 1e6 / speed) for t in times_ms]
