"""Sending sessions through the in-memory driver: each turn after the answers it waits
for plus its think time, the history the server's answers, a refused turn the end."""

from __future__ import annotations

import asyncio

from kvlab.api.dialects import ApiKind
from kvlab.bench.client.endpoints import Endpoint, RequestSpec
from kvlab.bench.drivers.memory import MemorySettings
from kvlab.bench.plan.exact import row_tag
from kvlab.bench.plan.sessions.runner import (
    ClosedSessions,
    OpenSessions,
    graphs_of,
    session_runs,
    shard_sessions,
)
from kvlab.bench.plan.sessions.turn import SessionTurn
from kvlab.records import Record, RunClock

ENDPOINT = Endpoint("http://memory.invalid/v1", ApiKind.OPENAI_CHAT, model="m")


def chat(session: str, turns: int, think_ms: float = 3.0, **first: object) -> list[SessionTurn]:
    out = []
    for k in range(1, turns + 1):
        extra = first if k == 1 else {}
        out.append(SessionTurn(session, k, think_ms=0.0 if k == 1 else think_ms,
                               messages=(("user", f"{session} question {k}"),),
                               **extra))  # type: ignore[arg-type]
    return out


def specs_of(turns: list[SessionTurn], repetitions: int = 1) -> list[RequestSpec]:
    return [RequestSpec(prompt=" ".join(c for _, c in t.messages), max_tokens=3,
                        query_id=t.query_id, repetition=r,
                        params={"cache_prompt": True})
            for r in range(repetitions) for t in turns]


def send_through(settings: MemorySettings):
    driver = settings.build()
    clock = RunClock()

    async def send(spec: RequestSpec) -> Record:
        return await driver.send(ENDPOINT, spec, clock)

    return driver, clock, send


def test_turns_wait_for_the_previous_answer_and_send_the_servers_answers() -> None:
    turns = chat("a", 3, think_ms=5.0) + chat("b", 2, think_ms=5.0)
    _, clock, send = send_through(MemorySettings(ttft_ms=2, itl_ms=1))
    share = ClosedSessions("sessions=2", 2, graphs_of(turns))
    records = asyncio.run(share.run(specs_of(turns), send, clock))
    by = {r.query_id: r for r in records}
    assert set(by) == {t.query_id for t in turns}
    for prev, turn in (("a.t1", "a.t2"), ("a.t2", "a.t3"), ("b.t1", "b.t2")):
        r, p = by[turn], by[prev]
        assert r.t_scheduled == p.t_end + 5_000_000  # the answer's end plus the think time
        assert r.t_sent >= r.t_scheduled
        assert (r.session, r.turn, r.load) == (turn[0], int(turn[-1]), "sessions=2")
    third = by["a.t3"].body["messages"]
    assert [m["role"] for m in third] == ["user", "assistant", "user", "assistant", "user"]
    assert third[1]["content"] == by["a.t1"].text == " t0 t1 t2"  # the server's answer
    assert third[0]["content"] == f"[{row_tag(0)} sessions=2 r0] a question 1"
    assert by["b.t1"].body["messages"][0]["content"].startswith(f"[{row_tag(1)} sessions=2")
    # the prompt grew by exactly the previous answer and the new input, in words
    assert by["a.t2"].prompt_tokens == by["a.t1"].prompt_tokens + 3 + 3
    assert by["a.t1"].prompt_sha256 != by["b.t1"].prompt_sha256


def test_the_files_answers_are_the_history_where_replay_is_asked() -> None:
    turns = [SessionTurn("a", 1, messages=(("user", "hi"),), answer="recorded words"),
             SessionTurn("a", 2, messages=(("user", "more"),))]
    _, clock, send = send_through(MemorySettings(ttft_ms=1, itl_ms=0))
    records = asyncio.run(ClosedSessions("s", 1, graphs_of(turns)).run(
        specs_of(turns), send, clock))
    second = next(r for r in records if r.query_id == "a.t2")
    assert second.body["messages"][1] == {"role": "assistant", "content": "recorded words"}


def test_a_refused_turn_ends_its_session_and_no_other() -> None:
    turns = chat("a", 4) + chat("b", 3)
    _, clock, send = send_through(MemorySettings(ttft_ms=1, itl_ms=0,
                                                      refuse=("a.t2",)))
    records = asyncio.run(ClosedSessions("s", 2, graphs_of(turns)).run(
        specs_of(turns), send, clock))
    assert sorted(r.query_id for r in records) == ["a.t1", "a.t2", "b.t1", "b.t2", "b.t3"]
    refused = next(r for r in records if r.query_id == "a.t2")
    assert refused.output_tokens == 2 and refused.requested_tokens == 3


