"""Calibration against a real synthetic server process: error figures and ingest."""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Iterator

import pytest

from kvlab.bench.calibrate.accuracy import steady_rate, timestamp_errors
from kvlab.bench.calibrate.check import (
    INGEST_CLIENTS,
    CalibrateSettings,
    calibrate_against,
    ingest_burst,
    run_level,
    synthetic_process,
)
from kvlab.rundir import ApiKind, Outcome, Record
from tests.lateness import LatenessProbe


@pytest.fixture(scope="module")
def base_url() -> Iterator[str]:
    with synthetic_process() as url:
        yield url


def _record(chunk_ns: list[int], rid: str, outcome: Outcome = Outcome.OK) -> Record:
    return Record(
        run_id="r", mode="m", capacity=0, query_id="q", api=ApiKind.LLAMACPP_COMPLETION,
        path="/completion", stream=True, body={"synthetic": {"id": rid}}, prompt_sha256="",
        requested_tokens=len(chunk_ns), t_sent=0, t_end=chunk_ns[-1] if chunk_ns else 0,
        t_first_content=chunk_ns[0] if chunk_ns else None, chunk_ns=chunk_ns,
        chunk_tokens=[1] * len(chunk_ns), outcome=outcome,
    )


def test_timestamp_errors_pairs_chunks_with_sends() -> None:
    t0 = 1_000_000_000
    sends = [t0 + 10_000_000, t0 + 20_000_000, t0 + 30_000_000]
    # arrivals 1 ms, 3 ms and 1 ms after their sends (relative to t0)
    rec = _record([11_000_000, 23_000_000, 31_000_000], "a")
    log = {"a": {"send_ns": sends, "tokens": [1, 1, 1]}}
    short = _record([5], "b")  # a chunk count that does not match the log
    failed = _record([], "c", Outcome.TIMEOUT)
    err = timestamp_errors([rec, short, failed], {**log, "b": log["a"]}, t0)
    assert (err.requests, err.failed, err.unmatched, err.events, err.tokens) == (3, 1, 1, 3, 3)
    assert err.ttft_ms["p50"] == pytest.approx(1.0)
    assert err.latency_ms["p50"] == pytest.approx(1.0)
    assert err.latency_ms["max"] == pytest.approx(3.0)
    assert err.gap_ms["max"] == pytest.approx(2.0)  # |+2| then |-2|


SCHEDULE = {"ttft_ms": 10.0, "itl_ms": 10.0, "tokens": 8, "tokens_per_event": 1,
            "events_per_write": 1}


def test_steady_rate_counts_only_the_window() -> None:
    recs = [_record([0, 10, 20, 30], "a"), _record([15, 25, 40], "b"),
            _record([12], "c", Outcome.DISCONNECTED)]
    recs[0].chunk_tokens = [1, 2, None, 4]
    events, tokens = steady_rate(recs, 10, 30)  # [10, 30): 10, 20 of a; 15, 25 of b
    assert events == pytest.approx(4 / 20e-9)
    assert tokens == pytest.approx((2 + 1 + 1 + 1) / 20e-9)


def test_injected_client_delay_shows_in_the_error_figures(base_url: str) -> None:
    with LatenessProbe() as probe:
        clean = asyncio.run(run_level(base_url, "clean", 2, 0.2, SCHEDULE))
        late = asyncio.run(run_level(base_url, "late", 2, 0.2, SCHEDULE, known_delay_ms=5.0))
    for res in (clean, late):
        assert res.errors.failed == res.errors.unmatched == 0
        assert res.errors.events == res.errors.requests * 8
    # An error is the server's send stamp to the client's stamp: the server process can
    # be kept off the CPU between the two, and (stamping reads when handled) so can the
    # client: two waits for the CPU, each as late as this machine was during the run.
    assert clean.errors.ttft_ms["p50"] < probe.allow_ms(3.0, hops=2), probe
    # 5 ms injected -> the TTFT and per-event errors grow by 5 ms, the gaps do not.
    noise_ms = probe.allow_ms(1.5, hops=2)  # two runs' errors differ by their lateness
    assert 5.0 <= late.errors.ttft_ms["p50"] < clean.errors.ttft_ms["p50"] + 5.0 + noise_ms
    assert late.errors.latency_ms["p50"] == pytest.approx(
        clean.errors.latency_ms["p50"] + 5.0, abs=noise_ms)
    assert late.errors.gap_ms["p50"] < noise_ms, probe


@pytest.mark.skipif(sys.platform != "linux", reason="kernel receive stamps are Linux's")
def test_kvlab_client_reads_kernel_stamps_and_aiohttp_does_not(base_url: str) -> None:
    own = asyncio.run(run_level(base_url, "own", 2, 0.1, SCHEDULE))
    plain = asyncio.run(run_level(base_url, "plain", 2, 0.1, SCHEDULE, http_client="aiohttp"))
    assert own.stamps == "kernel" and own.read_lag_ms["p99"] is not None
    assert plain.stamps == "read" and plain.read_lag_ms == {}
    for res in (own, plain):
        assert res.errors.unmatched == res.errors.failed == 0 and res.errors.events > 0


def test_openai_chat_level_matches_every_delta(base_url: str) -> None:
    res = asyncio.run(run_level(base_url, "chat", 2, 0.1, SCHEDULE, api=ApiKind.OPENAI_CHAT))
    assert res.errors.requests >= 2
    assert res.errors.unmatched == 0 and res.errors.events == 8 * res.errors.requests


@pytest.mark.parametrize("client", INGEST_CLIENTS)
def test_ingest_burst_counts_every_event(base_url: str, client: str) -> None:
    settings = CalibrateSettings(ingest_streams=2, ingest_duration_s=0.2, ingest_tokens=128)
    res = asyncio.run(ingest_burst(base_url, client, settings))
    assert res.events > 0 and res.events % 128 == 0 and res.tokens == res.events
    assert res.events_per_s > 0 and res.cpu_us_per_event > 0


def test_calibrate_against_finds_a_limit_on_an_easy_ramp(base_url: str) -> None:
    with LatenessProbe() as probe:  # how late this machine runs just now
        time.sleep(0.3)
    # Easy: 500 events/s, and a lag limit of 50 ms plus this machine's lateness for the
    # server's write and the client's read (a loaded machine is not a client limit).
    settings = CalibrateSettings(
        concurrency=(2,), duration_s=0.1, itl_ms=10.0, tokens=4, ingest_streams=2,
        ingest_duration_s=0.1, ingest_tokens=64, events_per_write=4, ramp_rates=(500.0,),
        ramp_duration_s=0.2, lag_limit_ms=probe.allow_ms(50.0, hops=2),
    )
    report = asyncio.run(calibrate_against(base_url, settings))
    assert report.clock["shared"] is True
    assert [r.concurrency for r in report.accuracy] == [2]
    assert [i.client for i in report.ingest] == list(INGEST_CLIENTS)
    assert report.ramp[0].ok is True, (report.ramp[0], probe)
    assert report.max_events_per_s == pytest.approx(report.ramp[0].events_per_s)
    doc = report.to_dict()
    assert doc["accuracy"][0]["errors"]["gap_ms"]["p99"] is not None


def test_cpu_split_gives_the_server_one_cpu_of_its_own() -> None:
    import os

    from kvlab.bench.calibrate.server import split_cpus as _split_cpus

    client, server = _split_cpus()
    cpus = os.sched_getaffinity(0)
    if len(cpus) < 2:
        assert (client, server) == (None, None)
    else:
        assert server is not None and client is not None
        assert len(server) == 1 and client | server == cpus and not client & server
