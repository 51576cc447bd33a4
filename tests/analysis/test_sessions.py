"""Sessions measured: a sessions load run through the in-memory driver (it keeps a
prefix cache of words) and judged like any run."""

from __future__ import annotations

import json

import pytest

from kvlab.analysis.checks import SESSIONS
from kvlab.analysis.valid_rows import judge
from kvlab.analysis.validate import Reason
from kvlab.bench.drivers.memory import MemorySettings
from kvlab.report import plots
from kvlab.report.sessions import sessions_body
from kvlab.run.planner import RunRequest, plan_new
from kvlab.run.runner import evaluate_run
from kvlab.store.rundir import RunDir
from tests.experiments import experiment
from tests.run.test_executor import memory, no_socket, run  # noqa: F401


def sessions_run(tmp_path, driver: MemorySettings, dataset=None, values=(2,)):
    path = experiment("s", memory(api="openai-chat"), workload=dict(
        capacities=[1024], output_tokens=4, warmup=0,
        dataset=dataset or dict(kind="random-sessions", sessions=3, turns={"value": 3},
                                first_input={"value": 40}, input={"value": 8},
                                think_ms=2)),
        protocol=dict(cache_prompt=True),
        load=dict(kind="sessions", values=list(values))).write(tmp_path)
    return run(tmp_path, plan_new(RunRequest(path)), driver=driver.build())


def test_per_turn_figures_growth_cache_and_think_times(tmp_path) -> None:
    run_dir = sessions_run(tmp_path, MemorySettings(ttft_ms=1, itl_ms=0.5,
                                                    prefix_cache=True, prefix_block=1))
    evaluation = evaluate_run(run_dir.path)
    (cell,) = evaluation.found(SESSIONS)
    assert (cell.mode, cell.capacity, cell.load) == ("a", 1024, "sessions=2")
    assert [(i.index, i.sent, i.valid) for i in cell.by_index] == [(1, 3, 3), (2, 3, 3),
                                                                    (3, 3, 3)]
    assert all(i.ttft_ms.count == 3 for i in cell.by_index)
    # the driver counts words: every turn grew by the answer and its new input exactly
    assert cell.overhead == {"user": 0} and cell.growth_checked == 6
    assert cell.growth_off == []
    # its cache holds every earlier prompt and answer: from turn 2 on the whole history
    assert cell.kept_previous == (6, 6)
    t2 = next(t for t in cell.turns if t.query_id == "s00.t2")
    assert t2.previous_prompt is not None and t2.cached_tokens == t2.previous_prompt + 4 - 1
    assert t2.predicted == (t2.previous_prompt + 4 - 1) // 16 * 16
    assert t2.predicted_by == "history" and t2.drift is None
    assert cell.think_checked == 6 and cell.think_error_p95_ms is not None
    assert all(r.planned == r.sent == r.valid == 3 and r.ended is None for r in cell.runs)
    assert all(r.total_ms >= r.waiting_ms > 0 for r in cell.runs)
    saved = json.loads((run_dir.path / "evaluation.json").read_text())["sessions"]
    assert saved[0]["by_index"][2]["cached_share"] == cell.by_index[2].cached_share
    body = sessions_body(evaluation.found(SESSIONS))
    assert "| 3 | 3 | 3 |" in body and "6 of 6 turns grew by exactly" in body
    png = plots.sessions_by_turn(evaluation.found(SESSIONS))
    assert png is not None and png.startswith(b"\x89PNG")


def test_a_refused_turn_ends_its_session_and_its_other_turns_count_as_not_sent(
        tmp_path) -> None:
    run_dir = sessions_run(tmp_path, MemorySettings(ttft_ms=1, itl_ms=0.5,
                                                    refuse=("s01.t2",)))
    evaluation = evaluate_run(run_dir.path)
    (cell,) = evaluation.found(SESSIONS)
    ended = {r.session: r for r in cell.runs}
    assert ended["s01"].ended is not None and ended["s01"].ended.startswith(
        "s01.t2: output_tokens: 3 output tokens, 4 requested")
    assert (ended["s01"].sent, ended["s01"].not_sent) == (2, 1)
    assert ended["s00"].ended is None and cell.not_sent == 1
    assert [(i.index, i.sent, i.valid) for i in cell.by_index] == [(1, 3, 3), (2, 3, 2),
                                                                    (3, 2, 2)]
    body = sessions_body(evaluation.found(SESSIONS))
    assert "1 ended by a refused turn, 1 turns not sent" in body


def test_a_turn_sent_after_a_refused_turn_of_its_session_is_refused(tmp_path) -> None:
    run_dir = sessions_run(tmp_path, MemorySettings(ttft_ms=1, itl_ms=0.5))
    records = RunDir.open(run_dir.path).records
    turn1 = next(r for r in records if r.query_id == "s02.t1")
    broken = [r.model_copy(update={"output_tokens": 1}) if r is turn1 else r
              for r in records]  # as if validation had refused it after the run
    valid = judge(broken)
    reasons = {(v.query_id, str(v.reason)) for v in valid.violations}
    assert reasons == {("s02.t1", "output_tokens"), ("s02.t2", str(Reason.SESSION_ENDED)),
                       ("s02.t3", str(Reason.SESSION_ENDED))}
    assert len(valid.rows) == len(records) - 3


@pytest.mark.parametrize("values", [(1,), (3,)])
def test_every_session_runs_once_per_point_whatever_the_sessions_at_once(
        tmp_path, values) -> None:
    run_dir = sessions_run(tmp_path, MemorySettings(ttft_ms=1, itl_ms=0.5), values=values)
    rows = [r for r in RunDir.open(run_dir.path).records if not r.warmup]
    assert sorted(r.query_id for r in rows) == sorted(
        f"s0{s}.t{k}" for s in range(3) for k in range(1, 4))


def test_the_usual_template_overhead_is_read_after_answers_no_marker_merges_with() -> None:
    """Gemma merges an answer's last mark with ChatML's ``<|im_end|>``: turns after such
    answers grow one token less, and are named with the character, never the usual."""
    from kvlab.analysis.session_turns import TurnFacts
    from kvlab.analysis.sessions import SessionsCell, _growth

    def turn(i: int, overhead: int, end: str) -> TurnFacts:
        return TurnFacts("s", 0, "", 2, f"s{i}.t2", None, 100, 8, 0, 20, "user",
                         growth=28 + overhead, overhead=overhead, answer_end=end)

    cell = SessionsCell("m", 1024, "sessions=1", turns=[
        turn(0, 30, "a"), turn(1, 29, "]"), turn(2, 29, ","), turn(3, 29, "."),
        turn(4, 30, "\n"), turn(5, 31, "7")])
    _growth(cell)
    assert cell.overhead == {"user": 30} and cell.growth_checked == 6
    assert [line.split(":")[0] for line in cell.growth_off] == [
        "s1.t2 rep 0", "s2.t2 rep 0", "s3.t2 rep 0", "s5.t2 rep 0"]
    assert "ends in ']'" in cell.growth_off[0] and "ends in" not in cell.growth_off[3]
