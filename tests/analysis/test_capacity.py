"""The capacity search's judgement, bisection and answer, on hand-built rows.

The rows model a one-slot server of service time S = 100 ms and TTFT 20 ms at rates
below 1/S; above it, request i of a constant-rate point waits i * (S - 1/rate). The
end-to-end test against the synthetic server is tests/run/test_search.py.
"""

from __future__ import annotations

import pytest

from kvlab.analysis.capacity import (
    Objective,
    Objectives,
    Probe,
    SearchPlan,
    capacity_search,
    judge_rate,
    next_rate,
    tail_percentile,
)
from kvlab.analysis.load import Slo
from kvlab.analysis.valid_rows import RowCount, ValidRows, judge
from kvlab.rundir import Outcome
from tests.rows import MS, row

S_MS, TTFT_MS, N = 100.0, 20.0, 20
P95_LIMIT_MS = 60.0


def point(rate: float, rep: int = 1, late_ms: float = 0.0, first_position: int = 0) -> list:
    """A constant-rate point on the one-slot model (``late_ms``: every send that late)."""
    label = f"rate={rate!r}#{rep}"
    out = []
    for i in range(N):
        due = i * 1000.0 / rate
        wait = max(0.0, i * (S_MS - 1000.0 / rate))
        sent = due + late_ms
        ttft = TTFT_MS + wait
        out.append(row(load=label, query_id=f"q{i:02d}", repetition=rep,
                       position=first_position + i, t_scheduled=round(due * MS),
                       t_sent=round(sent * MS), t_first_content=round((sent + ttft) * MS),
                       t_last_content=round((sent + ttft + 80) * MS),
                       t_end=round((sent + ttft + 81) * MS), chunk_ns=[]))
    return out


def exact_limit() -> float:
    """p95 TTFT = 20 + 0.95 * (N - 1) * (S - 1/rate) <= 60 ms  <=>
    rate <= 1 / (S - 40 / (0.95 * 19)) per ms."""
    margin_ms = (P95_LIMIT_MS - TTFT_MS) / (0.95 * (N - 1))
    return 1000.0 / (S_MS - margin_ms)


OBJECTIVES = Objectives.of(95.0, ttft_ms=P95_LIMIT_MS)
COUNT = RowCount(N, N)


def judged(by_point: dict[str, list]) -> dict[str, ValidRows]:
    return {label: judge(rows) for label, rows in by_point.items()}


def test_tail_percentile_is_the_linear_percentile_with_failed_rows_on_top() -> None:
    import numpy as np

    values = np.array([1.0, 2.0, 3.0, 4.0, 5.0])
    assert tail_percentile(values, 50) == 3.0 == float(np.percentile(values, 50))
    assert tail_percentile(np.array([1.0, 2.0, np.inf]), 40) == pytest.approx(1.8)
    assert tail_percentile(np.array([1.0, 2.0, np.inf]), 95) is None


def test_a_rate_is_judged_on_its_unslipped_points() -> None:
    by_point = {"rate=5.0#1": point(5.0), "rate=5.0#2": point(5.0, 2, late_ms=80.0)}
    probe, kept = judge_rate(5.0, judged(by_point), OBJECTIVES, slip_threshold_ms=50.0)
    assert probe.slipped == ["rate=5.0#2"] and probe.rows == N == len(kept)
    assert probe.count == RowCount(N, N)
    assert probe.met and probe.values["ttft_ms"] == pytest.approx(TTFT_MS)
    probe, _ = judge_rate(5.0, judged({"rate=5.0#2": point(5.0, 2, late_ms=80.0)}),
                          OBJECTIVES, 50.0)
    assert probe.met is None and probe.rows == 0


def test_goodput_counts_rows_meeting_the_slo() -> None:
    objectives = Objectives.of(95.0, goodput=0.95, slo=Slo(ttft_ms=50.0))
    rows = point(10.5)  # waits grow by 4.76 ms per request: rows 7.. miss 50 ms
    probe, _ = judge_rate(10.5, judged({"rate=10.5#1": rows}), objectives, 50.0)
    met = sum(1 for r in rows if (r.t_first_content - r.t_sent) / MS <= 50.0)
    assert probe.values["goodput"] == met / N and not probe.met
    with pytest.raises(ValueError, match="goodput objective needs a per-request SLO"):
        Objectives.of(95.0, goodput=0.9)


