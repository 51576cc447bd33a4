"""The in-memory driver: answers on its schedule, no socket, Records a run can judge."""

from __future__ import annotations

import asyncio
from itertools import pairwise

from kvlab.bench.client.endpoints import Endpoint, RequestSpec
from kvlab.bench.drivers.memory import MemorySettings
from kvlab.bench.plan.loads.concurrency import ConcurrencyPoint
from kvlab.records import ApiKind, Outcome, Record, RunClock

MS = 1_000_000
ENDPOINT = Endpoint("http://memory.invalid/v1", ApiKind.OPENAI_CHAT, model="m", name="chat")


def specs(n: int, tokens: int = 5) -> list[RequestSpec]:
    return [RequestSpec(prompt=f"a prompt of six words {i}", max_tokens=tokens, run_id="r",
                        mode="chat", capacity=256, query_id=f"q{i}", position=i)
            for i in range(n)]


def test_one_answer_follows_its_schedule() -> None:
    driver = MemorySettings(ttft_ms=3, itl_ms=2).build()

    async def go() -> Record:
        return await driver.send(ENDPOINT, specs(1)[0], RunClock())

    record = asyncio.run(go())
    assert record.outcome == Outcome.OK and record.output_tokens == 5 == len(record.chunk_ns)
    assert record.prompt_tokens == 6 and record.saw_terminator and record.saw_usage
    assert record.path == "/v1/chat/completions" and record.body["max_tokens"] == 5
    assert record.t_first_content is not None and record.t_first_content - record.t_sent >= 3 * MS
    # token i is due ttft + i * itl after the request was sent (deadlines, never early)
    assert all(t - record.t_sent >= (3 + 2 * i) * MS for i, t in enumerate(record.chunk_ns))
    assert [s.query_id for s in driver.sent] == ["q0"]


def test_one_slot_serves_a_closed_loop_one_request_at_a_time() -> None:
    driver = MemorySettings(ttft_ms=1, itl_ms=1, slots=1).build()
    landed: list[Record] = []

    async def go() -> list[Record]:
        return await driver.run_point(ConcurrencyPoint(2, requests=4), specs(6), ENDPOINT,
                                      RunClock(), landed.append, lambda clocks: None)

    records = asyncio.run(go())
    assert len(records) == 4 == len(landed) and {r.load for r in records} == {"c=2"}
    served = sorted((r.chunk_ns[0], r.chunk_ns[-1]) for r in records)
    assert all(end <= start for (_, end), (start, _) in pairwise(served))
    # two users: two requests were in flight at once on the client side
    assert any(b.t_sent < a.t_end for a in records for b in records if a is not b)


def test_its_prefix_cache_holds_earlier_prompts_and_answers_where_reuse_is_asked() -> None:
    driver = MemorySettings(ttft_ms=0, itl_ms=0, prefix_cache=True, prefix_block=2).build()
    first = {"role": "user", "content": "one two three four five"}

    async def go() -> list[Record]:
        clock, out = RunClock(), []
        for spec in (
                RequestSpec(prompt="", max_tokens=3, messages=(first,), query_id="a",
                            params={"cache_prompt": True}),
                RequestSpec(prompt="", max_tokens=3, query_id="b", params={"cache_prompt": True},
                            messages=(first, {"role": "assistant", "content": "t0 t1 t2"},
                                      {"role": "user", "content": "six"})),
                RequestSpec(prompt="", max_tokens=3, messages=(first,), query_id="c",
                            params={"cache_prompt": False})):
            out.append(await driver.send(ENDPOINT, spec, clock))
        return out

    a, b, c = asyncio.run(go())
    assert (a.prompt_tokens, a.cached_tokens) == (5, 0)
    # it holds a's 5 words and 2 of its 3 answer words: 7, rounded down to blocks of 2
    assert (b.prompt_tokens, b.cached_tokens) == (9, 6)
    assert c.cached_tokens == 0  # reuse not asked


def test_it_answers_the_turns_it_is_told_to_refuse_one_token_short() -> None:
    driver = MemorySettings(ttft_ms=0, itl_ms=0, refuse=("q1",)).build()

    async def go() -> list[Record]:
        clock = RunClock()
        return [await driver.send(ENDPOINT, s, clock) for s in specs(2)]

    ok, short = asyncio.run(go())
    assert (ok.output_tokens, short.output_tokens, short.requested_tokens) == (5, 4, 5)
