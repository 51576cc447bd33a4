"""Saturation warning and the calibration file."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvlab.analysis.saturation import (
    Calibration,
    busiest_rate,
    calibration_path,
    client_check,
    load_calibration,
    read_lag,
    saturation_warning,
    save_calibration,
)
from kvlab.rundir import ApiKind, Outcome, Record


def _record(chunk_ns: list[int], tokens: list[int | None]) -> Record:
    return Record(
        run_id="r", mode="m", capacity=0, query_id="q", api=ApiKind.LLAMACPP_COMPLETION,
        path="/completion", stream=True, prompt_sha256="", requested_tokens=len(chunk_ns),
        t_sent=0, t_end=chunk_ns[-1], chunk_ns=chunk_ns, chunk_tokens=tokens,
        outcome=Outcome.OK,
    )


# Two streams: 1000 events each, 2 tokens per event, spread over 0.5 s; then quiet.
RECORDS = [
    _record([i * 500_000 for i in range(1000)], [2] * 1000),
    _record([i * 500_000 + 1 for i in range(1000)], [2] * 1000),
    _record([5_000_000_000], [None]),
]


def test_busiest_rate_counts_the_densest_window() -> None:
    events, tokens = busiest_rate(RECORDS, window_s=1.0)
    assert events == 2000 and tokens == 4000
    assert busiest_rate([], 1.0) == (0.0, 0.0)


def test_warning_raised_near_the_limit_and_not_below() -> None:
    tiny = Calibration(max_events_per_s=100.0, max_tokens_per_s=1e9)
    message = saturation_warning(RECORDS, tiny)
    assert message is not None and "2,000 events/s" in message and "kvlab calibrate" in message
    assert saturation_warning(RECORDS, {"max_events_per_s": 1e6, "max_tokens_per_s": 1e6}) is None
    by_tokens = saturation_warning(RECORDS, Calibration(1e6, 5000.0))  # 4000/5000 = 80 %
    assert by_tokens is not None and "tokens/s" in by_tokens
    assert saturation_warning(RECORDS, None) is None


def test_calibration_file_round_trip(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "sub" / "cal.json"
    monkeypatch.setenv("KVLAB_CALIBRATION", str(target))
    assert calibration_path() == target
    assert load_calibration() is None
    cal = Calibration(120_000.0, 120_000.0, measured_at="2026-01-01T00:00:00+00:00", host="h")
    assert save_calibration(cal) == target
    assert load_calibration() == cal
    target.write_text("{not json")
    assert load_calibration() is None


def test_one_process_and_workers_limits_live_side_by_side(tmp_path: Path) -> None:
    """kvlab calibrate --workers N adds N's limit to the file; neither replaces the other."""
    target = tmp_path / "cal.json"
    two = Calibration(30_000.0, 60_000.0, host="h", workers=2)
    save_calibration(two, target)
    assert load_calibration(target) is None  # no one-process limit yet
    one = Calibration(20_000.0, 40_000.0, host="h")
    save_calibration(one, target)
    save_calibration(Calibration(25_000.0, 50_000.0, workers=1), target)
    assert load_calibration(target) == one
    assert load_calibration(target, workers=2) == two
    assert load_calibration(target, workers=1) == Calibration(25_000.0, 50_000.0, workers=1)
    assert load_calibration(target, workers=3) is None
    save_calibration(Calibration(21_000.0, 41_000.0), target)  # a new one-process limit
    assert load_calibration(target, workers=2) == two


def test_a_run_on_workers_is_held_to_the_limit_of_as_many_workers() -> None:
    limit = Calibration(1e6, 1e6, workers=2)
    ok = client_check(RECORDS, limit, workers=2)
    assert ok.status == "ok" and "2 load workers on this machine handle on time" in ok.text
    hot = client_check(RECORDS, Calibration(100.0, 1e9, workers=2), workers=2)
    assert hot.warning and "kvlab calibrate --workers 2" in hot.text
    # a limit measured with another client is not this run's
    for other, workers in ((Calibration(1e6, 1e6), 2), (limit, None), (limit, 3)):
        check = client_check(RECORDS, other, workers=workers)
        assert check.status == "uncalibrated", (other, workers)
    assert "kvlab calibrate --workers 3" in client_check(RECORDS, limit, workers=3).text


def test_client_check_says_saturated_ok_or_uncalibrated() -> None:
    saturated = client_check(RECORDS, Calibration(max_events_per_s=100.0, max_tokens_per_s=1e9))
    assert saturated.status == "saturated" and saturated.warning
    assert saturated.text == saturation_warning(RECORDS, Calibration(100.0, 1e9))
    ok = client_check(RECORDS, Calibration(1e6, 1e6, measured_at="2026-12-02T10:00:00+00:00"))
    assert ok.status == "ok" and not ok.warning
    assert "2,000 events/s" in ok.text and "0%" in ok.text and "2026-12-02" in ok.text
    unknown = client_check(RECORDS, None)
    assert unknown.status == "uncalibrated" and "kvlab calibrate" in unknown.text
    assert client_check(RECORDS, {"max_events_per_s": "x"}).status == "uncalibrated"


def test_the_client_section_warns_only_when_saturated() -> None:
    """report.md's "Client load" section (a run with a tiny limit warns)."""
    from kvlab.report.load import client_markdown

    section = client_markdown(client_check(RECORDS, Calibration(100.0, 1e9)))
    assert section.startswith("\n## Client load\n") and "**Warning:** client near" in section
    assert "**Warning:**" not in client_markdown(client_check(RECORDS, None))


def _lagged(lag_ms: float, outlier_ms: float | None = None) -> list[Record]:
    """Ten streams, an event every 10 ms, whose longest read waited ``lag_ms`` for the
    loop (one stream ``outlier_ms``)."""
    out = []
    for i in range(10):
        rec = _record([i * 1000 + k * 10_000_000 for k in range(20)], [1] * 20)
        lag = outlier_ms if outlier_ms is not None and i == 0 else lag_ms
        rec.read_lag_ns = round(lag * 1e6)
        out.append(rec)
    return out


def test_read_lag_over_the_gap_warns_even_uncalibrated() -> None:
    lag = read_lag(_lagged(2.0, outlier_ms=30.0))
    assert lag is not None and (lag.typical, lag.worst, lag.gap) == pytest.approx((2, 30, 10))
    assert read_lag(RECORDS) is None  # no kernel stamps: nothing to say
    late = client_check(_lagged(12.0), None)
    assert late.status == "saturated" and "12.00 ms" in late.text and "10.00 ms" in late.text
    fine = client_check(_lagged(2.0, outlier_ms=30.0), None)  # one late read is no trend
    assert fine.status == "ok" and "2.00 ms" in fine.text and "do not include" in fine.text
    calibrated = client_check(_lagged(2.0), Calibration(1e6, 1e6))
    assert calibrated.status == "ok" and "not the limit" in calibrated.text
