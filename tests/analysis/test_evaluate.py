"""Summaries, comparisons, ratio reading and evaluation.json from hand-built rows."""

from __future__ import annotations

import json

import pytest

from kvlab.analysis.evaluate import (
    SCHEMA_VERSION,
    evaluate,
    explain_ratio,
    reduction_of,
    summarize,
    write_evaluation,
)
from kvlab.analysis.run_view import RunView
from kvlab.analysis.valid_rows import ValidRows, current_rows, judge
from kvlab.rundir import Outcome
from tests.rows import MS, row


def test_ratio_of_1_2_is_a_16_67_percent_reduction() -> None:
    assert reduction_of(1.2) == pytest.approx(1 / 6)
    assert reduction_of(0.8) == pytest.approx(-0.25)
    assert "16.67 %" in explain_ratio(1.2) and "faster" in explain_ratio(1.2)
    assert "+25.00 %" in explain_ratio(0.8) and "slower" in explain_ratio(0.8)


def test_summary_fields() -> None:
    rows = [row(t_end=500 * MS), row(query_id="q02", t_end=1500 * MS, prompt_tokens=260)]
    s = summarize(judge(rows))
    assert s.queries == 2 and s.count.describe() == "2 valid of 2"
    assert s.mean("e2e_ms") == pytest.approx(1000.0)
    assert s.figure("tokens_per_second") == pytest.approx(64.0)
    assert s.figure("mean_prompt_tokens") == pytest.approx(255.0)
    assert s.mean("prefill_ms") == 90.0 and s.mean("decode_ms") == 630.0
    assert s.dist("e2e_ms")["p50"] == pytest.approx(1000.0)
    assert s.dist("e2e_ms")["p95"] == pytest.approx(1450.0)
    assert s.dist("ttft_ms")["mean"] == pytest.approx(100.0)
    assert s.dist("itl_effective_ms")["median"] == pytest.approx(10.0)
    assert s.dist("inter_delta_ms")["p50"] == pytest.approx(10.0)
    assert s.mean("content_deltas") == 64.0


def _mode(mode: str, scale: float, **overrides) -> list:
    """Two rows of one mode whose times are scaled by ``scale``."""
    out = []
    for i, qid in enumerate(("q01", "q02")):
        out.append(row(
            mode=mode, query_id=qid, position=i, t_end=int(1000 * scale) * MS,
            t_first_content=int(100 * scale) * MS, t_last_content=int(730 * scale) * MS,
            timings={"prompt_ms": 90.0 * scale, "predicted_ms": 630.0 * scale,
                     "predicted_n": 64},
            **overrides,
        ))
    return out


def test_comparison_ratio_and_reduction(tmp_path) -> None:
    records = _mode("a", 1.2) + _mode("b", 1.0)
    ev = evaluate(RunView(records, [("a", "b")], run_id="r", experiment="x"))
    (c,) = ev.comparisons
    assert c.status == "ok"
    for name in ("e2e_ms", "prefill_ms", "decode_ms", "ttft_ms", "itl_effective_ms"):
        assert c.metrics[name]["ratio"] == pytest.approx(1.2)
        assert c.metrics[name]["reduction"] == pytest.approx(1 / 6)
    write_evaluation(ev, tmp_path / "evaluation.json")
    data = json.loads((tmp_path / "evaluation.json").read_text())
    assert data["comparisons"][0]["metrics"]["e2e_ms"]["ratio"] == pytest.approx(1.2)
    assert "ttft_ms" in data["metric_definitions"]
    assert data["counts"]["measured"] == 4
    assert data["schema_version"] == SCHEMA_VERSION == 2
    assert data["valid"] == {"valid": 4, "measured": 4, "refused": {}, "flags": []}
    assert data["summaries"][0]["valid"]["measured"] == 2


def test_comparison_refuses_different_prompts() -> None:
    records = _mode("a", 1.0) + _mode("b", 1.0, prompt_sha256="t" * 64)
    ev = evaluate(RunView(records, [("a", "b")]))
    (c,) = ev.comparisons
    assert c.status == "refused" and c.metrics == {}
    assert any("prompt_differs" in reason for reason in c.reasons)
    assert sum(1 for v in ev.violations if v.other_mode == "b") == 2


def test_refused_rows_are_named_and_left_out() -> None:
    records = _mode("a", 1.0)
    records[1] = records[1].model_copy(update={"output_tokens": 10})
    ev = evaluate(RunView(records + _mode("b", 1.0), [("a", "b")]))
    s = ev.summary("a", 512)
    assert s is not None and (s.queries, s.refused) == (1, 1)
    assert [(v.mode, v.query_id, str(v.reason)) for v in ev.violations] == [
        ("a", "q02", "output_tokens")
    ]
    assert ev.comparisons[0].status == "refused"
    assert s.count.describe() == "1 valid of 2 (refused: 1 output_tokens)"
    assert ev.counts["refused_by_reason"] == {"output_tokens": 1}


