"""Sending sessions: each turn after the answers it waits for, plus its think time.

A **session run** is one session sent once (at one repetition of a load point). Its
chains run side by side; within a chain a turn leaves only when the chain's previous
answer has fully arrived and the turns it waits for (``after``: a subagent's spawn, a
join) have answered, at ``max(their t_end) + think_ms`` on the run's clock (an absolute
deadline, :func:`~kvlab.bench.plan.schedule.sleep_until`; that deadline is the Record's
``t_scheduled``). It sends the chain's history as chat messages (every earlier turn's
messages and the server's actual answer, or the file's where the data asks for replay),
then its own. The first message of each chain opens with the run's **tag** (the
session's own, the point's label and the repetition), so no session run finds in a
server's prefix cache what another session, point or repetition left there; sessions
whose turns name their blocks (``hash_ids``) share one tag per point and repetition,
and share prefixes as their ids say.

Every answer is judged as it lands, by validation's own rule
(:func:`~kvlab.analysis.validate.refusal`): a refused turn (an error, a wrong
length) ends its session run, which sends nothing more; its turns not sent have no
Record. Session runs interleave freely across the load: ``users`` at once, each taking
the next run when its last ended (:class:`ClosedSessions`), or each run at its own
arrival time, at most ``max_sessions`` at once (:class:`OpenSessions`).
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

from kvlab.analysis.validate import refusal
from kvlab.bench.client.endpoints import RequestSpec
from kvlab.bench.plan.exact import row_tag
from kvlab.bench.plan.loads.base import RecordFn, SendFn, Shard, split_evenly
from kvlab.bench.plan.schedule import sleep_until
from kvlab.rundir import Record, RunClock
from kvlab.rundir.session_turn import SessionTurn

_NS_PER_MS = 1_000_000


@dataclass(frozen=True)
class SessionGraph:
    """One session's turns, in data order (a turn after every turn it waits for)."""

    id: str
    turns: tuple[SessionTurn, ...]

    @property
    def chains(self) -> dict[str, list[SessionTurn]]:
        """Its chains' turns, in order, the main chain first."""
        out: dict[str, list[SessionTurn]] = {}
        for turn in self.turns:
            out.setdefault(turn.chain, []).append(turn)
        return out

    @property
    def width(self) -> int:
        """The most turns it can have in flight at once (one per chain)."""
        return len({t.chain for t in self.turns})


def graphs_of(turns: Sequence[SessionTurn]) -> tuple[SessionGraph, ...]:
    """The sessions of these turns, in order of their first turn."""
    by: dict[str, list[SessionTurn]] = {}
    for turn in turns:
        by.setdefault(turn.session, []).append(turn)
    return tuple(SessionGraph(s, tuple(t)) for s, t in by.items())


@dataclass(frozen=True)
class SessionRun:
    """One session sent once: its turns' requests by query id, at ``repetition``;
    ``index``: the session's place in its dataset."""

    graph: SessionGraph
    repetition: int
    specs: dict[str, RequestSpec]
    index: int = 0


def session_runs(graphs: Sequence[SessionGraph], specs: Sequence[RequestSpec]
                 ) -> list[SessionRun]:
    """``specs`` (one per turn and repetition) grouped into session runs, by repetition
    then session order; a session with a turn missing from ``specs`` is not run."""
    by = {(s.repetition, s.query_id): s for s in specs}
    runs = []
    for repetition in sorted({s.repetition for s in specs}):
        for index, graph in enumerate(graphs):
            mine = {t.query_id: by.get((repetition, t.query_id)) for t in graph.turns}
            if all(v is not None for v in mine.values()):
                runs.append(SessionRun(graph, repetition,
                                       {k: v for k, v in mine.items() if v is not None},
                                       index))
    return runs


def tag_of(run: SessionRun, label: str | None) -> str:
    """What opens each chain's first message in one session run: the point's label and
    the repetition, after the session's own tag (its index in base 62, lowest digit
    first: sessions differ from the first character) unless its turns name their
    blocks (``hash_ids``: sessions share what their ids say, the tag included)."""
    point = f"{label or 'sessions'} r{run.repetition}"
    if any(t.hash_ids for t in run.graph.turns):
        return f"[{point}] "
    return f"[{row_tag(run.index)} {point}] "


async def run_session(run: SessionRun, send: SendFn, clock: RunClock, on_record: RecordFn,
                      label: str | None, start_ns: int) -> None:
    """Send one session run from ``start_ns`` on ``clock`` (see the module doc). A turn
    whose request asks the server to keep the history (``server_history``: OpenAI
    Responses) sends, after its chain's first turn, only its new messages and the id of
    the chain's previous answer (``previous_response_id``)."""
    answered = {t.query_id: asyncio.Event() for t in run.graph.turns}
    records: dict[str, Record] = {}
    ended: list[str] = []
    tag = tag_of(run, label)

    async def chain(turns: list[SessionTurn]) -> None:
        history: list[dict[str, str]] = []
        previous: str | None = None  # the chain's last answer's id (server_history)
        last_end = start_ns
        for turn in turns:
            for other in turn.after:
                await answered[other].wait()
            if ended:
                return
            waited = [last_end] + [records[a].t_end for a in turn.after if a in records]
            deadline = max(waited) + round(turn.think_ms * _NS_PER_MS)
            await sleep_until(clock, deadline)
            if ended:  # another chain's turn was refused while this one thought
                return
            added = [{"role": role, "content": (tag if not history and i == 0 else "")
                      + content} for i, (role, content) in enumerate(turn.messages)]
            planned = run.specs[turn.query_id]
            kept = planned.server_history and previous is not None
            spec = dataclasses.replace(
                planned, messages=tuple(history + added),
                previous_response_id=previous if kept else None,
                stored_messages=len(history) if kept else 0, load=label,
                t_scheduled=deadline, session=turn.session, turn=turn.index)
            record = await send(spec)
            records[turn.query_id] = record
            on_record(record)
            if (why := refusal(record)) is not None:
                ended.append(f"{turn.query_id}: {why}")
                for event in answered.values():  # wake every waiter: nothing more goes
                    event.set()
                return
            answered[turn.query_id].set()
            answer = turn.answer if turn.answer is not None else record.text
            history += [*added, {"role": "assistant", "content": answer}]
            previous = record.response_id
            last_end = record.t_end

    await asyncio.gather(*(chain(turns) for turns in run.graph.chains.values()))


