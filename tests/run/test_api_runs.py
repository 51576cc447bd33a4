"""Whole runs over the new APIs against kvlab serve (the toy, in process): an embeddings
sweep of batch and concurrency, sessions continued by the server
(``previous_response_id``) and sessions over Messages, and Responses beside chat
compared."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kvlab.run.runner import RunOutput, RunRequest, run_experiment
from kvlab.rundir import Record, read_records
from tests.experiments import embedded, experiment

SESSIONS = {"kind": "random-sessions", "sessions": 2, "turns": {"value": 3},
            "input": {"value": 8}, "output": {"value": 4}}


def run(tmp_path: Path, *modes: Any, **tables: Any) -> Any:
    path = experiment("apis", *modes, **tables).write(tmp_path)
    return run_experiment(RunRequest(path), RunOutput(tmp_path / "runs", html=False))


def measured(result: Any) -> list[Record]:
    return [r for r in read_records(result.run_dir.records_path) if not r.warmup]


def test_an_embeddings_sweep_measures_inputs_per_second_by_batch_and_load(tmp_path: Path
                                                                          ) -> None:
    result = run(tmp_path,
                 embedded("b1", "openai-embeddings", stream=False, batch=1),
                 embedded("b4", "openai-embeddings", stream=False, batch=4),
                 workload=dict(queries=4, capacities=[256], output_tokens=4),
                 load=dict(kind="concurrency", values=[1, 2], requests=4),
                 compare=[("b4", "b1")])
    rows = measured(result)
    assert {(r.mode, r.inputs) for r in rows} == {("b1", 1), ("b4", 4)}
    assert all(r.vectors == r.inputs and r.dimensions == [r.dimension_expected]
               for r in rows)  # the toy's width, as /v1/models declares it
    assert result.evaluation.counts["refused_rows"] == 0
    batched = next(r for r in rows if r.mode == "b4")
    assert len(batched.body["input"]) == 4 and batched.body["input"][0] == batched.prompt
    by = {(s.mode, s.load): s for s in result.evaluation.summaries}
    assert set(by) == {("b1", "c=1"), ("b1", "c=2"), ("b4", "c=1"), ("b4", "c=2")}
    for s in by.values():
        figures = s.to_json()
        assert figures["inputs_per_s"] > 0 and figures["input_tokens_per_s"] > 0
        assert figures.get("tokens_per_second") is None  # nothing generated
    report = result.run_dir.report_path.read_text()
    assert "## Embeddings" in report and "| b4 | 4 | 256 | c=2 |" in report
    assert "kvlab memory" in report  # says what was measured instead


@pytest.fixture(scope="module")
def sessions(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """One sessions run over four modes of one API each: Responses with the history
    kept by the server, Responses, Messages and chat resending it."""
    return run(tmp_path_factory.mktemp("sessions"),
               embedded("kept", "openai-responses", history="server"),
               embedded("responses", "openai-responses"),
               embedded("messages", "anthropic-messages"),
               embedded("chat", "openai-chat"),
               workload=dict(capacities=[512], output_tokens=4), dataset=SESSIONS,
               load=dict(kind="sessions", values=[1]),
               compare=[("kept", "responses"), ("responses", "chat"), ("messages", "chat")])


def test_sessions_continued_by_the_server_send_only_each_new_turn(sessions: Any) -> None:
    rows = measured(sessions)
    assert sessions.evaluation.counts["refused_rows"] == 0 and len(rows) == 24
    later = [r for r in rows if r.turn and r.turn > 1]
    kept = [r for r in later if r.mode == "kept"]
    assert all(r.previous_response_id and len(r.body["input"]) == 1 for r in kept)
    assert all(r.previous_response_id is None for r in later if r.mode != "kept")
    by_turn = {(r.mode, r.session, r.turn): r for r in rows}
    for r in kept:  # each continues the answer before it, and the prompt still grows
        before = by_turn[(r.mode, r.session, r.turn - 1)]
        assert r.previous_response_id == before.response_id
        assert r.prompt_tokens > before.prompt_tokens + before.output_tokens  # type: ignore[operator]


def test_every_api_sends_the_same_work_and_the_pairs_are_compared(sessions: Any) -> None:
    """The server rebuilt exactly the history it kept; Messages and Responses hold the
    same prompts as chat, turn by turn."""
    rows = measured(sessions)
    modes = ("kept", "responses", "messages", "chat")
    prompts = {m: sorted((r.session, r.turn, r.prompt_tokens) for r in rows if r.mode == m)
               for m in modes}
    assert all(prompts[m] == prompts["chat"] for m in modes), prompts
    by = {(c.a, c.b): c for c in sessions.evaluation.comparisons}
    assert set(by) == {("kept", "responses"), ("responses", "chat"), ("messages", "chat")}
    assert all(c.status == "ok" and c.pair is not None for c in by.values()), [
        (c.a, c.b, c.status, c.reasons) for c in by.values()]  # intervals
