"""The concurrency knee, predicted and measured: where each server must queue or preempt.

Per (mode, capacity) measured by a closed-loop sweep (``c=N`` points) against a server
whose KV budget the run recorded (:class:`kvlab.memory.served.ServedKv`, kept in the
manifest by the server kind that launched it):

- **predicted**: :mod:`kvlab.memory.knee` for the workload the server counted (the
  longest prompt and output of the valid rows, tokens as the server reported them),
  under the budget the server reported on ``/metrics`` (vLLM's ``num_gpu_blocks`` and
  block size, kvlab serve's ``kv_blocks_total``; llama-server's ``-c`` and ``-np``):
  ``fits`` sequences at most, ``first_past`` the first that must wait or preempt.
- **measured**, per point, from the server's ``/metrics`` readings of that point
  (gauges.jsonl: every 0.25 s, those taken between its first send and its last
  answer) and its counters' deltas: the most
  requests running, waiting and held back for KV (vLLM's waiting "by reason" capacity),
  the pool's highest use, the preemptions. A point is **past the knee** when the server
  preempted, held a request back for KV, or never ran as many requests at once as the
  client had in flight (running max below the records' in-flight max: requests must
  last a few polls for the gauge to see them all). The plain
  waiting gauge is shown, not judged: kvlab serve's rises below the knee whenever a
  burst exceeds its prefill budget.
- **the verdict**: one step of the sweep is one point of its N values in order (5 to 6
  is one step, 8 to 12 too). The expected point is the sweep's first N at or above
  ``first_past``; the measured one is the first N past the knee (none: beyond the
  sweep). Within one step when they are at most one point apart; else a miss, stated
  with both numbers. When the knee is predicted beyond the sweep and no point went
  past it, the verdict is "agrees: none in the sweep": the two agree, but no knee was
  seen, so it is not a confirmed knee. Not judged when the budget, a point's readings
  or its rows are missing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from kvlab.analysis.load import LoadSummary
from kvlab.analysis.server_counters import PointCounters, exposition, names_of
from kvlab.analysis.summaries import Summary
from kvlab.analysis.summary_metrics import ITL, TTFT
from kvlab.analysis.valid_rows import ValidRows
from kvlab.errors import KvlabError
from kvlab.labels import read_label
from kvlab.memory.knee import Knee, Workload
from kvlab.memory.served import ServedKv
from kvlab.metric_names import MetricNames
from kvlab.rundir import GaugeSample, Record

Verdict = Literal["within one step", "agrees: none in the sweep", "miss", "not judged"]
NONE_IN_SWEEP: Verdict = "agrees: none in the sweep"
CellKey = tuple[str, int]  # (mode, capacity)


def gauge(samples: Mapping[str, float], name: str, label: str | None = None) -> float | None:
    """The sum over label sets of the metric ``name`` (with ``label``, e.g.
    ``reason="capacity"``, only the sets carrying it); None when absent."""
    values = [v for k, v in samples.items() if k.split("{")[0] == name
              and (label is None or label in k)]
    return sum(values) if values else None


def _max(readings: Sequence[GaugeSample], name: str | None, label: str | None = None
         ) -> float | None:
    if name is None:
        return None
    values = [v for r in readings if (v := gauge(r.samples, name, label)) is not None]
    return max(values) if values else None


@dataclass(frozen=True)
class KneePoint:
    """One ``c=N`` point: what the server's /metrics showed (None: not reported) and the
    client's latencies (ms, over the valid rows; None: none)."""

    load: str
    users: int
    in_flight: int  # the most requests the client had in flight (records)
    readings: int  # /metrics readings while the point ran (its start and end left out)
    running_max: float | None
    waiting_max: float | None
    kv_waiting_max: float | None
    kv_usage_max: float | None
    preemptions: float | None  # Δ over the point
    ttft_p50_ms: float | None
    ttft_p95_ms: float | None
    itl_p50_ms: float | None
    itl_p95_ms: float | None
    valid: str  # "n valid of m"

    @property
    def reasons(self) -> list[str]:
        """Why the point is past the knee ([] when it is not, or cannot say)."""
        out = []
        if self.preemptions:
            out.append(f"{self.preemptions:g} preempted")
        if self.kv_waiting_max:
            out.append(f"{self.kv_waiting_max:g} held back for KV")
        if self.running_max is not None and self.running_max < self.in_flight:
            out.append(f"ran at most {self.running_max:g} of {self.in_flight} in flight")
        return out

    @property
    def past(self) -> bool | None:
        """True: queued or preempted; False: every request ran at once; None: no
        reading of the running gauge while the point ran (requests shorter than the
        0.25 s polling, or no /metrics)."""
        if self.reasons:
            return True
        return None if self.running_max is None else False

    def to_dict(self) -> dict[str, Any]:
        return {"load": self.load, "users": self.users, "in_flight": self.in_flight,
                "readings": self.readings, "running_max": self.running_max,
                "waiting_max": self.waiting_max, "kv_waiting_max": self.kv_waiting_max,
                "kv_usage_max": self.kv_usage_max, "preemptions": self.preemptions,
                "ttft_p50_ms": self.ttft_p50_ms, "ttft_p95_ms": self.ttft_p95_ms,
                "itl_p50_ms": self.itl_p50_ms, "itl_p95_ms": self.itl_p95_ms,
                "valid": self.valid, "past": self.past, "reasons": self.reasons}


