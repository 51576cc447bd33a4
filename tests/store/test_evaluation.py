"""The one evaluation of a run directory: prepared.json read by its own type into the
multi-turn plans, the session turns and a trace's blocks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvlab.analysis.session_turns import PlannedTurn
from kvlab.analysis.trace_hits import TraceBlocks
from kvlab.analysis.turns import TurnPlan
from kvlab.bench.plan.workload import PreparedPrompt
from kvlab.errors import ConfigError
from kvlab.memory.presets import shape_from_preset
from kvlab.memory.served import ServedKv
from kvlab.rundir import Prepared, RunDir, RunState, ServerEntry
from kvlab.rundir.files import PREPARED_FILE
from kvlab.rundir.session_turn import SessionTurn
from kvlab.store.evaluation import session_plans, trace_blocks, turn_plans, view_of
from tests.rows import row


def _prompt(query_id: str, tokens: int, **facts: object) -> PreparedPrompt:
    return PreparedPrompt(query_id, query_id, "text", "0" * 64, tokens, **facts)  # type: ignore[arg-type]


def _saved(tmp_path: Path) -> RunDir:
    turn = SessionTurn("s1", 2, messages=(("user", "hi"), ("tool", "x")), after=("s1/1",),
                       think_ms=5.0, hash_ids=(1, 2), block_tokens=16)
    prepared = Prepared(2, ["a"], [512], 8, 0.5, {512: 0}, {512: [
        _prompt("line1", 130, blocks=["1", "2"], block_tokens=32),
        _prompt("c1-t2", 40, conversation="c1", turn=2),
        _prompt(turn.query_id, 12, session=turn),
        _prompt("q", 10)]})
    prepared.save(tmp_path / PREPARED_FILE)
    return RunDir(tmp_path)


def test_prepared_json_gives_each_trace_rows_blocks(tmp_path: Path) -> None:
    run = _saved(tmp_path)
    assert trace_blocks(run.prepared) == {(512, "line1"): TraceBlocks(("1", "2"), 32, 130)}
    assert trace_blocks(None) == {}


def test_prepared_json_gives_the_turns_and_the_session_turns(tmp_path: Path) -> None:
    run = _saved(tmp_path)
    assert turn_plans(run.prepared) == [TurnPlan(512, "c1-t2", "c1", 2, 40)]
    [planned] = session_plans(run.prepared)
    assert planned == PlannedTurn(512, planned.query_id, "s1", "", 2, 5.0, ("s1/1",), 12,
                                  ("user", "tool"), (1, 2), None, 16)
    assert session_plans(None) == turn_plans(None) == []


def test_a_run_without_prepared_json_has_none_and_a_damaged_one_says_so(
        tmp_path: Path) -> None:
    assert RunDir(tmp_path).prepared is None
    (tmp_path / PREPARED_FILE).write_text(json.dumps({"modes": []}), encoding="utf-8")
    with pytest.raises(ConfigError, match=PREPARED_FILE):
        _ = RunDir(tmp_path).prepared


def test_the_view_of_a_run_names_each_launched_servers_kind_and_budget(
        tmp_path: Path) -> None:
    """view_of reads the manifest's servers once: the kind of each launched one (an
    endpoint kvlab did not launch has none) and the KV budget its facts recorded."""
    served = ServedKv("paged-blocks", shape_from_preset("gemma-3-270m"), "bf16", max_seqs=4,
                      block_size=16, kv_blocks=8)
    state = RunState(run_id="r1", servers=[
        ServerEntry(mode="a", capacity=512, facts={"kind": "embedded", "launched": True,
                                                   "kv_served": served.to_dict()}),
        ServerEntry(mode="b", capacity=512, facts={"kind": "vllm", "launched": False}),
        ServerEntry(mode="c", capacity=512)])
    records = [row(mode=m) for m in "abc"]
    view = view_of(RunDir(tmp_path, records=records, state=state), ("vllm",))
    assert view.servers == {("a", 512): "embedded"}
    assert view.budgets == {("a", 512): served}
    assert (view.run_id, view.mode_order, view.definition_sets) == ("r1", ["a", "b", "c"],
                                                                   ("vllm",))
    assert view.records == records and view.compare_pairs == ()