def test_bisection_tries_low_high_then_geometric_midpoints() -> None:
    plan = SearchPlan(low=4.0, high=40.0, precision=0.05)

    def probe(rate: float) -> Probe:
        return Probe(rate, [], [], COUNT, {}, rate <= exact_limit())

    probes: list[Probe] = []
    tried = []
    while (rate := next_rate(probes, plan)) is not None:
        tried.append(rate)
        probes.append(probe(rate))
    assert tried[:3] == [4.0, 40.0, 12.65]  # sqrt(4 * 40), 4 significant digits
    assert len(tried) <= plan.max_rates
    met = max(p.rate for p in probes if p.met)
    missed = min(p.rate for p in probes if not p.met)
    assert met <= exact_limit() < missed and (missed - met) / met <= 0.05
    assert next_rate([Probe(4.0, [], [], COUNT, {}, False)], plan) is None  # below the range


def test_the_answer_interpolates_the_bracket_within_10_percent_of_the_hand_limit() -> None:
    rates = [4.0, 40.0, 12.65, 7.113, 9.486, 10.95, 10.19, 10.56]
    records, position = [], 0
    for rate in rates:
        for rep in (1, 2):
            records += point(rate, rep, first_position=position)
            position += N
    (result,) = capacity_search(judge(records), OBJECTIVES, SearchPlan(4.0, 40.0, 0.05),
                                50.0, resamples=200)
    assert result.status == "found" and result.bracket == (10.19, 10.56)
    assert result.rate is not None
    assert abs(result.rate - exact_limit()) / exact_limit() < 0.10
    assert result.interval is not None and result.interval.low <= result.rate
    assert result.objectives == ["p95 ttft_ms <= 60 ms"]
    assert [p.rate for p in result.probes] == sorted(rates)


def test_an_objective_missed_at_the_lowest_rate_or_met_at_the_highest() -> None:
    below = capacity_search(judge(point(20.0)),
                            Objectives((Objective("ttft_ms", 1.0, 95.0),)),
                            SearchPlan(20.0, 40.0), 50.0)
    assert below[0].status == "below_low" and below[0].rate is None
    above = capacity_search(judge(point(5.0)), OBJECTIVES, SearchPlan(1.0, 5.0), 50.0)
    assert above[0].status == "above_high"


def short(rows: list, every: int) -> list:
    """``rows`` with every ``every``-th answer one token short (refused: output_tokens)."""
    return [r.model_copy(update={"output_tokens": r.requested_tokens - 1})
            if i % every == every - 1 else r for i, r in enumerate(rows)]


def test_a_rate_with_refused_rows_beyond_the_stated_share_is_a_miss_and_says_so() -> None:
    # 5 req/s meets p95 TTFT on every row, but one answer in four is a token short
    rows = short(point(5.0), 4)
    probe, kept = judge_rate(5.0, judged({"rate=5.0#1": rows}), OBJECTIVES, 50.0)
    assert len(kept) == probe.rows == 15 and probe.count.refused == {"output_tokens": 5}
    assert probe.values["ttft_ms"] == pytest.approx(TTFT_MS)  # the valid rows meet it
    assert probe.refused_miss and probe.met is False
    allowed, _ = judge_rate(5.0, judged({"rate=5.0#1": rows}), OBJECTIVES, 50.0,
                            max_refused=0.25)
    assert allowed.met and not allowed.refused_miss  # 25 % refused: within the share
    (result,) = capacity_search(judge(rows), OBJECTIVES, SearchPlan(5.0, 40.0), 50.0)
    assert result.status == "below_low"
    assert result.notes == ["missed at 5 req/s by its refused rows: 15 valid of 20 "
                            "(refused: 5 output_tokens), more than the 0% of requests "
                            "[search] max_refused allows"]


def test_failed_rows_are_refused_not_timed() -> None:
    rows = point(5.0)
    rows[3] = rows[3].model_copy(update={"outcome": Outcome.TIMEOUT})
    probe, kept = judge_rate(5.0, judged({"rate=5.0#1": rows}), OBJECTIVES, 50.0,
                             max_refused=0.1)
    assert probe.count.refused == {"failed": 1} and len(kept) == N - 1
    assert probe.met and rows[3] not in kept


def test_a_bracket_closed_by_refusals_answers_its_midpoint() -> None:
    records = point(5.0) + short(point(10.0, first_position=N), 2)
    (result,) = capacity_search(judge(records), OBJECTIVES, SearchPlan(5.0, 10.0, 0.5),
                                50.0, resamples=50)
    assert result.status == "found" and result.bracket == (5.0, 10.0)
    assert result.rate == 7.5 and result.probes[1].refused_miss
