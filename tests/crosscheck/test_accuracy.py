"""Errors against the schedule, and a peer's file against what the peer printed."""

from __future__ import annotations

import pytest

from kvlab.crosscheck.accuracy import RoundTrip, Schedule, client_errors
from kvlab.rundir import Outcome
from tests.rows import row


def _row(i: int, ttft_ms: float, itl_ms: float, tokens: int = 16):
    sent = i * 1_000_000_000
    first = sent + round(ttft_ms * 1e6)
    last = first + round(itl_ms * 1e6 * (tokens - 1))
    return row(query_id=f"q{i}", t_sent=sent, t_first_content=first, t_last_content=last,
               t_end=last, output_tokens=tokens, requested_tokens=tokens)


def test_errors_are_measured_minus_scheduled() -> None:
    schedule = Schedule(requests=6, rounds=1)
    rows = [_row(i, 21.0 + 0.1 * i, 20.05) for i in range(6)]
    errors = client_errors("kvlab", rows, schedule)
    assert errors.counted == errors.expected == 6 and errors.problems == ()
    assert errors.ttft.median_ms == pytest.approx(1.25)
    assert errors.itl.median_ms == pytest.approx(0.05, abs=1e-6)
    assert errors.ttft.median_ci is not None and errors.within(schedule.tolerance_ms)
    assert schedule.tolerance_ms == 10.0
    late = client_errors("x", [_row(i, 35.0, 20.0) for i in range(6)], schedule)
    assert not late.within(schedule.tolerance_ms)  # +15 ms: beyond half a gap


def test_a_request_not_counted_is_named() -> None:
    schedule = Schedule(requests=6, rounds=1)
    rows = [_row(i, 21.0, 20.0) for i in range(4)]
    rows.append(_row(4, 21.0, 20.0, tokens=15))
    rows.append(_row(5, 21.0, 20.0).model_copy(update={"outcome": Outcome.TIMEOUT}))
    errors = client_errors("guidellm", rows, schedule)
    assert errors.counted == 4
    assert any("15 output tokens, not 16" in p for p in errors.problems)
    assert any("failed" in p for p in errors.problems)
    short = client_errors("aiperf", rows[:3], schedule)
    assert short.problems[0] == "its files hold 3 requests of the 6 it was asked to send"
    assert (short.recorded, short.counted) == (3, 3)


def test_a_round_trip_holds_to_a_tenth_of_a_percent() -> None:
    assert RoundTrip("f", 12, 12, 21.0, 21.02).holds()
    assert not RoundTrip("f", 12, 12, 21.0, 21.03).holds()  # 0.14 %
    assert not RoundTrip("f", 12, 11, 21.0, 21.0).holds()
    assert not RoundTrip("f", 12, 12, 21.0, None).holds()
