"""Sessions measured: per turn index, per session, per load point.

For each (mode, capacity, load) that sent sessions (a sessions load), from the turn
facts of :mod:`~kvlab.analysis.session_turns`:

- **by turn index**: TTFT, effective ITL and e2e (ms) over the valid turns at that index
  of their chain, the share of their prompt tokens the server served from its prefix
  cache (Σ cached / Σ prompt) beside the share predicted, and the turns whose cache
  drifted from the prediction;
- **per session run**: turns planned, sent and valid; why it ended (its first refused
  turn: the session sent nothing more, and its turns not sent count as such, never
  measured); its total time (from its start to its last answer), the time a turn of it
  was in flight (waiting on the server) and the rest (thinking, and the send lag);
- **growth**: of the turns whose growth could be checked (they and their chain's
  previous turn valid), those that grew by exactly the previous answer, the new input
  and the chat template's usual overhead for their roles (the overhead most turns of
  the cell show), and the others, named;
- **think time**: the p95 of |think measured − think asked| (ms) over the turns that
  waited for an answer.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from kvlab.analysis.session_turns import PlannedTurn, RunKey, TurnFacts, turn_facts
from kvlab.analysis.stats import Distribution, describe, percentile
from kvlab.analysis.valid_rows import ValidRows
from kvlab.labels import load_order
from kvlab.rundir import Record

CellKey = tuple[str, int, str | None]  # mode, capacity, load


@dataclass
class TurnIndex:
    """The turns at one index of their chain (``index`` from 1)."""

    index: int
    sent: int
    valid: int
    ttft_ms: Distribution
    itl_ms: Distribution
    e2e_ms: Distribution
    cached_share: float | None  # Σ cached / Σ prompt over valid turns stating both
    predicted_share: float | None  # Σ predicted / Σ prompt over the same turns
    drifted: int  # valid turns whose cache differs from the prediction by a block or more

    def to_dict(self) -> dict[str, Any]:
        return {"index": self.index, "sent": self.sent, "valid": self.valid,
                "ttft_ms": self.ttft_ms.to_dict(), "itl_ms": self.itl_ms.to_dict(),
                "e2e_ms": self.e2e_ms.to_dict(), "cached_share": self.cached_share,
                "predicted_share": self.predicted_share, "drifted": self.drifted}


@dataclass
class SessionRun:
    """One session sent once (times in ms)."""

    session: str
    repetition: int
    planned: int
    sent: int
    valid: int
    ended: str | None  # its refused turn and why; None: every turn went
    total_ms: float
    waiting_ms: float  # a turn of it in flight
    thinking_ms: float  # nothing in flight: think times and send lag

    @property
    def not_sent(self) -> int:
        return self.planned - self.sent

    def to_dict(self) -> dict[str, Any]:
        return {**self.__dict__, "not_sent": self.not_sent}


@dataclass
class SessionsCell:
    """The sessions of one (mode, capacity, load)."""

    mode: str
    capacity: int
    load: str | None
    by_index: list[TurnIndex] = field(default_factory=list)
    runs: list[SessionRun] = field(default_factory=list)
    turns: list[TurnFacts] = field(default_factory=list)
    overhead: dict[str, int] = field(default_factory=dict)  # roles -> usual tokens per turn
    growth_checked: int = 0
    growth_off: list[str] = field(default_factory=list)  # turns that did not grow exactly
    think_checked: int = 0
    think_error_p95_ms: float | None = None

    @property
    def kept_previous(self) -> tuple[int, int]:
        """(turns whose cache held at least their previous prompt, rounded down to a
        block; turns where that is known)."""
        known = [t.kept_previous for t in self.turns if t.kept_previous is not None]
        return sum(known), len(known)

    @property
    def not_sent(self) -> int:
        return sum(r.not_sent for r in self.runs)

    @property
    def drift(self) -> list[str]:
        """The valid turns whose cache drifted from the prediction, one line each."""
        return [f"{t.query_id} rep {t.repetition}: {t.drift}" for t in self.turns
                if t.valid and t.drift]

    def to_dict(self) -> dict[str, Any]:
        return {"mode": self.mode, "capacity": self.capacity, "load": self.load,
                "by_index": [i.to_dict() for i in self.by_index],
                "runs": [r.to_dict() for r in self.runs], "not_sent": self.not_sent,
                "overhead": self.overhead, "growth_checked": self.growth_checked,
                "growth_off": self.growth_off, "think_checked": self.think_checked,
                "think_error_p95_ms": self.think_error_p95_ms, "drift": self.drift,
                "kept_previous": list(self.kept_previous),
                "turns": [t.to_dict() for t in self.turns]}


def _share(turns: Sequence[TurnFacts], attr: str) -> float | None:
    known = [t for t in turns if t.prompt_tokens and t.cached_tokens is not None
             and getattr(t, attr) is not None]
    total = sum(t.prompt_tokens or 0 for t in known)
    return sum(getattr(t, attr) for t in known) / total if total else None


def _by_index(turns: Sequence[TurnFacts]) -> list[TurnIndex]:
    out = []
    for index in sorted({t.index for t in turns}):
        here = [t for t in turns if t.index == index]
        ok = [t for t in here if t.valid]
        out.append(TurnIndex(
            index, len(here), len(ok),
            describe([t.ttft_ms for t in ok if t.ttft_ms is not None]),
            describe([t.itl_ms for t in ok if t.itl_ms is not None]),
            describe([t.e2e_ms for t in ok if t.e2e_ms is not None]),
            _share(ok, "cached_tokens"), _share(ok, "predicted"),
            sum(1 for t in ok if t.drift)))
    return out


def _run(key: RunKey, turns: Sequence[TurnFacts], rows: Sequence[Record], planned: int
         ) -> SessionRun:
    refused = [t for t in turns if not t.valid]
    ended = f"{refused[0].query_id}: {refused[0].refused}" if refused else None
    think_first = next((t.think_asked_ms or 0.0 for t in turns if t.index == 1), 0.0)
    start = min((r.t_scheduled if r.t_scheduled is not None else r.t_sent) for r in rows) \
        - think_first * 1e6
    end = max(r.t_end for r in rows)
    busy, reach = 0.0, start
    for r in sorted(rows, key=lambda r: r.t_sent):  # the union of the turns in flight
        lo = max(r.t_sent, reach)
        if r.t_end > lo:
            busy += r.t_end - lo
        reach = max(reach, r.t_end)
    total = max(0.0, end - start)
    return SessionRun(key[4], key[3], planned, len(turns), sum(t.valid for t in turns),
                      ended, total / 1e6, busy / 1e6, (total - busy) / 1e6)


def closed(text: str | None) -> bool:
    """An answer that ends on a letter, digit or newline: a chat template's next marker
    starts a token of its own after it (see bench.plan.sessions.rows.closed)."""
    return text is not None and (text[-1:].isalnum() or text.endswith("\n"))


def _growth(cell: SessionsCell) -> None:
    """The usual overhead per roles (the commonest among turns after an answer that ends
    :func:`closed`, where there are any) and the turns off it, named."""
    checked = [t for t in cell.turns if t.overhead is not None]
    usual: dict[str, int] = {}
    for roles in dict.fromkeys(t.roles for t in checked):
        these = [t for t in checked if t.roles == roles]
        clean = [t for t in these if closed(t.answer_end)] or these
        counts = Counter(t.overhead for t in clean if t.overhead is not None)
        usual[roles] = max(counts, key=lambda v: (counts[v], -abs(v)))
    cell.overhead = usual
    cell.growth_checked = len(checked)
    cell.growth_off = [
        f"{t.query_id} rep {t.repetition}: grew {t.growth} = answer "
        f"{(t.growth or 0) - t.new_tokens - (t.overhead or 0)} + new input {t.new_tokens} + "
        f"{t.overhead} template ({usual[t.roles]} usual, {t.overhead - usual[t.roles]:+d})"
        + ("" if closed(t.answer_end) else
           f"; the previous answer ends in {t.answer_end!r}, which the template's next "
           "token may merge with")
        for t in checked if t.overhead is not None and t.overhead != usual[t.roles]]


def session_cells(valid: ValidRows, plans: Sequence[PlannedTurn]) -> list[SessionsCell]:
    """One cell per (mode, capacity, load) that sent session turns, in report order."""
    facts = turn_facts(valid, plans)
    if not facts:
        return []
    planned = Counter((p.capacity, p.session) for p in plans)
    rows: dict[RunKey, list[Record]] = {}
    for r in valid.sent:
        if r.session is not None:
            rows.setdefault((r.mode, r.capacity, r.load, r.repetition, r.session), []
                            ).append(r)
    cells: dict[CellKey, SessionsCell] = {}
    modes: dict[str, int] = {}
    for key, turns in facts.items():
        modes.setdefault(key[0], len(modes))
        cell = cells.setdefault(key[:3], SessionsCell(*key[:3]))
        cell.turns += turns
        cell.runs.append(_run(key, turns, rows[key], planned[(key[1], key[4])]))
    for cell in cells.values():
        cell.by_index = _by_index(cell.turns)
        _growth(cell)
        errors = [abs(t.think_ms - t.think_asked_ms) for t in cell.turns
                  if t.think_ms is not None and t.think_asked_ms is not None]
        cell.think_checked = len(errors)
        cell.think_error_p95_ms = percentile(errors, 95) if errors else None
    return [cells[k] for k in sorted(cells, key=lambda k: (k[1], modes[k[0]],
                                                          load_order(k[2])))]
