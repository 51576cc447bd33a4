"""The sharegpt kind: the first human turn as the prompt, the answer's length as the
output; with turns > 1, each turn sends the earlier turns and answers."""

from __future__ import annotations

import json

import pytest

from kvlab.errors import ConfigError
from tests.bench.plan.kinds import experiment_with, prepare

CONVERSATIONS = [
    {"id": "c1", "conversations": [
        {"from": "system", "value": "Be brief."},
        {"from": "human", "value": "What is prefill?"},
        {"from": "gpt", "value": "Computing the prompt's keys and values."},
        {"from": "human", "value": "And decode?"},
        {"from": "gpt", "value": "One token at a time."}]},
    {"id": "c2", "conversations": [
        {"role": "user", "content": "Name a cache."},
        {"role": "assistant", "content": "KV."}]},
]


def write(tmp_path, conversations=CONVERSATIONS) -> None:
    (tmp_path / "s.json").write_text(json.dumps(conversations, indent=2))


def test_the_first_human_turn_is_the_prompt_and_the_answer_sizes_the_output(tmp_path) -> None:
    write(tmp_path)
    experiment = experiment_with(tmp_path, 'kind = "sharegpt"\npath = "s.json"')
    c1, c2 = prepare(experiment)
    assert (c1.query_id, c1.prompt) == ("c1", "What is prefill?")
    assert c1.output_tokens == len("Computing the prompt's keys and values.")  # bytes
    assert c2.output_tokens == len("KV.")
    assert c1.conversation is None and c1.source.endswith("s.json:2")


def test_answers_are_clipped_to_the_output_bounds(tmp_path) -> None:
    write(tmp_path)
    experiment = experiment_with(tmp_path, 'kind = "sharegpt"\npath = "s.json"\n'
                                 "min_output_tokens = 4\nmax_output_tokens = 10")
    assert [p.output_tokens for p in prepare(experiment)] == [10, 4]


def test_turn_k_sends_the_earlier_turns_and_their_answers(tmp_path) -> None:
    write(tmp_path)
    experiment = experiment_with(tmp_path, 'kind = "sharegpt"\npath = "s.json"\nturns = 3')
    t1, t2, c2 = prepare(experiment)
    assert [p.query_id for p in (t1, t2, c2)] == ["c1.t1", "c1.t2", "c2.t1"]
    assert t2.prompt == ("What is prefill?\n\nComputing the prompt's keys and values.\n\n"
                         "And decode?")
    assert t2.prompt.startswith(t1.prompt)  # a prefix cache can answer turn 1's part
    assert (t1.conversation, t1.turn, t2.turn) == ("c1", 1, 2)
    assert t2.output_tokens == len("One token at a time.")


@pytest.mark.parametrize(("conversation", "message"), [
    ({"id": "c3", "conversations": [{"from": "gpt", "value": "hello"}]},
     "no prompt: conversation c3 does not open with a human turn"),
    ({"id": "c4", "conversations": [{"from": "human", "value": "hi"}]},
     "conversation c4: its first human turn has no answer"),
    ({"id": "c5"}, "no prompt: the conversation has no 'conversations' list"),
])
def test_a_bad_conversation_is_named_at_its_line(tmp_path, conversation, message) -> None:
    write(tmp_path, [CONVERSATIONS[1], conversation])
    experiment = experiment_with(tmp_path, 'kind = "sharegpt"\npath = "s.json"')
    with pytest.raises(ConfigError) as info:
        experiment.workload.source()
    line = (tmp_path / "s.json").read_text().splitlines().index("  {", 2) + 1
    assert str(info.value).startswith(f"{tmp_path / 's.json'}:{line}: {message}")