@dataclass(frozen=True)
class KneeCheck:
    """One (mode, capacity): the predicted knee (None: ``why``), the sweep's points and
    the verdict. ``prompt_tokens`` / ``output_tokens``: (least, most) over the valid
    rows; the prediction takes the most. ``budget``: where the budget was read."""

    mode: str
    capacity: int
    server: str
    prompt_tokens: tuple[int, int] | None
    output_tokens: tuple[int, int] | None
    budget: str
    knee: Knee | None
    points: tuple[KneePoint, ...]
    why: str = ""

    @property
    def sweep(self) -> list[int]:
        return [p.users for p in self.points]

    @property
    def measured_first_past(self) -> int | None:
        """The first N past the knee (None: none in the sweep)."""
        return next((p.users for p in self.points if p.past), None)

    @property
    def measured_knee(self) -> int | None:
        """The largest N of the sweep below the first past the knee (None: none)."""
        first = self.measured_first_past
        below = [n for n in self.sweep if first is None or n < first]
        return below[-1] if below else None

    @property
    def expected_first_past(self) -> int | None:
        """The sweep's first N at or above the predicted ``first_past`` (None: beyond)."""
        if self.knee is None:
            return None
        return next((n for n in self.sweep if n >= self.knee.first_past), None)

    @property
    def steps(self) -> int | None:
        """Points of the sweep between the expected and the measured first N past the
        knee ("beyond the sweep" counts as one point past its end)."""
        if self.verdict_reason:
            return None
        index = {n: i for i, n in enumerate(self.sweep)}
        end = len(self.sweep)

        def at(n: int | None) -> int:
            return end if n is None else index[n]

        return abs(at(self.measured_first_past) - at(self.expected_first_past))

    @property
    def verdict_reason(self) -> str:
        """Why it is not judged ("" when it is). A point without a reading (requests
        shorter than a poll) is judged by its neighbours where they decide it: below a
        larger N that ran all its requests at once it fits too, and above the first N past
        the knee it does not matter."""
        if self.knee is None:
            return self.why or "no prediction"
        if not self.points:
            return "no closed-loop point (c=N) was measured"
        first = self.measured_first_past
        blind = [p.load for p in self.points if p.past is None
                 and not any(q.past is False and q.users > p.users for q in self.points)
                 and (first is None or p.users < first)]
        if blind:
            return f"no /metrics reading of the requests running at {', '.join(blind)}"
        return ""

    @property
    def verdict(self) -> Verdict:
        steps = self.steps
        if steps is None:
            return "not judged"
        if self.expected_first_past is None and self.measured_first_past is None:
            return NONE_IN_SWEEP  # no knee was seen: agreement, not a confirmed knee
        return "within one step" if steps <= 1 else "miss"

    def describe(self) -> str:
        """One line: the numbers behind the verdict."""
        if self.verdict == "not judged":
            return f"not judged: {self.verdict_reason}"
        assert self.knee is not None

        def n(value: int | None) -> str:
            return f"N = {value}" if value is not None else "beyond the sweep"

        head = (f"predicted: fits {self.knee.fits}, first past {self.knee.first_past} "
                f"({n(self.expected_first_past)} in the sweep); measured: first past at "
                f"{n(self.measured_first_past)}")
        if self.verdict == NONE_IN_SWEEP:
            return f"{head}; {self.verdict} (no point went past the knee: not confirmed)"
        return f"{head}; {self.steps} step(s) apart: {self.verdict}"

    def to_dict(self) -> dict[str, Any]:
        return {"mode": self.mode, "capacity": self.capacity, "server": self.server,
                "prompt_tokens": list(self.prompt_tokens) if self.prompt_tokens else None,
                "output_tokens": list(self.output_tokens) if self.output_tokens else None,
                "budget": self.budget,
                "predicted": self.knee.as_dict() if self.knee else None,
                "expected_first_past": self.expected_first_past,
                "measured_first_past": self.measured_first_past,
                "measured_knee": self.measured_knee, "steps": self.steps,
                "verdict": self.verdict, "why": self.verdict_reason,
                "points": [p.to_dict() for p in self.points]}


def _window(rows: Sequence[Record]) -> tuple[int, int] | None:
    """From the first send to the last answer of ``rows`` (run clock, ns)."""
    return (min(r.t_sent for r in rows), max(r.t_end for r in rows)) if rows else None


