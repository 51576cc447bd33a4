"""The capacity-search, prefix-cache and multi-turn sections, from an evaluation."""

from __future__ import annotations

from kvlab.analysis.capacity import Objectives, SearchPlan
from kvlab.analysis.evaluate import evaluate
from kvlab.analysis.run_view import EvaluateOptions, RunView
from kvlab.analysis.turns import TurnPlan
from kvlab.report.workloads import capacity_lines, workloads_markdown
from tests.analysis.test_capacity import point
from tests.rows import MS, row


def test_a_run_without_them_has_none_of_the_sections() -> None:
    evaluation = evaluate(RunView([row(), row(query_id="q02")], []))
    assert workloads_markdown(evaluation) == "" and capacity_lines([]) == []


def test_the_search_answer_its_rates_and_one_terminal_line() -> None:
    records, position = [], 0
    for rate in (4.0, 9.0, 11.0, 40.0):
        records += point(rate, first_position=position)
        position += 20
    search = (Objectives.of(95.0, ttft_ms=60.0), SearchPlan(4.0, 40.0))
    evaluation = evaluate(RunView(records, search=search), options=EvaluateOptions(resamples=200))
    text = workloads_markdown(evaluation)
    assert "## Capacity search" in text and "between 9 (met) and 11 (missed)" in text
    assert "| 9 | 1 | 0 | 20 of 20 | none | 20.0 | met |" in text
    (line,) = capacity_lines(evaluation.capacity)
    assert line.startswith("capacity: a @ 512: ") and "for p95 ttft_ms <= 60 ms" in line
    assert line.endswith("met at 9, missed at 11")


def test_a_rate_missed_by_its_refused_rows_says_so() -> None:
    records = point(4.0)
    records[5] = records[5].model_copy(update={"output_tokens": 3})
    search = (Objectives.of(95.0, ttft_ms=60.0), SearchPlan(4.0, 40.0))
    evaluation = evaluate(RunView(records, search=search), options=EvaluateOptions(resamples=50))
    text = workloads_markdown(evaluation)
    assert "| 4 | 1 | 0 | 19 of 20 | 1 output_tokens | 20.0 | missed (refused rows) |" in text
    below, why = capacity_lines(evaluation.capacity)
    assert "below the lowest rate tried" in below
    assert why == ("capacity: a @ 512: missed at 4 req/s by its refused rows: 19 valid of "
                   "20 (refused: 1 output_tokens), more than the 0% of requests [search] "
                   "max_refused allows")


def test_cached_rows_and_turn_growth_are_rendered() -> None:
    reuse = {"cache_prompt": True}
    records = [row(query_id=f"c.t{k}", position=k, body=reuse, prompt_tokens=n,
                   cached_tokens=c, t_first_content=t * MS)
               for k, n, c, t in ((1, 20, 0, 90), (2, 55, 19, 40))]
    plans = [TurnPlan(512, "c.t1", "c", 1, 20), TurnPlan(512, "c.t2", "c", 2, 55)]
    text = workloads_markdown(evaluate(RunView(records, [], turns=plans)))
    assert "| a | 512 | sequential | 2 | 1 | 25.3% | 40.0 / 40.0 / 40.0 (1) |" in text
    assert "c.t1 0/20, c.t2 19/55." in text
    assert "1 of 1 conversations grew as sized" in text
    assert "| a | 512 | sequential | c | 0 | 20, 55 | 20, 55 | grows as sized |" in text
