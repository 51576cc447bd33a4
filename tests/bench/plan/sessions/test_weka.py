"""The weka kind: agent traces as sessions, subagents as chains, tool results as tool
messages, each request sized to what it adds."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from kvlab.bench.plan.sessions.weka import WekaDataset
from kvlab.errors import ConfigError
from tests.bench.plan.kinds import common_prefix, word_tokens

SHIPPED = Path(__file__).resolve().parents[4] / "experiments" / "data" / "agent-trace.jsonl"


def turns(table: WekaDataset):
    return table.build(None)._rows  # type: ignore[arg-type]


def test_the_shipped_trace_spawns_a_subagent_and_joins_it() -> None:
    rows = {r.query_id: r for r in turns(WekaDataset(path=str(SHIPPED)))}
    assert list(rows) == ["c1.t1", "c1.t2", "c1.sa1.t1", "c1.sa1.t2", "c1.t3", "c1.t4",
                          "c2.t1", "c2.t2", "c2.t3"]
    # each request adds its "in" minus the request before it and that one's answer
    assert [rows[q].input_tokens for q in ("c1.t1", "c1.t2", "c1.t3", "c1.t4")] == [
        320, 392 - 320 - 24, 472 - 392 - 16, 528 - 472 - 24]
    assert rows["c1.sa1.t1"].input_tokens == 200 and rows["c1.sa1.t1"].chain == "sa1"
    assert rows["c1.sa1.t1"].after == ("c1.t2",)  # spawned after the parent's turn
    assert rows["c1.t3"].after == ("c1.sa1.t2",)  # the parent's next turn joins it
    assert [rows[q].role for q in rows] == ["user", "tool", "user", "tool", "tool", "user",
                                            "user", "tool", "user"]
    assert rows["c1.t2"].think_ms == 100.0 and rows["c1.t1"].think_ms == 0.0
    assert rows["c1.t1"].hash_ids == (1, 2, 3, 4, 5) and rows["c1.t1"].block_tokens == 64
    assert rows["c1.t1"].stop == "tool_use" and rows["c1.t4"].stop == "end_turn"
    assert rows["c1.t1"].hash_scope is None  # global: shared with c2


def test_blocks_with_equal_ids_open_with_equal_text_across_conversations() -> None:
    rows = WekaDataset(path=str(SHIPPED)).build(None)  # type: ignore[arg-type]
    _, prompts = asyncio.run(rows.prepare(word_tokens, 1024, 0.5, 16))
    by = {p.query_id: p for p in prompts}
    # c1 and c2 (and c1's subagent) share hash ids 1 and 2: two 64-token blocks
    shared = common_prefix([by["c1.t1"].prompt, by["c2.t1"].prompt, by["c1.sa1.t1"].prompt])
    # each block is its id's tag and prose, 63 tokens, and a line break: the third
    # block's tag differs from its first character
    assert 2 * 63 <= asyncio.run(word_tokens(shared)) < 2 * 63 + 2 and shared.endswith("\n")
    assert [by[q].tokens for q in ("c1.t1", "c1.t2", "c1.sa1.t1")] == [320, 48, 200]


def test_think_times_come_from_the_gaps_where_the_trace_gives_none(tmp_path) -> None:
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"id": "x", "requests": [
        {"t": 0, "in": 10, "out": 2, "api_time": 1.5, "stop": "tool_use"},
        {"t": 4, "in": 20, "out": 2},
        {"t": 9, "in": 5, "out": 2}]}, indent=2))  # one object, over several lines
    _, second, reset = turns(WekaDataset(path=str(path), think_scale=0.5,
                                             max_think_ms=2000))
    assert second.think_ms == (4 - 0 - 1.5) * 1000 * 0.5 and second.role == "tool"
    assert second.input_tokens == 20 - 10 - 2
    # a prompt that shrinks is a context reset: a new chain, after the one before
    assert (reset.chain, reset.index, reset.input_tokens) == ("mr1", 1, 5)
    assert reset.after == ("x.t2",) and reset.think_ms == 2000


@pytest.mark.parametrize(("conversation", "message"), [
    ({"id": "x"}, ":1: conversation x: no 'requests' list"),
    ({"id": "x", "requests": [{"t": 0, "out": 2}]}, ":1: conversation x request 1: 'in'"),
    ({"id": "x", "requests": [{"t": 0, "in": 3, "out": 0}]}, "request 1: 'out' must be"),
    ({"id": "x", "requests": [{"t": 0, "in": 64, "out": 2, "hash_ids": [1, 2, 3]}]},
     "request 1: 3 hash_ids for 64 tokens in blocks of 64"),
    ({"id": "x", "block_size": 0, "requests": []}, ":1: block_size 0"),
    ({"id": "x", "requests": [{"type": "subagent", "requests": []}]},
     "request 1: a subagent without requests"),
])
def test_a_bad_conversation_is_refused_with_its_file_and_line(tmp_path, conversation,
                                                             message) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps(conversation) + "\n")
    with pytest.raises(ConfigError, match=message):
        turns(WekaDataset(path=str(path)))