def _range(values: list[int]) -> tuple[int, int] | None:
    return (min(values), max(values)) if values else None


def _named(family: MetricNames | None, pick: Callable[[MetricNames], str | None]) -> str | None:
    """The full name of one of ``family``'s gauges (None: it has none)."""
    name = pick(family) if family is not None else None
    return None if family is None or name is None else family.prefix + name


def _point(summary: Summary, users: int, in_flight: int, readings: Sequence[GaugeSample],
           family: MetricNames | None, counters: PointCounters | None,
           window: tuple[int, int] | None) -> KneePoint:
    """``window``: the run-clock span (ns) from the point's first send to its last answer;
    only the readings taken inside it count (start and end are at rest, and so is a poll
    that lands after a point's short requests have all ended)."""
    def stat(name: str, which: str) -> float | None:
        dist = summary.metrics.get(name)
        return None if dist is None else getattr(dist, which)

    kv_waiting = family.kv_waiting if family is not None else None
    readings = [r for r in readings if r.phase == "during" and window is not None
                and window[0] <= r.t_ns <= window[1]]
    return KneePoint(
        load=summary.load or "", users=users, in_flight=in_flight, readings=len(readings),
        running_max=_max(readings, _named(family, lambda f: f.running)),
        waiting_max=_max(readings, _named(family, lambda f: f.waiting)),
        kv_waiting_max=_max(readings, _named(family, lambda f: kv_waiting and kv_waiting[0]),
                            kv_waiting[1] if kv_waiting else None),
        kv_usage_max=_max(readings, _named(family, lambda f: f.kv_usage)),
        preemptions=counters.deltas["preemptions"] if counters else None,
        ttft_p50_ms=stat(TTFT.name, "p50"), ttft_p95_ms=stat(TTFT.name, "p95"),
        itl_p50_ms=stat(ITL.name, "p50"), itl_p95_ms=stat(ITL.name, "p95"),
        valid=summary.count.describe(flags=False))


def knee_check(cell: CellKey, served: ServedKv, valid: ValidRows, summaries: Sequence[Summary],
               loads: Sequence[LoadSummary], counters: Sequence[PointCounters],
               gauges: Sequence[GaugeSample], server: str = "") -> KneeCheck | None:
    """The check of one (mode, capacity); None when it has no closed-loop point.
    ``server``: its kind, as the run recorded it (the reports name it)."""
    mode, capacity = cell
    sweep: dict[int, Summary] = {}
    for s in summaries:
        label = read_label(s.load)
        if (s.mode, s.capacity) == cell and label.kind is not None \
                and label.kind.users_valued and not label.repetition and label.value:
            sweep[int(label.value)] = s
    if not sweep:
        return None
    loads_of = {s.load for s in sweep.values()}
    mine = [g for g in gauges if (g.mode, g.capacity) == cell]
    recorded = next((c.names for c in counters if (c.mode, c.capacity) == cell and c.names),
                    None)
    family = recorded or (names_of(mine[0].samples) if mine else None)
    in_flight = {x.load: x.max_in_flight for x in loads if (x.mode, x.capacity) == cell}
    deltas = {c.load: c for c in counters if (c.mode, c.capacity) == cell}
    rows = [r for r in valid.rows if (r.mode, r.capacity) == cell and r.load in loads_of]
    points = tuple(
        _point(s, n, in_flight.get(s.load, n), [g for g in mine if g.load == s.load], family,
               deltas.get(s.load), _window([r for r in rows if r.load == s.load]))
        for n, s in sorted(sweep.items()))
    prompts = _range([r.prompt_tokens for r in rows if r.prompt_tokens is not None])
    outputs = _range([r.output_tokens for r in rows if r.output_tokens is not None])
    metrics = exposition(mine[0].samples) if mine else None
    budget = served.budget_source(metrics)
    knee, why = None, ""
    if prompts is None or outputs is None:
        why = "no valid row with the server's prompt and output token counts"
    else:
        try:
            knee = served.knee(Workload(prompts[1], outputs[1]), metrics)
        except KvlabError as exc:
            why = f"not predicted: {exc}"
    return KneeCheck(mode, capacity, server, prompts, outputs, budget, knee, points,
                     why)


def knee_checks(budgets: Mapping[CellKey, ServedKv], valid: ValidRows,
                summaries: Sequence[Summary], loads: Sequence[LoadSummary],
                counters: Sequence[PointCounters], gauges: Sequence[GaugeSample],
                servers: Mapping[CellKey, str] | None = None) -> list[KneeCheck]:
    """One check per (mode, capacity) with a recorded budget and a closed-loop sweep, in
    the order of ``budgets``; ``servers``: each cell's kind, as the run recorded it."""
    kinds = servers or {}
    checks = [knee_check(cell, served, valid, summaries, loads, counters, gauges,
                         kinds.get(cell) or "unknown")
              for cell, served in budgets.items()]
    return [c for c in checks if c is not None]
