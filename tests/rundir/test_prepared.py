"""prepared.json: the prompts per capacity, saved and read back by their types."""

from __future__ import annotations

import asyncio
import json

import pytest

from kvlab.bench.plan.workload import builtin_queries, prepare_capacity
from kvlab.rundir import Prepared, PreparedPrompt, SessionTurn, Sizing


async def byte_tokens(text: str) -> int:
    return len(text.encode())


def test_prepared_round_trip(tmp_path) -> None:
    _, prompts = asyncio.run(prepare_capacity(byte_tokens, builtin_queries(2), 256, 0.5, 8))
    prepared = Prepared(2, ["a"], [256], 8, 0.5, {256: 100}, {256: prompts})
    prepared.save(tmp_path / "prepared.json")
    again = Prepared.load(tmp_path / "prepared.json")
    assert again == prepared


def test_a_sessions_turn_and_the_sizing_read_back_as_their_types(tmp_path) -> None:
    turn = SessionTurn("s1", 2, think_ms=1.5, messages=(("user", "hi"),), after=("s1.t1",),
                       hash_ids=(1, 2), block_tokens=16)
    prompts = [PreparedPrompt("s1.t2", "hi", "hi", "ab", 3, session=turn, blocks=["1", "2"]),
               PreparedPrompt("q2", "y", "p y", "cd", 11)]
    prepared = Prepared(2, ["a"], [512], 32, 0.5, {512: 100}, {512: prompts},
                        {512: Sizing("tokenizer-file", "t.json", "f" * 64)})
    prepared.save(tmp_path / "prepared.json")
    data = json.loads((tmp_path / "prepared.json").read_text())
    assert data["prompts"]["512"][0]["session"] == {  # defaults left out of the file
        "session": "s1", "index": 2, "think_ms": 1.5, "messages": [["user", "hi"]],
        "after": ["s1.t1"], "hash_ids": [1, 2], "block_tokens": 16}
    assert "session" not in data["prompts"]["512"][1]
    again = Prepared.load(tmp_path / "prepared.json")
    assert again == prepared and again.dumps() == prepared.dumps()
    assert again.prompts[512][0].session == turn and again.sizing[512].method == "tokenizer-file"


def test_a_prepared_file_that_does_not_read_names_the_key(tmp_path) -> None:
    path = tmp_path / "prepared.json"
    path.write_text(json.dumps({"queries_per_mode": 1, "modes": [], "capacities": [256],
                                "output_tokens": 8, "prompt_fraction": 0.5,
                                "padding_tokens": {"256": 1}, "prompts": {"256": [{}]}}))
    with pytest.raises(ValueError, match="query_id"):
        Prepared.load(path)
