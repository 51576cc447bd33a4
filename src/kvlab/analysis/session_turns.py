"""The facts of each turn of a session run: its growth, its cache against a prediction,
its think time.

A **session run** is one session sent once at one (mode, capacity, load, repetition);
its turns are rows whose Record names the session and the turn's index in its chain
(bench.plan.sessions). :class:`PlannedTurn` is a turn as planned (prepared.json). For
every turn sent, :func:`turn_facts` gives:

- **growth**: its prompt tokens (the server's count) minus those of its chain's previous
  turn. A session resends its history, so this is the previous answer (the server's
  output count) plus the turn's new input (as sized) plus what the chat template adds
  per turn (**overhead**, a constant of the template for the same roles): a turn whose
  overhead differs from its cell's usual one did not grow by exactly the previous answer
  plus the new input (an answer whose text re-tokenizes to other tokens, a template
  that merges across a boundary: Gemma merges an answer's last mark with ChatML's
  ``<|im_end|>``, so the previous answer's last character is kept);
- **cached against predicted**: the prompt tokens the server served from its prefix
  cache, against what should be there: the trace's ``hash_ids`` replayed through an
  unbounded LRU of blocks in the order the server saw the turns
  (:mod:`~kvlab.analysis.prefix_hits`; tokens = blocks x the trace's block), or,
  without hash ids, the session's own history: the previous turn's prompt and answer
  but its last token (whose K/V is never computed), rounded down to a block of
  :data:`HISTORY_BLOCK` tokens. **Drift**: the cache served a block or more less than
  predicted (a block of the prediction: the trace's, or 16 tokens), or, predicted by the
  history, a block or more more (a trace's ids name only the full blocks of its own
  prompts: a replay through another chat template, on a server that keeps partial
  blocks and answers, finds more than they say, and that is no drift);
- **think**: the time from the answers it waited for (its chain's previous turn and
  ``after``) to its send, against the think time asked.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from kvlab.analysis import metrics
from kvlab.analysis.prefix_hits import BlockLru
from kvlab.analysis.valid_rows import ValidRows
from kvlab.rundir import Record

HISTORY_BLOCK = 16  # tokens: kvlab serve's and vLLM's block; llama-server's cache is exact

RunKey = tuple[str, int, str | None, int, str]  # mode, capacity, load, repetition, session


@dataclass(frozen=True)
class PlannedTurn:
    """A session's turn as planned: where it sits, its think time (ms), the turns of
    other chains it waits for, its new input (tokens, as sized) and the roles of what it
    adds; the trace's hash ids of its whole prompt (``block_tokens`` each, namespace
    ``hash_scope``)."""

    capacity: int
    query_id: str
    session: str
    chain: str
    index: int
    think_ms: float
    after: tuple[str, ...]
    new_tokens: int
    roles: tuple[str, ...]
    hash_ids: tuple[int, ...] = ()
    hash_scope: str | None = None
    block_tokens: int | None = None


@dataclass
class TurnFacts:
    """One turn sent (tokens; times in ms; None: not known or not judged)."""

    session: str
    repetition: int
    chain: str
    index: int
    query_id: str
    refused: str | None  # why validation refused it; None: valid
    prompt_tokens: int | None
    output_tokens: int | None
    cached_tokens: int | None
    new_tokens: int
    roles: str
    growth: int | None = None
    overhead: int | None = None
    previous_prompt: int | None = None  # its chain's previous turn's (both valid)
    answer_end: str | None = None  # the last character of that turn's answer
    predicted: int | None = None
    predicted_by: str | None = None  # "hash_ids" or "history"
    drift: str | None = None  # how cached and predicted differ, when by a block or more
    think_asked_ms: float | None = None
    think_ms: float | None = None
    ttft_ms: float | None = None
    itl_ms: float | None = None
    e2e_ms: float | None = None

    @property
    def valid(self) -> bool:
        return self.refused is None

    @property
    def kept_previous(self) -> bool | None:
        """Its cached tokens cover at least its chain's previous prompt, rounded down to
        a block of :data:`HISTORY_BLOCK` (None: not known)."""
        if self.previous_prompt is None or self.cached_tokens is None:
            return None
        return self.cached_tokens >= self.previous_prompt // HISTORY_BLOCK * HISTORY_BLOCK

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def run_key(row: Record) -> RunKey:
    assert row.session is not None
    return (row.mode, row.capacity, row.load, row.repetition, row.session)


def turn_facts(valid: ValidRows, plans: Sequence[PlannedTurn]) -> dict[RunKey, list[TurnFacts]]:
    """Every sent turn of every session run, in the order sent, by run."""
    plan = {(p.capacity, p.query_id): p for p in plans}
    why = {v.row_key: f"{v.reason}: {v.detail}" for v in reversed(valid.violations)}
    accepted = {id(r) for r in valid.rows}
    rows = sorted((r for r in valid.sent if r.session is not None
                   and (r.capacity, r.query_id) in plan), key=lambda r: r.t_sent)
    runs: dict[RunKey, dict[str, Record]] = {}
    for row in rows:
        runs.setdefault(run_key(row), {})[row.query_id] = row
    caches: dict[tuple[str, int, str | None, int], BlockLru] = {}
    out: dict[RunKey, list[TurnFacts]] = {}
    for row in rows:  # in the order the server saw them: a trace's cache replays so
        key = run_key(row)
        by_id, cache = runs[key], caches.setdefault(key[:4], BlockLru())
        p = plan[(row.capacity, row.query_id)]
        ok = id(row) in accepted
        f = TurnFacts(p.session, row.repetition, p.chain, p.index, row.query_id,
                      None if ok else why.get((row.mode, row.capacity, row.query_id,
                                               row.repetition, row.load), "refused"),
                      row.prompt_tokens, row.output_tokens, row.cached_tokens,
                      p.new_tokens, "+".join(p.roles), think_asked_ms=p.think_ms)
        prev = by_id.get(_previous(p)) if p.index > 1 else None
        _grow(f, row, prev, ok and prev is not None and id(prev) in accepted)
        _predict(f, row, p, prev, cache)
        _think(f, row, p, prev, by_id)
        if ok:
            f.ttft_ms, f.itl_ms = metrics.ttft_ms(row), metrics.itl_effective_ms(row)
            f.e2e_ms = metrics.e2e_ms(row)
        out.setdefault(key, []).append(f)
    return out


def _previous(p: PlannedTurn) -> str:
    base = f"{p.session}.{p.chain}." if p.chain else f"{p.session}."
    return f"{base}t{p.index - 1}"


def _grow(f: TurnFacts, row: Record, prev: Record | None, both_valid: bool) -> None:
    if not both_valid or prev is None or None in (row.prompt_tokens, prev.prompt_tokens,
                                                  prev.output_tokens):
        return
    assert row.prompt_tokens is not None and prev.prompt_tokens is not None
    assert prev.output_tokens is not None
    f.previous_prompt = prev.prompt_tokens
    f.answer_end = (prev.text or "")[-1:]
    f.growth = row.prompt_tokens - prev.prompt_tokens
    f.overhead = f.growth - prev.output_tokens - f.new_tokens


def _predict(f: TurnFacts, row: Record, p: PlannedTurn, prev: Record | None,
             cache: BlockLru) -> None:
    """The prediction and its drift: the cache served a block or more less than
    predicted, or, predicted by the history (in the server's own tokens), a block or more
    more. A trace's hash ids name only the full blocks of its own prompts, so a replay
    whose prompts carry a chat template's tokens, and whose server keeps partial blocks
    and answers too, finds more than they predict: that is no drift."""
    block, over = HISTORY_BLOCK, True
    if p.hash_ids and p.block_tokens:
        keys: list[Hashable] = [(p.hash_scope, h) for h in p.hash_ids]
        f.predicted, f.predicted_by = cache.visit(keys) * p.block_tokens, "hash_ids"
        block, over = p.block_tokens, False
    elif prev is not None and prev.prompt_tokens is not None \
            and prev.output_tokens is not None:
        held = prev.prompt_tokens + prev.output_tokens - 1
        f.predicted, f.predicted_by = held // block * block, "history"
    elif p.index == 1:
        f.predicted, f.predicted_by = 0, "history"
    if f.predicted is None or f.cached_tokens is None:
        return
    if row.prompt_tokens is not None:
        f.predicted = min(f.predicted, max(0, row.prompt_tokens - 1) // block * block)
    gap = f.cached_tokens - f.predicted
    if gap <= -block or (over and gap >= block):
        f.drift = f"cached {f.cached_tokens}, {f.predicted} predicted by {f.predicted_by} " \
                  f"({gap:+d})"


def _think(f: TurnFacts, row: Record, p: PlannedTurn, prev: Record | None,
           by_id: dict[str, Record]) -> None:
    waited = [by_id[a] for a in p.after if a in by_id] + ([prev] if prev is not None else [])
    if waited:
        # from when the turn left the client: a connection's set-up is the turn's, not
        # think time the client overslept (llama-server closes after each answer)
        f.think_ms = (metrics.started_ns(row) - max(r.t_end for r in waited)) / 1e6
