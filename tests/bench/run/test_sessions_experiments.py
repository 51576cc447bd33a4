"""The shipped sessions experiments, run end to end against kvlab serve and llama-server
(Gemma 3 270M on both): sessions-chat cut to 2 sessions of 2 turns at once,
sessions-agent as shipped. The checks are on what was sent, what the servers counted
and cached, never on speed."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import pytest

from kvlab.bench.analysis.sessions import SessionsCell
from kvlab.bench.records import Record, read_records
from kvlab.bench.run.runner import RunOutput, RunRequest, run_experiment
from tests.experiments import Mode, experiment

EXPERIMENTS = Path(__file__).resolve().parents[3] / "experiments"


def shrunk_chat(tmp_path: Path) -> Path:
    """sessions-chat.toml with 2 sessions of 2 turns, 2 at once, shorter turns."""
    data: dict[str, Any] = tomllib.loads((EXPERIMENTS / "sessions-chat.toml").read_text())
    dataset = {**data["workload"].pop("dataset"), "sessions": 2, "turns": {"value": 2},
               "first_input": {"value": 96}, "output": {"value": 8}}
    modes = [Mode(m["name"], m["server"], m["api"], m.get(m["server"], {}),
                  m.get("body", {})) for m in data["modes"]]
    return experiment(data["name"], *modes, workload={**data["workload"], "dataset": dataset},
                      protocol=data["protocol"], load={**data["load"], "values": [2]},
                      compare=[tuple(p) for p in data["compare"]]).write(tmp_path)


def cells(result: Any) -> dict[str, SessionsCell]:
    return {c.mode: c for c in result.evaluation.sessions}


def measured(result: Any) -> list[Record]:
    return [r for r in read_records(result.run_dir.records_path) if not r.warmup]


@pytest.mark.slow
@pytest.mark.llamacpp
def test_sessions_chat_reuses_each_sessions_history_only_where_the_cache_is_on(
        tmp_path) -> None:
    result = run_experiment(RunRequest(shrunk_chat(tmp_path)),
                            RunOutput(tmp_path / "runs", html=False))
    assert result.evaluation.counts["refused_rows"] == 0
    by = cells(result)
    assert list(by) == ["kvlab-cache", "kvlab-no-cache", "llama-cache", "llama-no-cache"]
    for cell in by.values():
        assert [(i.index, i.sent, i.valid) for i in cell.by_index] == [(1, 2, 2), (2, 2, 2)]
        assert cell.not_sent == 0 and cell.growth_checked == 2 and cell.think_checked == 2
    # kvlab serve's prefix cache holds each session's first prompt and answer
    cached = [t for t in by["kvlab-cache"].turns if t.index == 2]
    assert by["kvlab-cache"].kept_previous == (2, 2)
    assert all(t.drift is None for t in cached), [t.drift for t in cached]
    assert (by["llama-cache"].by_index[1].cached_share or 0) > 0.5
    for off in ("kvlab-no-cache", "llama-no-cache"):
        assert all(t.cached_tokens == 0 for t in by[off].turns)
        assert len(by[off].drift) == 2  # the history predicted what nothing kept
    # the same Gemma tokenizer and ChatML template behind both servers: the template
    # adds as many tokens per turn to both
    assert len({tuple(c.overhead.items()) for c in by.values()}) == 1
    rows = measured(result)
    second = next(r for r in rows if r.mode == "llama-cache" and r.turn == 2)
    first = next(r for r in rows if r.mode == "llama-cache" and r.turn == 1
                 and r.session == second.session)
    assert second.body["messages"][1] == {"role": "assistant", "content": first.text}
    assert "## Sessions" in result.run_dir.report_path.read_text()


@pytest.mark.slow
@pytest.mark.llamacpp
def test_sessions_agent_replays_tool_turns_and_a_subagent_against_the_traces_blocks(
        tmp_path) -> None:
    result = run_experiment(RunRequest(EXPERIMENTS / "sessions-agent.toml"),
                            RunOutput(tmp_path / "runs", html=False))
    assert result.evaluation.counts["refused_rows"] == 0
    rows = measured(result)
    for mode in ("kvlab-serve", "llama-server"):
        by = {r.query_id: r for r in rows if r.mode == mode}
        assert len(by) == 9
        # the subagent after its parent's turn; the parent's next turn after it
        assert by["c1.sa1.t1"].t_sent >= by["c1.t2"].t_end
        assert by["c1.t3"].t_sent >= by["c1.sa1.t2"].t_end
        assert [m["role"] for m in by["c1.t3"].body["messages"]] == [
            "user", "assistant", "tool", "assistant", "tool"]
        assert [m["role"] for m in by["c1.sa1.t2"].body["messages"]] == [
            "user", "assistant", "tool"]
    by_mode = cells(result)
    kvlab = {t.query_id: t for t in by_mode["kvlab-serve"].turns}
    # kvlab serve's paged cache shares blocks across conversations: the subagent finds
    # the two blocks its hash ids share with c1's first request
    assert (kvlab["c1.sa1.t1"].cached_tokens or 0) >= kvlab["c1.sa1.t1"].predicted == 128
    assert all(t.predicted_by == "hash_ids" for t in kvlab.values())
    # only the two openings may miss what the ids predict: they start at once, and the
    # second shares blocks with the first only once the first's prefill has filled them
    assert all(d.startswith(("c1.t1 ", "c2.t1 ")) for d in by_mode["kvlab-serve"].drift)
    assert "## Sessions" in result.run_dir.report_path.read_text()
