"""Where a decode step's time goes, phase by phase, checked against torch.profiler.

:func:`profile_steps` runs the serving scheduler itself (:class:`kvlab.engine.scheduler
.Scheduler`, the one ``kvlab serve --slots`` steps) on B sequences of ``context``
random tokens, once they all decode, and reads its step clock
(:mod:`kvlab.engine.phases`): the median time per step of each phase, at each batch
size, beside the memory floor (bytes of weights a step reads / the copy bandwidth).
Given a bandwidth probe, it measures the copy bandwidth again right after each timed
step, so that each step meets a floor of the same seconds: on a shared host the
bandwidth a process gets moves by a quarter within a minute, and a floor measured once
before the steps compares two different machines.

:func:`trace_step` runs one more step with each phase also opened as a
``torch.profiler.record_function`` range, under ``torch.profiler``: per phase, the
clock's time, the profiler's time of the same range, and the time of the torch
operators inside it (the rest of the range is Python between operators). The two
clocks must agree within :data:`AGREEMENT` (relative) or :data:`AGREEMENT_MS`
(absolute), whichever is larger, plus :data:`ENTRY_MS` per range of the phase (a switch
between ranges costs the profiler a few microseconds that only one side counts). A
benchmark, never a test of speed.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from kvlab.engine.generate import Sampler, make_sampler
from kvlab.engine.lm import LanguageModel
from kvlab.engine.paged import BlockPool
from kvlab.engine.phases import STEP, StepClock
from kvlab.engine.scheduler import Request, Scheduler

AGREEMENT = 0.05  # the profiler's range and the clock's phase, relative
AGREEMENT_MS = 0.25  # ... or absolute, whichever is larger,
ENTRY_MS = 0.02  # ... plus this per range of the phase in the step (a switch's cost)
PREFIX = "phase:"  # the profiler's name of a phase's range


@dataclass(frozen=True)
class StepProfile:
    """The median step at one batch size and its phases (ms per step)."""

    batch: int
    step_ms: float
    phases_ms: dict[str, float]
    # each timed step over the floor measured right after it (weight bytes / the copy
    # bandwidth then): their median, and the bandwidths (bytes/s); empty without a probe
    paired_ratio: float | None = None
    bandwidths: tuple[float, ...] = ()
    each_ms: tuple[float, ...] = ()  # every timed step, in order

    def to_dict(self) -> dict[str, Any]:
        return {"batch": self.batch, "step_ms": self.step_ms, "phases_ms": self.phases_ms,
                "paired_floor_ratio": self.paired_ratio,
                "paired_copy_gb_per_s": [b / 1e9 for b in self.bandwidths],
                "each_step_ms": list(self.each_ms)}


@dataclass(frozen=True)
class TracedPhase:
    """One phase of a traced step: the clock's ms, the profiler range's ms, and the ms
    of the operators inside the range."""

    name: str
    clock_ms: float
    profiler_ms: float
    ops_ms: float
    entries: int = 1  # ranges of the phase in the step

    @property
    def bound_ms(self) -> float:
        """How far apart the two may be: :data:`AGREEMENT` of the larger or
        :data:`AGREEMENT_MS`, whichever is larger, plus :data:`ENTRY_MS` per range."""
        return max(AGREEMENT * max(self.clock_ms, self.profiler_ms), AGREEMENT_MS) \
            + ENTRY_MS * self.entries

    @property
    def agrees(self) -> bool:
        """Within :attr:`bound_ms` of each other."""
        return abs(self.clock_ms - self.profiler_ms) <= self.bound_ms

    def to_dict(self) -> dict[str, Any]:
        return {"phase": self.name, "clock_ms": self.clock_ms,
                "profiler_ms": self.profiler_ms, "ops_ms": self.ops_ms,
                "entries": self.entries, "bound_ms": self.bound_ms, "agrees": self.agrees}


@dataclass
class Trace:
    """One step under torch.profiler, phase by phase (``step``: the whole step)."""

    batch: int
    phases: list[TracedPhase] = field(default_factory=list)

    @property
    def agrees(self) -> bool:
        return all(p.agrees for p in self.phases)

    def to_dict(self) -> dict[str, Any]:
        return {"batch": self.batch, "agrees": self.agrees,
                "agreement": {"relative": AGREEMENT, "absolute_ms": AGREEMENT_MS,
                              "per_range_ms": ENTRY_MS},
                "phases": [p.to_dict() for p in self.phases]}


class TracedClock(StepClock):
    """A step clock whose phases are also ``record_function`` ranges of the profiler.
    At each switch the clock reads its time between closing one range and opening the
    next, so the two clocks differ only by the parts of those two calls outside the
    profiler's own stamps; ``entries`` counts each phase's ranges in the step."""

    def __init__(self) -> None:
        super().__init__()
        self._range: Any = None
        self.entries: dict[str, int] = {}

    def begin(self, first: str, continued: bool = False) -> None:
        self.entries = {}
        self._open(first)  # the range first: its one-off setup stays out of both clocks
        super().begin(first, continued)

    def phase(self, name: str) -> str:
        if self._range is not None:
            self._range.__exit__(None, None, None)
            self._range = None
        previous = super().phase(name)
        if name:
            self._open(name)
        return previous

    def _open(self, name: str) -> None:
        self.entries[name] = self.entries.get(name, 0) + 1
        self._range = torch.profiler.record_function(PREFIX + name)
        self._range.__enter__()


def decoding(model: LanguageModel, batch: int, context: int, seed: int = 0,
             sampler: Sampler | None = None) -> Scheduler:
    """A scheduler whose ``batch`` sequences of ``context`` random tokens all decode
    (their prompts computed), with room for many more steps; greedy unless
    ``sampler`` is given (one for every sequence)."""
    config = model.config
    bs = 16
    room = min(512, config.max_len - context)  # new tokens each sequence may take
    per_seq = -(-(context + room) // bs) + 1
    pool = BlockPool(config, n_blocks=batch * per_seq, block_size=bs)
    scheduler = Scheduler(model, pool, max_running=batch, token_budget=context)
    gen = torch.Generator().manual_seed(seed)
    for _ in range(batch):
        prompt = torch.randint(0, config.vocab_size, (context,), generator=gen).tolist()
        scheduler.submit(Request(prompt, room, sampler or make_sampler(0.0, None),
                                 cache_prompt=False))
    while any(len(r.token_ids) - r.cached > 1 for r in scheduler.running) \
            or scheduler.waiting:
        scheduler.step()
    return scheduler


def profile_steps(model: LanguageModel, batch_sizes: list[int], context: int = 64,
                  steps: int = 5, bandwidth: Callable[[], float] | None = None,
                  weight_bytes: int = 0) -> list[StepProfile]:
    """The median step and median phases (ms) over ``steps`` decode steps at each batch
    size, after one step of warm-up. With a ``bandwidth`` probe (bytes/s) and the
    ``weight_bytes`` a step reads, each timed step is followed by a probe, and the
    median of step / (weight_bytes / probe) is kept as the paired floor ratio."""
    out = []
    with torch.inference_mode():
        for b in batch_sizes:
            scheduler = decoding(model, b, context)
            scheduler.step()  # warm-up
            runs: list[dict[str, int]] = []
            probes: list[float] = []
            for _ in range(steps):
                scheduler.step()
                runs.append(dict(scheduler.clock.last))
                if bandwidth is not None:
                    probes.append(bandwidth())
                    runs[-1].pop("between", None)  # the time since the last step: a probe
            names = list(dict.fromkeys(n for r in runs for n in r))
            totals = [sum(v for k, v in r.items() if k != "between") for r in runs]
            phases = {n: statistics.median(r.get(n, 0) for r in runs) / 1e6 for n in names}
            ratio = statistics.median(t / 1e9 / (weight_bytes / bw)
                                      for t, bw in zip(totals, probes, strict=True)) \
                if probes and weight_bytes > 0 else None
            out.append(StepProfile(b, statistics.median(totals) / 1e6, phases, ratio,
                                   tuple(probes), tuple(t / 1e6 for t in totals)))
    return out


def trace_step(model: LanguageModel, batch: int, context: int = 64, steps: int = 3
               ) -> Trace:
    """Decode steps of ``batch`` rows, each under torch.profiler, the clock beside it:
    per phase, the median over ``steps`` of each side (a step the OS preempted between
    the two clocks' readings stays out of the median)."""
    clocks: list[dict[str, float]] = []
    entries: dict[str, int] = {}
    ranges: list[dict[str, float]] = []
    ops: list[dict[str, float]] = []
    with torch.inference_mode():
        scheduler = decoding(model, batch, context)
        scheduler.step()  # warm-up
        for _ in range(steps):
            clock = TracedClock()
            scheduler.clock = clock
            with torch.profiler.profile(
                    activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
                scheduler.step()
            clocks.append({k: v / 1e6 for k, v in clock.last.items()})
            entries = clock.entries
            ranges.append({})
            ops.append({})
            for event in prof.events():
                if not event.name.startswith(PREFIX):
                    continue
                name = event.name[len(PREFIX):]
                ranges[-1][name] = ranges[-1].get(name, 0.0) + event.cpu_time_total / 1e3
                ops[-1][name] = ops[-1].get(name, 0.0) + sum(
                    c.cpu_time_total for c in event.cpu_children) / 1e3
    for side in (clocks, ranges, ops):  # the whole step, on each side
        for one in side:
            one[STEP] = sum(v for k, v in one.items() if k != "between")
    entries[STEP] = sum(entries.values())
    trace = Trace(batch)
    for name in clocks[0]:
        if all(name in r for r in ranges):
            trace.phases.append(TracedPhase(
                name, statistics.median(c[name] for c in clocks),
                statistics.median(r[name] for r in ranges),
                statistics.median(o.get(name, 0.0) for o in ops), entries.get(name, 1)))
    return trace
