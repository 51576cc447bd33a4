"""Load summaries on hand-made Records: rates, send lag, slip flag, throughput, goodput,
each over the rows validation accepted."""

from __future__ import annotations

import pytest

from kvlab.analysis.load import (
    Slo,
    has_rate,
    load_summaries,
    max_in_flight,
    rate_of,
    send_lags_ms,
    summarize_load,
)
from kvlab.analysis.valid_rows import RowCount, judge
from kvlab.labels import parse_label
from kvlab.rundir import ApiKind, Outcome, Record

MS = 1_000_000


def row(i: int, sent_ms: float, end_ms: float, *, scheduled_ms: float | None = None,
        ttft_ms: float = 10.0, tokens: int = 4, load: str | None = "rate=2.0",
        outcome: Outcome = Outcome.OK, mode: str = "m", warmup: bool = False) -> Record:
    sent = int(sent_ms * MS)
    first = sent + int(ttft_ms * MS)
    end = int(end_ms * MS)
    return Record(
        run_id="r", mode=mode, capacity=128, query_id=f"q{i:02d}", position=i, load=load,
        warmup=warmup, api=ApiKind.LLAMACPP_COMPLETION, path="/completion", stream=True,
        prompt_sha256="x", requested_tokens=tokens,
        t_scheduled=None if scheduled_ms is None else int(scheduled_ms * MS),
        t_sent=sent, t_first_content=first, t_last_content=end, t_end=end,
        output_tokens=tokens, outcome=outcome, saw_terminator=True,
    )


def test_labels_and_rates() -> None:
    assert parse_label(None) == ("sequential", None)
    assert parse_label("c=8") == ("concurrency", 8.0)
    assert parse_label("rate=4.0") == ("rate", 4.0)
    assert rate_of([0, 500 * MS, 1000 * MS]) == pytest.approx(2.0)
    assert rate_of([5]) is None and rate_of([3, 3]) is None


def test_rates_lag_and_throughput() -> None:
    # scheduled every 500 ms (2/s); left 0, 10, 20, 30 ms late; each takes 100 ms
    rows = [row(i, 500 * i + 10 * i, 500 * i + 10 * i + 100, scheduled_ms=500 * i)
            for i in range(4)]
    s = summarize_load(judge(rows), slip_threshold_ms=25)
    assert s.kind == "rate" and s.target_rate == 2.0
    assert s.scheduled_rate == pytest.approx(2.0)
    assert s.achieved_rate == pytest.approx(4 / 1.63)  # rows / span (first send to last end)
    assert send_lags_ms(rows) == pytest.approx([0, 10, 20, 30])
    assert s.send_lag_ms["p50"] == pytest.approx(15)
    assert s.late == 1  # only the 30 ms one is over 25 ms
    assert s.slipped  # p95 = 28.5 ms > 25
    assert not summarize_load(judge(rows), slip_threshold_ms=40).slipped
    span = (1500 + 30 + 100) / 1000
    assert s.span_s == pytest.approx(span)
    assert s.request_throughput == pytest.approx(4 / span)
    assert s.output_tokens_per_s == pytest.approx(16 / span)
    assert s.goodput is None and s.slo_met is None  # no SLO given
    assert s.max_in_flight == 1


def test_goodput_counts_rows_meeting_every_slo() -> None:
    rows = [
        row(0, 0, 100, ttft_ms=10),  # meets all
        row(1, 0, 300, ttft_ms=10),  # e2e 300 > 250
        row(2, 0, 100, ttft_ms=80),  # TTFT 80 > 50
        row(3, 0, 100, ttft_ms=10, outcome=Outcome.TIMEOUT),  # failed: never good
        row(4, 0, 200, ttft_ms=20),  # meets all
    ]
    slo = Slo(ttft_ms=50, e2e_ms=250)
    s = summarize_load(judge(rows), slo=slo)
    assert s.slo_met == 2 and s.ok == 4 and s.count == RowCount(4, 5, {"failed": 1})
    assert s.span_s == pytest.approx(0.3)
    assert s.goodput == pytest.approx(2 / 0.3)
    assert s.request_throughput == pytest.approx(4 / 0.3)
    assert s.max_in_flight == 5
    # ITL: (end - first) / (tokens - 1); row 0: 90 ms / 3 = 30 ms
    assert not Slo(itl_ms=29).met(rows[0]) and Slo(itl_ms=30).met(rows[0])


