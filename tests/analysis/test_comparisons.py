"""A/B comparisons over hand-made records with known timings."""

from __future__ import annotations

from kvlab.analysis.comparisons import compare_run
from kvlab.analysis.stats import Verdict
from kvlab.analysis.summaries import summarize_run
from kvlab.analysis.valid_rows import judge
from kvlab.report.verdicts import comparisons_markdown, intervals_markdown
from tests.report.synthetic_runs import make_row, two_mode_rows

R = 300  # bootstrap resamples: enough for verdicts on these clean data, fast


def _by_metric(comparison):  # type: ignore[no-untyped-def]
    return {c.metric: c for c in comparison.metrics}


def test_paired_comparison_reads_the_prefill_gain_and_flat_decode() -> None:
    [c256, _] = compare_run(judge(two_mode_rows(n=8)), resamples=R)
    assert (c256.mode_a, c256.mode_b, c256.capacity, c256.refused) == ("slow", "fast", 256, None)
    m = _by_metric(c256)
    assert list(m) == ["e2e_ms", "prefill_ms", "decode_ms", "ttft_ms", "itl_effective_ms"]
    assert abs(m["prefill_ms"].ratio - 2.0) < 1e-9 and m["prefill_ms"].verdict == Verdict.FASTER
    assert abs(m["prefill_ms"].reduction - 0.5) < 1e-9
    assert m["decode_ms"].verdict == Verdict.NO_DIFFERENCE
    assert m["e2e_ms"].paired and m["e2e_ms"].n == 8
    assert m["e2e_ms"].interval is not None and m["e2e_ms"].interval.low > 1.0


def test_refused_rows_are_left_out_and_pairs_use_the_common_queries() -> None:
    rows = two_mode_rows(n=8, capacities=(256,))
    bad = next(r for r in rows if r.mode == "fast" and r.query_id == "q03" and not r.warmup)
    rows[rows.index(bad)] = bad.model_copy(update={"output_tokens": 3})
    [summary_slow, summary_fast] = summarize_run(judge(rows), resamples=R)
    assert (summary_fast.rows, summary_fast.refused) == (8, 1)
    assert summary_slow.refused == 0 and summary_fast.metrics["e2e_ms"].count == 7
    [c] = compare_run(judge(rows), resamples=R)
    assert _by_metric(c)["e2e_ms"].n == 7 and _by_metric(c)["e2e_ms"].paired


def test_different_prompts_refuse_the_comparison() -> None:
    rows = two_mode_rows(n=6, capacities=(256,))
    i = next(i for i, r in enumerate(rows) if r.mode == "fast" and not r.warmup)
    rows[i] = rows[i].model_copy(update={"prompt_sha256": "0" * 64})
    [c] = compare_run(judge(rows), resamples=R)
    assert c.metrics == [] and c.refused is not None and "prompts differ" in c.refused
    assert "Refused: prompts differ" in comparisons_markdown([c])


def test_too_few_common_queries_fall_back_to_independent_samples() -> None:
    rows = [make_row("a", 256, q, prefill=20 + q, decode=30) for q in range(6)]
    rows += [make_row("b", 256, q, prefill=10 + q, decode=30) for q in range(3, 9)]
    [c] = compare_run(judge(rows), resamples=R)
    e2e = _by_metric(c)["e2e_ms"]
    assert not e2e.paired and e2e.n == 6  # 3 queries in common < 5: all valid rows


def test_intervals_markdown_names_pairs_and_verdicts() -> None:
    rows = judge(two_mode_rows(n=6, capacities=(512,)))
    text = intervals_markdown(rows, [("slow", "fast")], resamples=R)
    assert "**slow** (A) vs **fast** (B) at capacity 512, sequential" in text
    assert "| prefill_ms | " in text and "fast faster" in text
    assert "no detectable difference" in text  # decode is identical
    every = intervals_markdown(rows, [], resamples=R)
    assert "every pair of modes is compared" in every


def test_zero_values_keep_the_mean_but_give_no_interval() -> None:
    # A stream whose tokens all arrive in one chunk has an effective ITL of 0.
    rows = [make_row("a", 256, q, prefill=20, decode=30 + q) for q in range(6)]
    rows += [make_row("b", 256, q, prefill=10, decode=0 if q < 2 else 3) for q in range(6)]
    [c] = compare_run(judge(rows), resamples=R)
    itl = _by_metric(c)["itl_effective_ms"]
    assert itl.interval is None and itl.note == "some values are 0: no ratio interval"
    assert abs(itl.mean_b - 4 * 3 / 7 / 6) < 1e-6  # the zeros count in the mean
    assert "some values are 0" in comparisons_markdown([c])
    assert _by_metric(c)["prefill_ms"].interval is not None
