"""kvlab calibrate --workers: two load workers on a local Ray measured as one client.

Each worker's records come back on its own clock (its origin the coordinator's moved by
the measured offset); the server shares the machine's clock, so the errors are exact:
a known delay injected into every worker's readings must show in the TTFT and latency
errors, not in the gaps, exactly as in one process.
"""

from __future__ import annotations

import pytest

from kvlab.bench.calibrate.check import CalibrateSettings
from kvlab.bench.calibrate.spread import calibrate_on_workers

pytest.importorskip("ray", reason="the ray extra is not installed (make test does)")


def test_two_workers_measure_as_one_client_with_exact_errors() -> None:
    settings = CalibrateSettings(
        concurrency=(4,), duration_s=0.6, itl_ms=10.0, tokens=8, known_delay_ms=5.0,
        ramp_rates=(400.0,), ingest_streams=4, ramp_duration_s=0.6, lag_limit_ms=50.0,
        workers=2)
    report = calibrate_on_workers(settings)
    (level,) = report.accuracy
    errors = level.errors
    assert errors.failed == errors.unmatched == 0 and errors.events == 8 * errors.requests
    assert errors.requests >= 4
    # 5 ms injected into every worker's readings: in the TTFT and latency errors, not
    # in the gaps (the offsets measured never enter these: one machine, one clock)
    assert 5.0 <= errors.ttft_ms["p50"] < 8.0 and 5.0 <= errors.latency_ms["p50"] < 8.0
    assert errors.gap_ms["p50"] < 1.5
    assert [i.client for i in report.ingest] == []  # the one-process burst is left out
    (ramp,) = report.ramp
    assert ramp.ok and report.max_events_per_s == pytest.approx(ramp.events_per_s)
    workers = report.workers
    assert workers is not None and workers["count"] == 2
    assert {w["worker"] for w in workers["workers"]} == {0, 1}
    for entry in workers["levels"]:
        assert [c["worker"] for c in entry["clocks"]] == [0, 1]
        assert all(abs(c["offset_ns"]) <= c["error_ns"] for c in entry["clocks"])
    assert any("2 cores" in note or "cores" in note for note in report.notes)
