"""Multi-turn conversations: do the server-counted prompt tokens grow as they should?

Turn ``k`` of a conversation sends the earlier turns and their answers, then its own
question (:mod:`kvlab.bench.plan.sharegpt`), so its prompt is turn ``k − 1``'s plus
what was added. When the prompts were sized, the run's token counter counted each
one (``prepared.json``); the server counts them again when it answers (a record's
``prompt_tokens``). Whatever the server adds to every request (BOS, a chat template)
cancels in a difference, so turn to turn the growth the server counted must equal the
growth counted at sizing: ``counted[k] − counted[k−1] = sized[k] − sized[k−1]``. A
conversation whose growth differs is named with its first differing turn.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal

from kvlab.rundir import Outcome, Record

Status = Literal["grows as sized", "differs", "incomplete"]


@dataclass(frozen=True)
class TurnPlan:
    """One multi-turn row as prepared: where it sits and its sized prompt tokens."""

    capacity: int
    query_id: str
    conversation: str
    turn: int
    tokens: int


@dataclass
class ConversationCheck:
    """One conversation of one mode at one capacity (and load): per turn, the prompt
    tokens sized and those the server counted (None: no ok row)."""

    mode: str
    capacity: int
    load: str | None
    conversation: str
    repetition: int
    turns: list[int]
    sized: list[int]
    counted: list[int | None]
    status: Status
    detail: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _check(sized: Sequence[int], counted: Sequence[int | None],
           turns: Sequence[int]) -> tuple[Status, str]:
    if any(c is None for c in counted):
        missing = [t for t, c in zip(turns, counted, strict=True) if c is None]
        return "incomplete", f"no ok row for turn {', '.join(map(str, missing))}"
    known = [c for c in counted if c is not None]
    for i in range(1, len(turns)):
        grew, planned = known[i] - known[i - 1], sized[i] - sized[i - 1]
        if grew != planned:
            return "differs", (f"turn {turns[i]}: the server counted {grew:+d} prompt tokens "
                               f"over turn {turns[i - 1]}, {planned:+d} when sized")
    return "grows as sized", ""


def turn_growth(rows: Iterable[Record], plans: Sequence[TurnPlan]) -> list[ConversationCheck]:
    """Every conversation of ``plans`` in every (mode, load, repetition) that measured it
    (pass :func:`~kvlab.analysis.summaries.current_rows`)."""
    by_row = {(p.capacity, p.query_id): p for p in plans}
    seen: dict[tuple[str, int, str | None, str, int], dict[int, int | None]] = {}
    for r in rows:
        plan = by_row.get((r.capacity, r.query_id))
        if plan is None or r.warmup:
            continue
        found = seen.setdefault((r.mode, r.capacity, r.load, plan.conversation,
                                 r.repetition), {})
        found[plan.turn] = r.prompt_tokens if r.outcome == Outcome.OK else None
    out = []
    for (mode, capacity, load, conversation, repetition), counted in seen.items():
        planned = sorted((p for p in plans if p.capacity == capacity
                          and p.conversation == conversation), key=lambda p: p.turn)
        turns = [p.turn for p in planned]
        sized = [p.tokens for p in planned]
        got = [counted.get(t) for t in turns]
        status, detail = _check(sized, got, turns)
        out.append(ConversationCheck(mode, capacity, load, conversation, repetition, turns,
                                     sized, got, status, detail))
    return out