def test_max_in_flight_counts_overlaps_only() -> None:
    rows = [row(0, 0, 100), row(1, 100, 200), row(2, 50, 150), row(3, 120, 130)]
    assert max_in_flight(rows) == 3  # 100..130: rows 1, 2, 3 (row 0 ended at 100)


def test_summaries_group_and_order_without_warmups() -> None:
    rows = [
        row(0, 0, 10, load="c=8", scheduled_ms=0),
        row(1, 0, 10, load="c=2", scheduled_ms=0),
        row(2, 0, 10, load=None),
        row(3, 0, 10, load="rate=1.0", scheduled_ms=0),
        row(4, 0, 10, load="c=2", warmup=True),
        row(5, 0, 10, load="c=2", mode="other"),
    ]
    summaries = load_summaries(judge(rows))
    assert [(s.mode, s.load) for s in summaries] == [
        ("m", None), ("m", "c=2"), ("m", "c=8"), ("m", "rate=1.0"), ("other", "c=2")]
    assert all(s.requests == 1 for s in summaries)
    with pytest.raises(ValueError):
        summarize_load(judge([row(0, 0, 10, warmup=True)]))


def test_achieved_rate_only_where_a_rate_exists() -> None:
    """c=16 with 16 requests: every user leaves at t = 0, a span near zero between
    sends; no rate is shown (it once read 6081 req/s). With more requests than users,
    or under a rate load, it is rows / span, the span the report states."""
    burst = [row(i, 0.001 * i, 200 + i, load="c=16", scheduled_ms=0) for i in range(16)]
    assert summarize_load(judge(burst)).achieved_rate is None
    sequential = [row(i, 100 * i, 100 * i + 50, load=None) for i in range(4)]
    assert summarize_load(judge(sequential)).achieved_rate is None
    # 2 users, 4 requests: two leave at 0, two when the first two finish at 100 ms
    closed = [row(0, 0, 100, load="c=2"), row(1, 0, 100, load="c=2"),
              row(2, 100, 220, load="c=2"), row(3, 100, 250, load="c=2")]
    s = summarize_load(judge(closed))
    assert s.span_s == pytest.approx(0.25)
    assert s.achieved_rate == pytest.approx(4 / 0.25)
    assert has_rate("rate=2.0", 1) and not has_rate("c=4", 4)
    assert has_rate("c=4", 5) and not has_rate(None, 9) and has_rate("trace=1.0", 1)
    assert not has_rate("other=3", 9)


def test_throughput_stands_on_valid_rows_over_the_points_span() -> None:
    """Issue 28: a closed loop where every second answer came back one token short.
    The short rows are refused (output_tokens), so they add neither requests nor
    tokens, but the span stays the point's: they took their time."""
    rows = [row(i, 100 * (i // 2), 100 * (i // 2) + 100, load="c=2", tokens=16)
            for i in range(8)]
    rows = [r.model_copy(update={"output_tokens": 15}) if i % 2 else r
            for i, r in enumerate(rows)]
    s = summarize_load(judge(rows))
    assert s.span_s == pytest.approx(0.4)
    assert s.count == RowCount(4, 8, {"output_tokens": 4})
    assert s.ok == 8 and s.request_throughput == pytest.approx(4 / 0.4)
    assert s.output_tokens_per_s == pytest.approx(4 * 16 / 0.4)  # not (4*16 + 4*15) / 0.4
    assert s.count.describe() == "4 valid of 8 (refused: 4 output_tokens)"
    assert s.to_dict()["count"] == {"valid": 4, "measured": 8,
                                    "refused": {"output_tokens": 4}, "flags": []}
