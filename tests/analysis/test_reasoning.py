"""Reasoning rows: TTFT from the first token of any kind, the first answer token apart,
reasoning tokens streamed against the usage's; a row without reasoning unchanged."""

from __future__ import annotations

import pytest

from kvlab.analysis import metrics
from kvlab.analysis.evaluate import evaluate
from kvlab.analysis.reasoning import reasoning_cells
from kvlab.analysis.run_view import EvaluateOptions, RunView
from kvlab.analysis.valid_rows import judge
from kvlab.rundir import ApiKind, Record
from tests.rows import MS, row

OPENAI = {"api": ApiKind.OPENAI_CHAT, "path": "/v1/chat/completions", "timings": None}


def thinking(query: str, *, reasoning: int = 4, usage: int | None = 4,
             answer_ms: int = 140) -> Record:
    """A chat row whose first ``reasoning`` of 64 chunks (10 ms apart from 100 ms) were
    reasoning; its first answer chunk at ``answer_ms``."""
    return row(query_id=query, **OPENAI, reasoning_chunks=list(range(reasoning)),
               reasoning_text="hmm " * reasoning, t_first_answer=answer_ms * MS,
               usage_reasoning_tokens=usage)


def test_metrics_of_a_reasoning_row() -> None:
    r = thinking("q1")
    assert metrics.ttft_ms(r) == 100.0 and metrics.answer_ttft_ms(r) == 140.0
    assert metrics.reasoning_tokens(r) == 4
    assert metrics.itl_effective_ms(r) == pytest.approx(10.0)  # over every output token
    assert metrics.content_deltas(r) == 64
    not_streamed = row(**OPENAI, stream=False, usage_reasoning_tokens=7)
    assert metrics.reasoning_tokens(not_streamed) == 7  # the usage's: nothing streamed
    assert metrics.answer_ttft_ms(row()) is None  # a record from before kvlab read it


def test_streamed_chunks_are_a_lower_bound_on_reasoning_tokens() -> None:
    """A usage below the reasoning chunks streamed is wrong (vLLM 0.32 says 0): the
    streamed count is used. A usage above it may be right (two tokens in one delta, seen
    on vLLM at c=1): it is kept."""
    assert metrics.reasoning_tokens(thinking("q1", reasoning=4, usage=0)) == 4
    assert metrics.reasoning_tokens(thinking("q2", reasoning=2, usage=4)) == 4
    assert metrics.reasoning_tokens(thinking("q3", reasoning=3, usage=None)) == 3


def test_reasoning_cells_put_both_times_and_both_counts_side_by_side() -> None:
    rows = [thinking("q1"), thinking("q2", answer_ms=160),
            thinking("q3", usage=0), row(query_id="q4", **OPENAI, t_first_answer=100 * MS)]
    (cell,) = reasoning_cells(judge(rows))
    assert (cell.count.valid, cell.reasoning_rows, cell.disagreeing) == (4, 3, 1)
    assert cell.ttft_ms.p50 == 100.0
    assert cell.answer_ttft_ms.count == 4 and cell.answer_ttft_ms.max == 160.0
    assert cell.reasoning_tokens.mean == 3.0  # 4, 4, 4 and 0 streamed
    assert cell.usage_reasoning_tokens.count == 3  # the plain row's usage said nothing
    assert cell.to_dict()["answer_ttft_ms"]["p90"] == pytest.approx(154.0)


def test_no_reasoning_no_cell() -> None:
    assert reasoning_cells(judge([row(query_id="q1"), row(query_id="q2")])) == []


def test_a_run_without_reasoning_keeps_every_number() -> None:
    """The same rows as written before kvlab read reasoning (no t_first_answer, no
    reasoning fields) and as it writes them now: evaluation.json is the same."""
    old = [row(query_id=f"q{i}", mode=m, t_end=(1000 + 7 * i) * MS)
           for m in ("a", "b") for i in range(6)]
    new = [r.model_copy(update={"t_first_answer": r.t_first_content}) for r in old]
    before = evaluate(RunView(old, [("a", "b")]), options=EvaluateOptions(resamples=200)).to_json()
    after = evaluate(RunView(new, [("a", "b")]), options=EvaluateOptions(resamples=200)).to_json()
    assert after == before
    assert after["reasoning"] == [] and after["summaries"][0]["ttft_ms"]["mean"] == 100.0
