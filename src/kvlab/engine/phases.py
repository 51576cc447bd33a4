"""Where a step's time goes: a lap clock over the phases of one scheduler step.

A step of the scheduler runs, in order: scheduling (which sequences compute which
tokens, blocks taken), building the flattened batch (ids, the cells each row reads),
the forward (embeddings, the layers in groups, the gather of each decode row's keys and
values out of the paged pool inside them), the output head, sampling, and streaming
each sampled token (detokenizing it and handing it to the event loop). The clock
measures them with ``time.perf_counter_ns`` (tens of nanoseconds a reading, nothing
else): :meth:`StepClock.phase` closes the phase that was running and opens the next,
so the phases of a step never overlap and their sum is the step's wall time. A phase
may be entered many times in one step (the gather once per layer); its time in that
step is the sum.

:class:`Histograms` keeps, per phase, a Prometheus histogram of the per-step time
(``/metrics`` renders it as ``kvlab:step_phase_seconds``). ``between`` is the time from
the end of a step to the start of the next when work was left (the worker's own
overhead between steps: admitting requests, waiting for the GIL); a step that starts
after the server sat idle records none. Readable from any thread (:meth:`StepClock.snapshot`).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

# Upper bounds (seconds) of the histogram buckets, +Inf implied: from 50 µs to 5 s.
BUCKETS: tuple[float, ...] = (
    5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 1e-2, 2e-2, 3e-2, 4e-2, 5e-2, 6e-2,
    8e-2, 0.1, 0.125, 0.15, 0.2, 0.3, 0.5, 1.0, 2.5, 5.0)

STEP = "step"  # the histogram of whole steps (the sum of the phases)
BETWEEN = "between"


@dataclass
class Histogram:
    """Cumulative-ready bucket counts (per bucket, not cumulative), sum and count."""

    counts: list[int] = field(default_factory=lambda: [0] * (len(BUCKETS) + 1))
    sum: float = 0.0  # seconds
    count: int = 0

    def observe(self, seconds: float) -> None:
        """Add one observation (seconds)."""
        i = 0
        while i < len(BUCKETS) and seconds > BUCKETS[i]:
            i += 1
        self.counts[i] += 1
        self.sum += seconds
        self.count += 1

    def copy(self) -> Histogram:
        return Histogram(list(self.counts), self.sum, self.count)

    def cumulative(self) -> list[tuple[str, int]]:
        """(le, cumulative count) pairs as Prometheus writes them, +Inf last."""
        out, total = [], 0
        for bound, n in zip([*map(_le, BUCKETS), "+Inf"], self.counts, strict=True):
            total += n
            out.append((bound, total))
        return out

    @property
    def mean(self) -> float:
        """Mean observation (seconds), 0 when empty."""
        return self.sum / self.count if self.count else 0.0


def _le(bound: float) -> str:
    return f"{bound:g}"


class Histograms:
    """Named histograms behind one lock: written by one thread, read by any."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._hist: dict[str, Histogram] = {}

    def observe(self, name: str, seconds: float) -> None:
        """Add ``seconds`` to the histogram ``name`` (made on first use)."""
        with self._lock:
            self._hist.setdefault(name, Histogram()).observe(seconds)

    def observe_many(self, values: dict[str, float]) -> None:
        """Add each (name, seconds) of ``values`` under one lock."""
        with self._lock:
            for name, seconds in values.items():
                self._hist.setdefault(name, Histogram()).observe(seconds)

    def snapshot(self) -> dict[str, Histogram]:
        """A copy of every histogram, by name."""
        with self._lock:
            return {name: h.copy() for name, h in self._hist.items()}


class StepClock:
    """The phases of the step in progress, and histograms of every step so far.

    One thread drives it (the scheduler's): :meth:`begin`, :meth:`phase` as often as
    needed, :meth:`end`. ``last`` holds the phases (ns) of the last finished step.
    """

    def __init__(self) -> None:
        self.histograms = Histograms()
        self.rows = 0  # decode rows sampled over all steps (rows per step: / steps)
        self.last: dict[str, int] = {}
        self._current = ""
        self._t = 0
        self._times: dict[str, int] = {}
        self._ended = 0

    def begin(self, first: str, continued: bool = False) -> None:
        """Start a step in phase ``first``; ``continued``: the previous step left work,
        so the gap since it ended is the worker's overhead (``between``)."""
        now = time.perf_counter_ns()
        self._times = {}
        if continued and self._ended:
            self._times[BETWEEN] = now - self._ended
        self._current, self._t = first, now

    def phase(self, name: str) -> str:
        """Close the running phase (its time added to the step's) and open ``name``;
        the phase that was running."""
        now = time.perf_counter_ns()
        previous = self._current
        self._times[previous] = self._times.get(previous, 0) + now - self._t
        self._current, self._t = name, now
        return previous

    def end(self, rows: int) -> dict[str, int]:
        """Close the step that sampled ``rows`` tokens; record its phases (ns)."""
        self.phase("")
        self._times.pop("", None)
        self._ended = self._t
        between = self._times.get(BETWEEN, 0)
        total = sum(self._times.values()) - between
        self.last = dict(self._times)
        self.rows += rows
        seconds = {name: ns / 1e9 for name, ns in self._times.items()}
        seconds[STEP] = total / 1e9
        self.histograms.observe_many(seconds)
        return self.last

    def snapshot(self) -> dict[str, Histogram]:
        """Every phase's histogram (``step``: whole steps), a copy."""
        return self.histograms.snapshot()


class NoClock:
    """A clock that measures nothing, for a forward run without a step clock."""

    def phase(self, name: str) -> str:
        return ""


NO_CLOCK = NoClock()


def layer_group(layer: int, n_layers: int, groups: int = 3) -> str:
    """The phase name of ``layer``'s group: the layers cut into ``groups`` equal runs
    ("layers 0-5", "layers 6-11", "layers 12-17" for Gemma 3 270M's 18)."""
    size = -(-n_layers // groups)
    low = layer // size * size
    return f"layers {low}-{min(low + size, n_layers) - 1}"
