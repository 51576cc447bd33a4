"""The server's own counters per load point, and whether they agree with the records.

Each load point (or the sequential rows of one mode and capacity) is bracketed in
``gauges.jsonl`` by a ``start`` and an ``end`` reading of the server's ``/metrics``
(:mod:`kvlab.bench.client.gauges`); the records of the point are those whose run
position lies between the two readings' positions, so warm-ups (sent before the
``start`` reading) are never in it, and requests that failed are. Counters are shown
as deltas over the point: prompt and generated tokens, preemptions, prefix-cache
queries and hits, under the server's own names (:class:`kvlab.metric_names.MetricNames`:
those its kind recorded in the manifest, else the known ones its readings match).

The check: Δ prompt tokens equals the prompt tokens the server reported request by
request, summed over the point's records. vLLM's ``prompt_tokens`` counts every prompt
token; llama.cpp's and kvlab serve's count the tokens they computed, so their records
count ``prompt_tokens − cached_tokens``. The same for generated tokens. A difference
means the server did work the records do not show (another client, a recomputation
after a preemption) or the records miss some (a request without counts). A row that
failed (any outcome but ``ok``) is left out of the sum and the check says so: the
finished rows are still checked, so one timeout does not hide a point's counters.

A point whose ``/metrics`` could not be read at its start or its end (a timeout, a
refused connection, an error status: the reading's ``error``) keeps its rows and names
the failure (:attr:`PointCounters.unread`); nothing is checked on it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from kvlab.analysis.validate import reuse_asked
from kvlab.metric_names import COUNTERS, MetricNames, recognised
from kvlab.rundir import GaugeSample, Outcome, Record

CellKey = tuple[str, int]  # (mode, capacity)


def counter(samples: dict[str, float], name: str) -> float | None:
    """The sum over label sets of the metric ``name`` (prefix included); None if absent."""
    values = [v for k, v in samples.items() if k.split("{")[0] == name]
    return sum(values) if values else None


def exposition(samples: Mapping[str, float]) -> str:
    """A reading's samples as Prometheus text again (``name{labels} value`` lines), for
    what reads a server's own words (:mod:`kvlab.memory.budget_metrics`)."""
    return "\n".join(f"{key} {value}" for key, value in samples.items())


def names_of(samples: dict[str, float], recorded: MetricNames | None = None
             ) -> MetricNames | None:
    """The names a point's counters are read by: those its server kind recorded, else
    the known ones its prompt counter matches (an endpoint kvlab did not launch, a run
    recorded before kinds recorded theirs); None: neither."""
    return recorded if recorded is not None else recognised(samples)


@dataclass(frozen=True)
class Check:
    """Δ of one counter against the records' sum; ``status`` "equal", "differs" or
    "not checkable" (``why``)."""

    delta: float | None
    records: int | None
    status: str
    why: str = ""

    def to_dict(self) -> dict[str, object]:
        return {"delta": self.delta, "records": self.records, "status": self.status,
                "why": self.why}


def _check(delta: float | None, rows: Sequence[Record], count: str,
           missing: str) -> Check:
    """Compare ``delta`` with Σ of ``count`` ("prompt", "computed prompt" or "output")."""
    if delta is None:
        return Check(None, None, "not checkable", "the server has no such counter")
    failed = sum(1 for r in rows if r.outcome is not Outcome.OK)
    rows = [r for r in rows if r.outcome is Outcome.OK]
    left_out = (f"checked on the {len(rows)} finished row{'s' if len(rows) != 1 else ''}; "
                f"{failed} failed row{'s' if failed != 1 else ''} left out (the server may "
                "have counted some of its tokens)") if failed else ""
    if not rows:
        return Check(delta, 0, "equal" if delta == 0 else "differs", left_out)
    values: list[int | None]
    if count == "output":
        values = [r.output_tokens for r in rows]
    elif count == "prompt":
        values = [r.prompt_tokens for r in rows]
    else:
        values = [None if r.prompt_tokens is None or r.cached_tokens is None
                  else r.prompt_tokens - r.cached_tokens for r in rows]
    lacking = sum(1 for v in values if v is None)
    total = sum(v for v in values if v is not None)
    if lacking:
        return Check(delta, total, "not checkable", "; ".join(filter(None, [
            f"{lacking} of {len(rows)} rows without {missing}", left_out])))
    return Check(delta, total, "equal" if delta == total else "differs", left_out)