def test_valid_rows_are_made_by_judge_only() -> None:
    with pytest.raises(TypeError, match=r"are made by .* only"):
        ValidRows((row(),), (row(),), ())
    valid = judge([row(), row(query_id="q02", outcome=Outcome.TIMEOUT, position=1)])
    assert [r.query_id for r in valid.rows] == ["q01"] and len(valid.sent) == 2
    assert valid.count.refused == {"failed": 1}


def test_a_retried_row_supersedes_the_failed_one() -> None:
    failed = row(outcome=Outcome.DISCONNECTED, position=0)
    retried = row(position=5)
    warm = row(warmup=True, position=1)
    assert current_rows([failed, warm, retried]) == [retried]
    ev = evaluate(RunView([failed, warm, retried], []))
    assert ev.violations == [] and ev.counts["superseded"] == 1


def _point(mode: str, load: str, scale: float, start: int, **overrides) -> list:
    """Two rows of ``mode`` at load point ``load``, times scaled by ``scale``."""
    return [row(**{**{"load": load, "position": start + i}, **overrides}, mode=mode,
                query_id=qid, t_end=int(1000 * scale) * MS,
                t_first_content=int(100 * scale) * MS, t_last_content=int(730 * scale) * MS,
                timings={"prompt_ms": 90.0 * scale, "predicted_ms": 630.0 * scale,
                         "predicted_n": 64})
            for i, qid in enumerate(("q01", "q02"))]


def test_load_points_are_summarized_and_compared_separately() -> None:
    """c=1 and c=8 rows of one (mode, capacity) are two summaries, never averaged, and
    A meets B at the same load point only."""
    records = (_point("a", "c=1", 1.0, 0) + _point("a", "c=8", 3.0, 2)
               + _point("b", "c=8", 2.0, 4) + _point("b", "c=1", 0.5, 6))
    ev = evaluate(RunView(records, [("a", "b")], mode_order=["a", "b"]))
    assert [(s.mode, s.load, s.queries) for s in ev.summaries] == [
        ("a", "c=1", 2), ("a", "c=8", 2), ("b", "c=1", 2), ("b", "c=8", 2)]
    c1, c8 = ev.summary("a", 512, "c=1"), ev.summary("a", 512, "c=8")
    assert c1 is not None and c8 is not None and ev.summary("a", 512) is None
    assert c1.mean("e2e_ms") == pytest.approx(1000.0) and c8.mean("e2e_ms") == pytest.approx(3000.0)
    assert [(c.load, c.status) for c in ev.comparisons] == [("c=1", "ok"), ("c=8", "ok")]
    assert ev.comparisons[0].metrics["e2e_ms"]["ratio"] == pytest.approx(2.0)  # 1000 / 500
    assert ev.comparisons[1].metrics["e2e_ms"]["ratio"] == pytest.approx(1.5)  # 3000 / 2000
    assert ev.to_json()["summaries"][1]["load"] == "c=8"


def test_a_refused_row_refuses_its_load_point_only() -> None:
    bad = _point("a", "c=8", 1.0, 2)
    bad[0] = bad[0].model_copy(update={"output_tokens": 10})
    ev = evaluate(RunView(_point("a", "c=1", 1.0, 0) + bad, []))
    assert [(s.load, s.queries, s.refused) for s in ev.summaries] == [
        ("c=1", 2, 0), ("c=8", 1, 1)]
    (v,) = ev.violations
    assert (v.load, v.query_id) == ("c=8", "q01") and "@ 512 c=8 q01" in str(v)


def test_load_column_only_when_the_run_has_load_points() -> None:
    from kvlab.report.comparisons import comparison_header
    from kvlab.report.summary_table import summary_header, summary_rows

    sequential = evaluate(RunView(_mode("a", 1.2) + _mode("b", 1.0), [("a", "b")]))
    assert "load" not in summary_header(sequential)
    assert "load" not in comparison_header(sequential)
    assert sequential.summaries[0].load is None and sequential.summary("a", 512) is not None
    swept = evaluate(RunView(_point("a", "c=1", 1.0, 0) + _point("b", "c=1", 1.0, 2), [("a", "b")]))
    header = summary_header(swept)
    assert header[:3] == ["mode", "capacity", "load"]
    assert summary_rows(swept)[0][:3] == ["a", "512", "c=1"]
    assert comparison_header(swept)[:3] == ["A / B", "capacity", "load"]
