"""The shipped sessions experiments, run end to end against kvlab serve and llama-server
(Gemma 3 270M on both): sessions-chat at the issue's bar (4 sessions of 4 turns, all 4
at once, shorter answers), sessions-agent as shipped. The checks are on what was sent,
what the servers counted and cached, and when turns left; the one comparison of times
is the issue's bar, a cached turn against a whole prefill several times its size."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import pytest

from kvlab.analysis.checks import SESSIONS
from kvlab.analysis.sessions import SessionsCell
from kvlab.analysis.stats import percentile
from kvlab.run.runner import RunOutput, RunRequest, run_experiment
from kvlab.rundir import Record, read_records
from kvlab.serve.chat import ChatTemplate
from kvlab.servers.chat_template import LLAMACPP_CHATML
from tests.experiments import Mode, experiment

EXPERIMENTS = Path(__file__).resolve().parents[2] / "experiments"
MODES = ["kvlab-cache", "kvlab-no-cache", "llama-cache", "llama-no-cache"]
THINK_P95_MS = 5.0  # the bar: think time within 5 ms of the asked at p95


def shrunk_chat(tmp_path: Path) -> Path:
    """sessions-chat.toml with 4 sessions of 4 turns, 4 at once, 8-token answers
    (the shipped file: 8 sessions, 16-token answers, 1..8 at once)."""
    data: dict[str, Any] = tomllib.loads((EXPERIMENTS / "sessions-chat.toml").read_text())
    dataset = {**data["workload"].pop("dataset"), "sessions": 4, "turns": {"value": 4},
               "output": {"value": 8}}
    modes = [Mode(m["name"], m["server"], m["api"], m.get(m["server"], {}),
                  m.get("body", {})) for m in data["modes"]]
    return experiment(data["name"], *modes, workload={**data["workload"], "dataset": dataset},
                      protocol=data["protocol"], load={**data["load"], "values": [4]},
                      compare=[tuple(p) for p in data["compare"]]).write(tmp_path)


def cells(result: Any) -> dict[str, SessionsCell]:
    return {c.mode: c for c in result.evaluation.found(SESSIONS)}


def measured(result: Any) -> list[Record]:
    return [r for r in read_records(result.run_dir.records_path) if not r.warmup]


@pytest.fixture(scope="module")
def chat(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """One run of the four modes of sessions-chat at N = 4 sessions of 4 turns."""
    tmp = tmp_path_factory.mktemp("sessions-chat")
    return run_experiment(RunRequest(shrunk_chat(tmp)), RunOutput(tmp / "runs", html=False))


@pytest.mark.slow
@pytest.mark.llamacpp
def test_sessions_chat_sends_every_turn_with_the_servers_own_history(chat) -> None:
    assert chat.evaluation.counts["refused_rows"] == 0
    by = cells(chat)
    assert list(by) == MODES
    for cell in by.values():
        assert [(i.index, i.sent, i.valid) for i in cell.by_index] == [
            (k, 4, 4) for k in range(1, 5)]
        assert cell.not_sent == 0 and cell.growth_checked == 12 and cell.think_checked == 12
    rows = measured(chat)
    for mode in MODES:
        second = next(r for r in rows if r.mode == mode and r.turn == 2)
        first = next(r for r in rows if r.mode == mode and r.turn == 1
                     and r.session == second.session)
        assert second.body["messages"][1] == {"role": "assistant", "content": first.text}
    assert "## Sessions" in chat.run_dir.report_path.read_text()


@pytest.mark.slow
@pytest.mark.llamacpp
def test_kvlab_serves_each_turns_history_from_its_prefix_cache(chat) -> None:
    """The bar: from turn 2 on, each turn's cached tokens cover at least the previous
    turn's whole prompt rounded down to a block; turn 4 with the cache is quicker to
    its first token than turn 1 of the same session without it."""
    by = cells(chat)
    on = by["kvlab-cache"]
    assert on.kept_previous == (12, 12), [
        (t.query_id, t.cached_tokens, t.previous_prompt) for t in on.turns]
    assert on.drift == []  # exactly the history's prediction, turn by turn
    ttft = {(c.mode, t.session, t.index): t.ttft_ms for c in by.values() for t in c.turns}
    for s in sorted({t.session for t in on.turns}):
        cached, whole = ttft[("kvlab-cache", s, 4)], ttft[("kvlab-no-cache", s, 1)]
        assert cached is not None and whole is not None and cached < whole, (s, cached, whole)
    assert (by["llama-cache"].by_index[1].cached_share or 0) > 0.5
    for off in ("kvlab-no-cache", "llama-no-cache"):
        assert all(t.cached_tokens == 0 for t in by[off].turns)
        assert len(by[off].drift) == 12  # the history predicted what nothing kept


@pytest.mark.slow
@pytest.mark.llamacpp
def test_prompts_grow_by_exactly_the_history_sent_on_both_servers(chat, gemma_tokenizer
                                                                  ) -> None:
    """The bar: on every turn, each server counts exactly the conversation kvlab sent
    (its earlier answers as text, the new input sized exactly), rendered with the
    ChatML template both servers use and tokenized by Gemma's tokenizer; so every
    prompt grows by exactly what was added. Where a turn's growth is not its previous
    answer's output count + its new input + the usual template tokens, the analysis
    names it, and only for an answer that ends on a mark (Gemma merges it with
    ``<|im_end|>``'s ``<``)."""
    template = ChatTemplate(LLAMACPP_CHATML)
    rows = measured(chat)
    assert len(rows) == 4 * 16
    for r in rows:
        prompt = template.render({"messages": r.body["messages"]})
        assert len(gemma_tokenizer.encode(prompt)) == r.prompt_tokens, (r.mode, r.query_id)
    by = cells(chat)
    for cell in by.values():
        assert cell.growth_checked == 12
        assert all("ends in" in line for line in cell.growth_off), cell.growth_off
    assert len({tuple(c.overhead.items()) for c in by.values()}) == 1


@pytest.mark.slow
@pytest.mark.llamacpp
def test_think_time_is_kept_within_5_ms_at_p95(chat) -> None:
    """The bar: a turn leaves its think time after the previous answer ended, within
    5 ms at p95 over the run's 48 turns that thought (the client's own timing, whatever
    the server). Load-sensitive: on 2 shared cores at load average 3 to 5, most turns
    leave within 0.3 ms and one in ten 3 to 11 ms late (the process not scheduled), so
    a mode's own p95 over its 12 turns is its worst turn or two."""
    errors = [abs(t.think_ms - t.think_asked_ms) for c in chat.evaluation.found(SESSIONS)
              for t in c.turns if t.think_ms is not None and t.think_asked_ms is not None]
    assert len(errors) == 48
    p95 = percentile(errors, 95)
    assert p95 <= THINK_P95_MS, (p95, {c.mode: c.think_error_p95_ms
                                        for c in chat.evaluation.found(SESSIONS)})


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
