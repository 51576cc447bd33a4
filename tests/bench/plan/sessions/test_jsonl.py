"""The sessions kind: kvlab's session JSONL, one turn per line, refused line by line."""

from __future__ import annotations

import asyncio
import json

import pytest

from kvlab.bench.plan.sessions.jsonl import SessionsDataset
from kvlab.errors import ConfigError
from tests.bench.plan.kinds import word_tokens

LINES = [
    {"session": "a", "turn": 1, "messages": [{"role": "system", "content": "Be brief."},
                                             {"role": "user", "content": "Where is the pier?"}]},
    {"session": 7, "turn": 1, "input_tokens": 12, "output_tokens": 3},
    {"session": "a", "turn": 2, "think_ms": 250, "input_tokens": 9, "role": "tool",
     "hash_ids": [1, 2], "answer": "North."},
    {"session": 7, "turn": 2, "think_ms": 0, "input_tokens": 5},
]


def write(tmp_path, lines=LINES) -> str:
    path = tmp_path / "s.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return str(path)


def prepare(table: SessionsDataset, capacity: int = 512, output_tokens: int = 4):
    rows = table.build(None)  # type: ignore[arg-type]
    return rows.queries(), asyncio.run(rows.prepare(word_tokens, capacity, 0.5,
                                                    output_tokens))[1]


def test_turns_keep_their_session_place_think_time_and_messages(tmp_path) -> None:
    queries, prompts = prepare(SessionsDataset(path=write(tmp_path), think_ms=40))
    assert [q.id for q in queries] == ["a.t1", "7.t1", "a.t2", "7.t2"]
    first, other, second, last = (p.session for p in prompts)
    assert first is not None and other is not None and second is not None and last is not None
    assert first.messages == (("system", "Be brief."), ("user", "Where is the pier?"))
    assert prompts[0].tokens == 3 + 5  # both messages' words, as the counter counts them
    assert (first.think_ms, other.think_ms, second.think_ms, last.think_ms) == (40, 40, 250, 0)
    assert second.roles == ("tool",) and prompts[2].tokens == 9  # sized exactly
    assert prompts[2].target_tokens == 9 and second.hash_ids == (1, 2)
    assert second.block_tokens == 512 and first.block_tokens is None
    assert second.answer is None  # recorded, but the server's answer is the history
    # a turn without output_tokens asks for its answer's length, else the workload's
    assert [p.output_tokens for p in prompts] == [4, 3, 2, 4]
    assert prompts[1].source is not None and prompts[1].source.endswith("s.jsonl:2")


def test_replay_sends_the_files_answers_and_needs_one_per_turn(tmp_path) -> None:
    lines = [dict(line, answer="Yes.") for line in LINES]
    _, prompts = prepare(SessionsDataset(path=write(tmp_path, lines), replay_answers=True))
    assert all(p.session is not None and p.session.answer == "Yes." for p in prompts)
    with pytest.raises(ConfigError, match=r"s\.jsonl:1: replay_answers = true .* no answer"):
        SessionsDataset(path=write(tmp_path), replay_answers=True).build(None)  # type: ignore[arg-type]


def test_rows_keeps_the_first_sessions(tmp_path) -> None:
    queries, _ = prepare(SessionsDataset(path=write(tmp_path), rows=1))
    assert [q.id for q in queries] == ["a.t1", "a.t2"]


@pytest.mark.parametrize(("line", "message"), [
    ({"turn": 1, "input_tokens": 3}, ":5: no session"),
    ({"session": "b", "turn": 0, "input_tokens": 3}, ":5: turn must be a whole number from 1"),
    ({"session": "b", "turn": 2, "input_tokens": 3}, ":5: session b: turn 2 follows turn 0"),
    ({"session": "b", "turn": 1}, ":5: give the turn's messages or its input_tokens"),
    ({"session": "b", "turn": 1, "input_tokens": 3, "messages": [
        {"role": "user", "content": "x"}]}, ":5: give the turn's messages or its input"),
    ({"session": "b", "turn": 1, "input_tokens": 3, "role": "assistant"},
     ":5: role 'assistant' is not one of system, user, tool"),
    ({"session": "b", "turn": 1, "input_tokens": 3, "think_ms": -1}, ":5: think_ms -1"),
    ({"session": "b", "turn": 1, "input_tokens": 3, "hash_ids": [1, -2]}, ":5: hash_ids"),
    ({"session": "b", "turn": 1, "messages": [{"role": "user", "content": ""}]},
     r":5: messages\[0\] must have a role"),
    ({"session": "b", "turn": 1, "input_tokens": 3, "after": ["t4"]},
     ":5: turn b.t1 waits for b.t4, which is not an earlier turn of its session"),
    ({"session": "a", "turn": 2, "input_tokens": 3}, ":5: turn a.t2 is given twice"),
])
def test_a_bad_line_is_refused_with_its_file_and_line(tmp_path, line, message) -> None:
    with pytest.raises(ConfigError, match=message):
        SessionsDataset(path=write(tmp_path, [*LINES, line])).build(None)  # type: ignore[arg-type]


def test_a_session_past_the_capacity_is_refused_at_the_turn_that_overflows(tmp_path) -> None:
    with pytest.raises(ConfigError, match=r"s\.jsonl:3: session a: its conversation reaches "
                                          r"23 tokens .* at turn a\.t2, over the capacity 20"):
        prepare(SessionsDataset(path=write(tmp_path)), capacity=20)