def test_a_subagent_starts_after_its_parent_turn_and_the_next_turn_joins_it() -> None:
    turns = [SessionTurn("c", 1, messages=(("user", "task"),)),
             SessionTurn("c", 1, "sa1", think_ms=1.0, messages=(("user", "explore"),),
                         after=("c.t1",)),
             SessionTurn("c", 2, "sa1", think_ms=1.0, messages=(("tool", "found it"),)),
             SessionTurn("c", 2, think_ms=2.0, messages=(("tool", "the subagent said"),),
                         after=("c.sa1.t2",))]
    _, clock, send = send_through(MemorySettings(ttft_ms=2, itl_ms=1))
    records = asyncio.run(ClosedSessions("s", 1, graphs_of(turns)).run(
        specs_of(turns), send, clock))
    by = {r.query_id: r for r in records}
    assert by["c.sa1.t1"].t_scheduled == by["c.t1"].t_end + 1_000_000
    assert by["c.t2"].t_scheduled == max(by["c.t1"].t_end, by["c.sa1.t2"].t_end) + 2_000_000
    # the subagent is a conversation of its own; the parent's history is its own chain
    assert [m["content"] for m in by["c.sa1.t2"].body["messages"]][1:] == [
        by["c.sa1.t1"].text, "found it"]
    assert [m["role"] for m in by["c.t2"].body["messages"]] == ["user", "assistant", "tool"]


def test_a_closed_loop_keeps_at_most_its_users_sessions_at_once() -> None:
    turns = [t for s in "abcde" for t in chat(s, 2, think_ms=1.0)]
    _, clock, send = send_through(MemorySettings(ttft_ms=2, itl_ms=1))
    records = asyncio.run(ClosedSessions("s", 2, graphs_of(turns)).run(
        specs_of(turns, repetitions=2), send, clock))
    assert len(records) == 2 * len(turns)
    spans: dict[tuple[str, int], tuple[int, int]] = {}
    for r in records:
        assert r.session is not None
        lo, hi = spans.get((r.session, r.repetition), (r.t_sent, r.t_end))
        spans[(r.session, r.repetition)] = (min(lo, r.t_sent), max(hi, r.t_end))
    edges = sorted([(lo, 1) for lo, _ in spans.values()] + [(hi, -1) for _, hi in
                                                           spans.values()])
    live = peak = 0
    for _, step in edges:
        live += step
        peak = max(peak, live)
    assert peak == 2


def test_an_open_loop_starts_each_session_at_its_arrival() -> None:
    turns = chat("a", 2) + chat("b", 2)
    _, clock, send = send_through(MemorySettings(ttft_ms=1, itl_ms=0))
    share = OpenSessions("session_rate=10.0", (0, 40_000_000), graphs_of(turns))
    start = clock.now() + 5_000_000
    records = asyncio.run(share.run(specs_of(turns), send, clock, start_ns=start))
    firsts = {r.session: r.t_scheduled for r in records if r.turn == 1}
    assert firsts == {"a": start, "b": start + 40_000_000}


def test_sharding_keeps_each_session_run_on_one_worker() -> None:
    turns = [t for s in "abcd" for t in chat(s, 3)]
    specs = specs_of(turns)
    shards = shard_sessions(ClosedSessions("s", 4, graphs_of(turns)), specs, 3)
    assert [s.share.users for s in shards] == [2, 1, 1]  # type: ignore[attr-defined]
    owners: dict[str, set[int]] = {}
    for shard in shards:
        for spec in shard.specs:
            owners.setdefault(spec.query_id.split(".")[0], set()).add(shard.worker)
            assert spec.worker == shard.worker
    assert all(len(w) == 1 for w in owners.values()) and len(owners) == 4
    graphs = graphs_of(turns)
    assert len(session_runs(graphs, specs)) == 4
    open_shards = shard_sessions(OpenSessions("r", (0, 1, 2, 3), graphs, 4), specs, 2)
    assert [s.share.offsets_ns for s in open_shards] == [(0, 2), (1, 3)]  # type: ignore[attr-defined]
