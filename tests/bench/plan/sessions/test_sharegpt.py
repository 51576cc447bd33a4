"""The sharegpt-sessions kind: each conversation a session, each human message a turn."""

from __future__ import annotations

import asyncio
import json

import pytest

from kvlab.bench.plan.lengths import Lengths
from kvlab.bench.plan.sessions.sharegpt import ShareGptSessions
from kvlab.errors import ConfigError
from tests.bench.plan.kinds import word_tokens

CONVERSATIONS = [
    {"id": "lamp", "conversations": [
        {"from": "system", "value": "You keep the lighthouse."},
        {"from": "human", "value": "When is the lamp lit?"},
        {"from": "gpt", "value": "At dusk, every day."},
        {"from": "human", "value": "And in fog?"},
        {"from": "gpt", "value": "Earlier, and the horn sounds twice."},
        {"from": "human", "value": "Thanks."}]},  # no answer: not a turn
    {"id": "ferry", "messages": [
        {"role": "user", "content": "How often does the ferry cross?"},
        {"role": "assistant", "content": "Three times a day."}]},
]


def prepared(tmp_path, **table):
    path = tmp_path / "c.json"
    path.write_text(json.dumps(CONVERSATIONS, indent=1))
    rows = ShareGptSessions(path=str(path), **table).build(None)  # type: ignore[arg-type]
    return asyncio.run(rows.prepare(word_tokens, 512, 0.5, 8))[1]


def test_each_human_message_is_a_turn_asking_for_its_answers_length(tmp_path) -> None:
    lamp1, lamp2, ferry = prepared(tmp_path, think_ms=300.0)
    assert [p.query_id for p in (lamp1, lamp2, ferry)] == ["lamp.t1", "lamp.t2", "ferry.t1"]
    assert lamp1.session is not None and lamp2.session is not None
    assert lamp1.session.messages == (("system", "You keep the lighthouse."),
                                      ("user", "When is the lamp lit?"))
    assert lamp2.session.messages == (("user", "And in fog?"),)
    assert [p.output_tokens for p in (lamp1, lamp2, ferry)] == [6, 8, 5]  # words of answers
    assert (lamp1.session.think_ms, lamp2.session.think_ms) == (0.0, 300.0)
    assert lamp2.session.answer is None  # the server's own answers are the history


def test_replay_and_drawn_think_times(tmp_path) -> None:
    think = Lengths(distribution="uniform", min=100, max=200)
    _, lamp2, _ = prepared(tmp_path, replay_answers=True, think_ms=think, max_turns=2)
    assert lamp2.session is not None and lamp2.session.answer == \
        "Earlier, and the horn sounds twice."
    assert 100 <= lamp2.session.think_ms <= 200


def test_a_conversation_without_an_answered_question_is_refused(tmp_path) -> None:
    path = tmp_path / "c.json"
    path.write_text(json.dumps([{"id": "x", "conversations": [
        {"from": "gpt", "value": "Hello"}]}]))
    with pytest.raises(ConfigError, match=r"c\.json:1: conversation x: no human message"):
        ShareGptSessions(path=str(path)).build(None)  # type: ignore[arg-type]