def _collect(on_record: RecordFn | None) -> tuple[list[Record], RecordFn]:
    records: list[Record] = []

    def landed(record: Record) -> None:
        records.append(record)
        if on_record is not None:
            on_record(record)

    return records, landed


@dataclass(frozen=True)
class ClosedSessions:
    """``users`` sessions at once over the session runs of ``specs`` (the point's or a
    worker's share): each user takes the next run as soon as its last one ended."""

    label: str | None
    users: int
    graphs: tuple[SessionGraph, ...]

    def max_in_flight(self, n_requests: int) -> int:
        return max(1, self.users * max((g.width for g in self.graphs), default=1))

    async def run(self, specs: Sequence[RequestSpec], send: SendFn, clock: RunClock,
                  on_record: RecordFn | None = None, start_ns: int | None = None
                  ) -> list[Record]:
        queue = list(reversed(session_runs(self.graphs, specs)))
        records, landed = _collect(on_record)

        async def user() -> None:
            while queue:
                await run_session(queue.pop(), send, clock, landed, self.label, clock.now())

        if start_ns is not None:
            await sleep_until(clock, start_ns)
        await asyncio.gather(*(user() for _ in range(self.users)))
        return records


@dataclass(frozen=True)
class OpenSessions:
    """Session run ``i`` of ``specs`` starts at ``offsets_ns[i]`` after the point's start,
    whatever is in flight; at most ``max_sessions`` at once (a run that finds them all
    busy waits, and starts late)."""

    label: str | None
    offsets_ns: tuple[int, ...]
    graphs: tuple[SessionGraph, ...]
    max_sessions: int | None = None

    def max_in_flight(self, n_requests: int) -> int:
        sessions = min(self.max_sessions or len(self.offsets_ns), len(self.offsets_ns))
        return max(1, sessions * max((g.width for g in self.graphs), default=1))

    async def run(self, specs: Sequence[RequestSpec], send: SendFn, clock: RunClock,
                  on_record: RecordFn | None = None, start_ns: int | None = None
                  ) -> list[Record]:
        runs = session_runs(self.graphs, specs)
        if len(self.offsets_ns) > len(runs):
            raise ValueError(f"{len(self.offsets_ns)} arrivals but {len(runs)} sessions")
        cap = asyncio.Semaphore(self.max_sessions) if self.max_sessions else None
        records, landed = _collect(on_record)
        start = clock.now() if start_ns is None else start_ns
        tasks: list[asyncio.Task[None]] = []

        async def one(run: SessionRun, deadline: int) -> None:
            try:
                await run_session(run, send, clock, landed, self.label, deadline)
            finally:
                if cap is not None:
                    cap.release()

        try:
            for run, offset in zip(runs, self.offsets_ns, strict=False):
                await sleep_until(clock, start + offset)
                if cap is not None:
                    await cap.acquire()
                tasks.append(asyncio.create_task(one(run, start + offset)))
            await asyncio.gather(*tasks)
        finally:
            for task in tasks:  # an interrupted point leaves nothing running behind it
                task.cancel()
        return records


def shard_sessions(share: ClosedSessions | OpenSessions, specs: Sequence[RequestSpec],
                   workers: int) -> list[Shard]:
    """Whole session runs dealt out over ``workers`` (a session never spans two): a
    closed loop's users split as evenly as possible, run ``j`` to user ``j mod users``;
    an open loop's run ``i`` to worker ``i mod N``, at its own arrival, the session cap
    split too (a cap below N: ValueError)."""
    if workers < 1:
        raise ValueError("a load needs at least one worker")
    runs = session_runs(share.graphs, specs)
    if isinstance(share, ClosedSessions):
        active = min(share.users, workers, max(1, len(runs)))
        users = split_evenly(share.users, active)
        mine = [[r for j, r in enumerate(runs) if (j % share.users) % active == k]
                for k in range(active)]
        parts: list[ClosedSessions | OpenSessions] = [
            dataclasses.replace(share, users=u) for u in users]
    else:
        active = min(workers, len(share.offsets_ns))
        if share.max_sessions is not None and share.max_sessions < workers:
            raise ValueError(f"max_sessions {share.max_sessions} cannot be split over "
                             f"{workers} workers (each needs a place)")
        caps: Sequence[int | None] = [None] * active if share.max_sessions is None \
            else split_evenly(share.max_sessions, workers)[:active]
        count = len(share.offsets_ns)
        mine = [[runs[i] for i in range(k, count, workers)] for k in range(active)]
        parts = [OpenSessions(share.label, share.offsets_ns[k:count:workers], share.graphs,
                              caps[k]) for k in range(active)]
    return [Shard(k, tuple(dataclasses.replace(s, worker=k) for r in mine[k]
                           for s in r.specs.values()), parts[k]) for k in range(active)]
