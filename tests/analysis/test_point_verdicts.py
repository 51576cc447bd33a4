"""The server's counters as verdicts on whole points: prefix-cache hits no request
allowed refuse the point (rows counted or not); counters that disagree with the records
flag it, and refuse it under --strict."""

from __future__ import annotations

from kvlab.analysis.evaluate import evaluate
from kvlab.analysis.point_verdicts import point_verdicts
from kvlab.analysis.run_view import EvaluateOptions, RunView
from kvlab.analysis.server_counters import point_counters
from kvlab.analysis.valid_rows import judge
from kvlab.analysis.validate import Reason
from kvlab.rundir import GaugeSample
from tests.rows import row

OFF = {"cache_prompt": False}


def _reading(phase: str, position: int, load: str | None, **counters: float) -> GaugeSample:
    return GaugeSample(mode="a", capacity=512, load=load, t_ns=position * 10**9,
                       samples={f"vllm:{k}": v for k, v in counters.items()},
                       phase=phase, position=position)  # type: ignore[arg-type]


ZERO = {"prompt_tokens_total": 0.0, "generation_tokens_total": 0.0,
        "prefix_cache_queries_total": 0.0, "prefix_cache_hits_total": 0.0}


def _point(load: str | None, first: int, *, hits: float = 0.0, generated: float = 128.0
           ) -> tuple[list, list[GaugeSample]]:
    """Two rows of 250 prompt and 64 output tokens (no cached-token count, as vLLM
    without --enable-prompt-tokens-details) and the readings around them."""
    rows = [row(load=load, query_id=f"q{i}", position=first + i, body=OFF,
                cached_tokens=None) for i in range(2)]
    end = {**ZERO, "prompt_tokens_total": 500.0, "generation_tokens_total": generated,
           "prefix_cache_queries_total": 500.0, "prefix_cache_hits_total": hits}
    return rows, [_reading("start", first, load, **ZERO), _reading("end", first + 2, load,
                                                                   **end)]


def test_prefix_cache_hits_refuse_the_point_whose_rows_carry_no_count() -> None:
    clean_rows, clean = _point("c=1", 0)
    hit_rows, hit = _point("c=2", 2, hits=448.0)
    (verdict,) = point_verdicts(point_counters(clean_rows + hit_rows, clean + hit))
    assert verdict.refuses and verdict.reason == Reason.PREFIX_REUSE
    assert verdict.load == "c=2" and verdict.positions == (2, 4)
    assert "vllm:prefix_cache_hits_total rose by 448" in verdict.detail
    valid = judge(clean_rows + hit_rows, [verdict])
    assert [r.load for r in valid.rows] == ["c=1", "c=1"]
    groups = valid.groups()
    assert groups[("a", 512, "c=2")].count.describe() == "0 valid of 2 (refused: 2 prefix_reuse)"
    assert groups[("a", 512, "c=1")].count.describe() == "2 valid of 2"
    (refusal, _) = [v for v in valid.violations]
    assert refusal.detail.startswith("point c=2: the server's vllm:prefix_cache_hits_total")


def test_hits_where_reuse_was_allowed_are_no_verdict() -> None:
    rows, gauges = _point(None, 0, hits=448.0)
    allowed = [r.model_copy(update={"body": {"cache_prompt": True}}) for r in rows]
    assert point_verdicts(point_counters(allowed, gauges)) == []


def test_a_generation_counter_that_differs_flags_the_point_and_strict_refuses_it() -> None:
    rows, gauges = _point("c=2", 0, generated=132.0)  # 4 tokens the records do not show
    counters = point_counters(rows, gauges)
    (flag,) = point_verdicts(counters)
    assert not flag.refuses and flag.reason == Reason.COUNTERS_DIFFER
    assert flag.detail.startswith("Δ vllm:generation_tokens_total = 132 but the records "
                                  "sum to 128")
    flagged = judge(rows, [flag])
    assert len(flagged.rows) == 2 and flagged.flagged
    assert flagged.count.flags == (flag.describe(),)
    (strict,) = point_verdicts(counters, strict=True)
    assert strict.refuses and "refused (--strict)" in strict.detail
    assert judge(rows, [strict]).count.refused == {"counters_differ": 2}


def test_every_output_of_the_evaluation_carries_the_verdicts() -> None:
    reused, g1 = _point("c=1", 0, hits=64.0)
    differs, g2 = _point("c=2", 2, generated=130.0)
    ev = evaluate(RunView(reused + differs, [], gauges=g1 + g2))
    doc = ev.to_json()
    assert [(v["load"], v["reason"], v["refuses"]) for v in doc["point_verdicts"]] == [
        ("c=1", "prefix_reuse", True), ("c=2", "counters_differ", False)]
    assert doc["valid"]["refused"] == {"prefix_reuse": 2} and len(doc["valid"]["flags"]) == 1
    c1, c2 = ev.summaries
    assert (c1.queries, c2.queries) == (0, 2) and c2.count.flags and not c1.count.flags
    assert doc["load"][1]["count"]["flags"] == list(c2.count.flags)
    strict = evaluate(RunView(reused + differs, [], gauges=g1 + g2),
                      options=EvaluateOptions(strict=True))
    assert strict.valid.count.refused == {"prefix_reuse": 2, "counters_differ": 2}
    assert strict.to_json()["strict"] is True


def _failed(load: str | None, position: int):  # type: ignore[no-untyped-def]
    """A row that timed out before any count came back."""
    from kvlab.rundir import Outcome

    return row(load=load, query_id="qx", position=position, body=OFF, cached_tokens=None,
               outcome=Outcome.TIMEOUT, prompt_tokens=None, output_tokens=None,
               error="no complete answer within 120 s")


def test_a_failed_row_leaves_the_check_to_the_finished_rows_and_says_so() -> None:
    rows, gauges = _point("c=2", 0, generated=100.0)  # 128 generated by the records
    rows.append(_failed("c=2", 2))
    gauges[1] = gauges[1].model_copy(update={"position": 3})
    (point,) = point_counters(rows, gauges)
    assert point.generation.status == "differs", point.generation
    assert "1 failed row" in point.generation.why
    assert point.prompt.status == "equal" and "1 failed row" in point.prompt.why
    (verdict,) = point_verdicts([point])
    assert verdict.reason == Reason.COUNTERS_DIFFER and not verdict.refuses
    assert "1 failed row" in verdict.detail
    (strict,) = point_verdicts([point], strict=True)
    assert strict.refuses


def test_a_failed_metrics_read_is_named_on_the_point_and_reuse_is_not_judged() -> None:
    rows, gauges = _point("c=2", 0)
    end = gauges[1].model_copy(update={"samples": {}, "error": "ReadTimeout after 2 s"})
    (point,) = point_counters(rows, [gauges[0], end])
    assert point.unread == "ReadTimeout after 2 s"
    verdicts = point_verdicts([point])
    assert [v.reason for v in verdicts] == [Reason.COUNTERS_UNREAD], verdicts
    (verdict,) = verdicts
    assert "ReadTimeout after 2 s" in verdict.detail and "reuse not judged" in verdict.detail
    assert not verdict.refuses and point_verdicts([point], strict=True)[0].refuses
    valid = judge(rows, verdicts)
    assert valid.groups()[("a", 512, "c=2")].count.flags  # never silently valid
