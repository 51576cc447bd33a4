"""Verdicts on whole load points from the server's own counters: refusals and flags.

A row's own facts cannot show every wrong measurement. Two the server's ``/metrics``
deltas over a point can (:mod:`kvlab.analysis.server_counters`):

- **prefix reuse**: under ``cache_prompt = false``, a point whose server counted
  prefix-cache hits (Δ > 0) answered some prompts partly from memory, whether or not
  its rows carry a cached-token count. Every row of the point is refused as
  ``prefix_reuse``, named with the counter and its delta.
- **counters that disagree**: Δ prompt or generated tokens other than the records' sum,
  under the server's counting rule (vLLM counts every prompt token; llama.cpp and kvlab
  serve the ones they computed), means the server did work the records do not show, or
  the records miss some. The point is flagged in every output; with ``strict`` its rows
  are refused as ``counters_differ``. A row that failed is left out of the sum, and
  the verdict says so.
- **counters not read**: a point whose ``/metrics`` read failed at its start or end is
  flagged as ``counters_unread``, the failure named (refused with ``strict``); under
  ``cache_prompt = false`` it says "reuse not judged": never silently valid.

:func:`~kvlab.analysis.valid_rows.judge` applies the refusals.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from kvlab.analysis.server_counters import Check, PointCounters
from kvlab.analysis.validate import Reason, Violation
from kvlab.rundir import Record

_RULE = {"all": "the server counts every prompt token",
         "computed": "the server counts the prompt tokens it computed, prompt - cached"}


@dataclass(frozen=True)
class PointVerdict:
    """One verdict on the rows of one point (those sent between its two readings):
    ``refuses`` them as ``reason``, or only flags them. ``detail`` names the counter and
    its delta."""

    mode: str
    capacity: int
    load: str | None
    positions: tuple[int, int]  # the run positions of the point: [first, end)
    reason: Reason
    detail: str
    refuses: bool

    def covers(self, row: Record) -> bool:
        """True when ``row`` was sent inside this point."""
        return (row.mode, row.capacity) == (self.mode, self.capacity) \
            and self.positions[0] <= row.position < self.positions[1]

    def describe(self) -> str:
        """``vllm @ 512 c=8: <detail>``."""
        return f"{self.mode} @ {self.capacity} {self.load or 'sequential'}: {self.detail}"

    def violation(self, row: Record) -> Violation:
        """The refusal of one row of the point."""
        return Violation(row.mode, row.capacity, row.query_id, row.repetition, self.reason,
                         f"point {self.load or 'sequential'}: {self.detail}", load=row.load)

    def to_dict(self) -> dict[str, object]:
        return {"mode": self.mode, "capacity": self.capacity, "load": self.load,
                "positions": list(self.positions), "reason": str(self.reason),
                "detail": self.detail, "refuses": self.refuses}


def _metric(p: PointCounters, counter: str) -> str:
    """The server's own name of one of metric_names.COUNTERS."""
    return (p.names.full(counter) if p.names else None) or counter


def _differs(p: PointCounters, counter: str, check: Check, strict: bool) -> PointVerdict:
    family = p.names
    rule = (_RULE[family.prompt_counts] if family and counter == "prompt_tokens"
            else "the server counts every generated token")
    then = "refused (--strict)" if strict else "flagged; kvlab evaluate --strict refuses it"
    left_out = f"; {check.why}" if check.why else ""
    detail = (f"Δ {_metric(p, counter)} = {check.delta:g} but the records sum to "
              f"{check.records} ({rule}{left_out}): {then}")
    return PointVerdict(p.mode, p.capacity, p.load, p.positions, Reason.COUNTERS_DIFFER,
                        detail, strict)


def _unread(p: PointCounters, strict: bool) -> PointVerdict:
    """A point whose /metrics read failed: flagged (refused with ``strict``), named."""
    then = "refused (--strict)" if strict else "flagged; kvlab evaluate --strict refuses it"
    reuse = ("" if p.reuse_asked else "; under cache_prompt = false, reuse not judged "
             "(the prefix-cache counter could not be read)")
    return PointVerdict(p.mode, p.capacity, p.load, p.positions, Reason.COUNTERS_UNREAD,
                        f"the server's /metrics read failed ({p.unread}): its counters were "
                        f"not checked{reuse}: {then}", strict)


def point_verdicts(points: Sequence[PointCounters], *, strict: bool = False
                   ) -> list[PointVerdict]:
    """The verdicts of every point's counters, in the order the points ran: prefix-cache
    hits no request allowed refuse the point; a prompt or generation delta that differs
    from the records flags it (refuses it with ``strict``)."""
    out = []
    for p in points:
        if p.unread is not None:
            out.append(_unread(p, strict))
            continue
        if p.prefix_hits_unasked:
            hits = p.deltas["prefix_cache_hits"]
            out.append(PointVerdict(
                p.mode, p.capacity, p.load, p.positions, Reason.PREFIX_REUSE,
                f"the server's {_metric(p, 'prefix_cache_hits')} rose by {hits:g} "
                "over the point under cache_prompt = false: its prompts were answered "
                "partly from its prefix cache (start it with prefix caching off, or send "
                "a per-request salt: protocol.cache_salt)", True))
        for counter, check in (("prompt_tokens", p.prompt), ("generation_tokens",
                                                             p.generation)):
            if check.status == "differs":
                out.append(_differs(p, counter, check, strict))
    return out