@dataclass(frozen=True)
class PointCounters:
    """One point's counter deltas (None: the server has no such counter) and checks."""

    mode: str
    capacity: int
    load: str | None
    server: str  # whose names the counters were read by (MetricNames.server)
    rows: int  # records in the point, failed ones included
    deltas: dict[str, float | None]
    prompt: Check
    generation: Check
    reuse_asked: bool  # some request of the point allowed prefix reuse
    seconds: float  # between the start and end readings
    positions: tuple[int, int]  # the run positions the readings bracket: [first, end)
    unread: str | None = None  # why /metrics could not be read at a bracket (None: read)
    names: MetricNames | None = field(default=None, compare=False)  # None: unread, unknown

    def covers(self, row: Record) -> bool:
        """True when ``row`` was sent between this point's two readings."""
        return (row.mode, row.capacity) == (self.mode, self.capacity) \
            and self.positions[0] <= row.position < self.positions[1]

    @property
    def prefix_hits_unasked(self) -> bool:
        """True when the server's prefix cache hit although no request allowed reuse."""
        hits = self.deltas["prefix_cache_hits"]
        return not self.reuse_asked and hits is not None and hits > 0

    def to_dict(self) -> dict[str, object]:
        return {"mode": self.mode, "capacity": self.capacity, "load": self.load,
                "server": self.server, "rows": self.rows, "deltas": self.deltas,
                "prompt_check": self.prompt.to_dict(),
                "generation_check": self.generation.to_dict(),
                "reuse_asked": self.reuse_asked, "seconds": self.seconds,
                "positions": list(self.positions), "unread": self.unread,
                "prefix_hits_unasked": self.prefix_hits_unasked}


def _spans(gauges: Iterable[GaugeSample]) -> list[tuple[GaugeSample, GaugeSample]]:
    """(start, end) pairs in file order; a start without its end (an interrupted point)
    is dropped."""
    pairs: list[tuple[GaugeSample, GaugeSample]] = []
    open_spans: dict[tuple[str, int, str | None], GaugeSample] = {}
    for g in gauges:
        key = (g.mode, g.capacity, g.load)
        if g.phase == "start":
            open_spans[key] = g
        elif g.phase == "end" and key in open_spans:
            pairs.append((open_spans.pop(key), g))
    return pairs


def point_counters(records: Sequence[Record], gauges: Iterable[GaugeSample],
                   names: Mapping[CellKey, MetricNames] | None = None
                   ) -> list[PointCounters]:
    """Every completed point's deltas and checks, in the order the points ran.
    ``records``: all of the run's records (superseded attempts included: the server
    served them too); ``names``: per (mode, capacity), the metric names its server kind
    recorded (:func:`names_of` otherwise)."""
    recorded = names or {}
    out = []
    for start, end in _spans(gauges):
        if start.position is None or end.position is None:
            continue
        lo, hi = start.position, end.position
        rows = [r for r in records if r.mode == start.mode and r.capacity == start.capacity
                and lo <= r.position < hi]
        unread = start.error or end.error
        mine = recorded.get((start.mode, start.capacity))
        if unread:
            out.append(_unread(start, end, rows, unread, mine))
            continue
        family = names_of(start.samples, mine)
        if family is None:
            continue
        deltas: dict[str, float | None] = {}
        for name in COUNTERS:
            metric = family.full(name)
            a = counter(start.samples, metric) if metric else None
            b = counter(end.samples, metric) if metric else None
            deltas[name] = None if a is None or b is None else b - a
        prompt_sum = "prompt" if family.prompt_counts == "all" else "computed prompt"
        out.append(PointCounters(
            start.mode, start.capacity, start.load, family.server, len(rows), deltas,
            _check(deltas["prompt_tokens"], rows, prompt_sum,
                   "a prompt token count" if prompt_sum == "prompt"
                   else "a prompt and a cached token count"),
            _check(deltas["generation_tokens"], rows, "output", "an output token count"),
            any(reuse_asked(r) for r in rows), (end.t_ns - start.t_ns) / 1e9, (lo, hi),
            names=family))
    return out


def _unread(start: GaugeSample, end: GaugeSample, rows: Sequence[Record],
            why: str, recorded: MetricNames | None) -> PointCounters:
    """A point whose /metrics read failed at a bracket: its rows, no delta, no check."""
    family = names_of(start.samples, recorded) or names_of(end.samples)
    unchecked = Check(None, None, "not checkable", f"the /metrics read failed: {why}")
    return PointCounters(
        start.mode, start.capacity, start.load, family.server if family else "unknown",
        len(rows), dict.fromkeys(COUNTERS), unchecked, unchecked,
        any(reuse_asked(r) for r in rows), (end.t_ns - start.t_ns) / 1e9,
        (start.position or 0, end.position or 0), why, names=family)
