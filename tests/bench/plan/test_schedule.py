"""Load schedules against the real embedded server (a `kvlab serve` process on loopback).

The server runs in its own process so its torch work does not share the client's GIL:
the send lag measured here is the scheduler's, not the test harness's. No assertion
on speed: send times are compared with the schedule at a rate the server keeps up
with easily, and a slip is forced by a rate far above what one slot can serve.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from itertools import pairwise

import pytest

from kvlab.analysis.load import max_in_flight, summarize_load
from kvlab.analysis.valid_rows import judge
from kvlab.bench.client.endpoints import Endpoint, HarnessClient, RequestSpec
from kvlab.bench.plan.loads.concurrency import ConcurrencyPoint
from kvlab.bench.plan.loads.rate import RatePoint
from kvlab.bench.plan.loads.sequential import SequentialPoint
from kvlab.bench.plan.schedule import (
    run_closed_loop,
    run_open_loop,
    run_point,
    sleep_until,
)
from kvlab.rundir import ApiKind, Outcome, Record, RunClock
from kvlab.servers.embedded import EmbeddedServer
from tests.experiments import embedded, experiment
from tests.lateness import LatenessProbe

GREEDY = {"temperature": 0, "seed": 42, "ignore_eos": True, "cache_prompt": False}


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> Iterator[EmbeddedServer]:
    srv = EmbeddedServer(capacity=64, preset="toy", threads=1)
    srv.start(tmp_path_factory.mktemp("serve") / "serve.log", ready_timeout_s=120)
    try:
        yield srv
    finally:
        srv.stop()


def specs(n: int, tokens: int = 4) -> list[RequestSpec]:
    return [RequestSpec(prompt=f"query {i} about caches", max_tokens=tokens, params=GREEDY,
                        run_id="t", mode="m", capacity=64, query_id=f"q{i:02d}")
            for i in range(n)]


def run(server: EmbeddedServer, coro_fn, connections: int) -> list[Record]:
    endpoint = Endpoint(server.base_url, ApiKind.LLAMACPP_COMPLETION, name="m")

    async def go() -> list[Record]:
        clock = RunClock()
        async with HarnessClient(max_connections=connections) as client:
            async def send(spec: RequestSpec) -> Record:
                return await client.send(endpoint, spec, clock)
            return await coro_fn(send, clock)

    return asyncio.run(go())


def test_arrivals_are_absolute_and_reproducible() -> None:
    constant = RatePoint(rate=4.0, requests=5, arrival="constant")
    assert constant.arrivals_ns(5) == [0, 250_000_000, 500_000_000, 750_000_000,
                                               1_000_000_000]
    poisson = RatePoint(rate=5.0, duration_s=20.0, seed=7)
    offsets = poisson.arrivals_ns(None)
    assert offsets == poisson.arrivals_ns(None)  # seeded
    assert offsets == sorted(offsets) and offsets[-1] < 20e9
    assert 60 < len(offsets) < 140  # about 100 expected; a Poisson count's 5-sigma band
    assert constant.label == "rate=4.0" and ConcurrencyPoint(8).label == "c=8"
    assert SequentialPoint().label is None


def test_sleep_until_an_absolute_deadline() -> None:
    async def go() -> list[int]:
        clock = RunClock()
        late = []
        for k in range(1, 6):
            deadline = k * 10_000_000
            await sleep_until(clock, deadline)
            late.append(clock.now() - deadline)
        return late

    late = asyncio.run(go())
    assert all(x >= 0 for x in late)  # never early


def test_open_loop_keeps_a_low_rate(server) -> None:
    """5 requests/s, constant, for about 2 s: each request leaves on its deadline."""
    point = RatePoint(rate=5.0, duration_s=2.0, arrival="constant")
    offsets = point.arrivals_ns(None)
    assert len(offsets) == 10
    with LatenessProbe() as probe:
        rows = run(server, lambda send, clock: run_point(point, specs(10), send, clock), 10)
    assert all(r.outcome is Outcome.OK for r in rows), [r.error for r in rows]
    assert {r.load for r in rows} == {"rate=5.0"}
    summary = summarize_load(judge(rows), slip_threshold_ms=50)
    assert summary.target_rate == 5.0
    assert summary.scheduled_rate == pytest.approx(5.0, rel=1e-6)
    assert summary.achieved_rate == pytest.approx(10 / summary.span_s)
    assert summary.achieved_rate <= 10 / 1.8  # the span holds at least the 9 gaps of 200 ms
    assert summary.send_lag_ms["min"] >= 0
    # From its deadline to leaving: the loop's timer wake-up, then the task's first
    # step behind whatever the loop had ready (two waits for the CPU).
    assert summary.send_lag_ms["p50"] < probe.allow_ms(20.0, hops=2), probe
    assert not summary.slipped


def test_forced_slip_is_flagged(server) -> None:
    """Six arrivals at once (1 µs apart) into one slot with a cap of 1: each waits for
    the ones before it, keeps that wait in its lag, and the summary flags it."""
    point = RatePoint(rate=1e6, requests=6, arrival="constant",
                      max_concurrency=1)
    rows = run(server, lambda send, clock: run_point(point, specs(6, tokens=8), send, clock), 1)
    assert all(r.outcome is Outcome.OK for r in rows)
    assert max_in_flight(rows) == 1
    by_send = sorted(rows, key=lambda r: r.t_sent)
    assert all(b.t_sent >= a.t_end for a, b in pairwise(by_send))  # one after the other
    # The k-th to leave waited for k requests, each at least as long as the shortest:
    # measured against this run's own requests, not a figure from one machine.
    shortest = min(r.t_end - r.t_sent for r in rows)
    assert all(r.t_sent - r.t_scheduled >= k * (shortest - 1_000) for k, r in enumerate(by_send))
    summary = summarize_load(judge(rows), slip_threshold_ms=shortest / 2e6)
    assert summary.slipped and summary.late >= 5
    assert summary.achieved_rate < summary.scheduled_rate


def test_closed_loop_never_exceeds_its_users(server) -> None:
    users = 3
    with LatenessProbe() as probe:
        rows = run(server, lambda send, clock: run_closed_loop(specs(9), users, send, clock),
                   users)
    assert len(rows) == 9 and all(r.outcome is Outcome.OK for r in rows)
    assert {r.load for r in rows} == {"c=3"}
    assert max_in_flight(rows) <= users
    assert max_in_flight(rows) >= 2  # the users did overlap
    assert sorted(r.query_id for r in rows) == [f"q{i:02d}" for i in range(9)]
    # each user sends as soon as it is free: the lag is client overhead only, with no
    # wait in between (one preemption at most)
    bound_ns = probe.allow_ms(50.0, hops=1) * 1e6
    assert all(0 <= r.t_sent - r.t_scheduled < bound_ns for r in rows), probe


def test_closed_loop_by_duration_stops_taking_work(server) -> None:
    # More work than 0.3 s can hold on any machine (2,000 requests would need 6,700
    # answers/s from one toy-model slot behind HTTP; a loaded 2-core machine gives ~20/s):
    # the duration, not the work, ends the loop however fast the machine.
    async def go(send, clock):
        return await run_closed_loop(specs(2_000), 2, send, clock, duration_s=0.3)

    rows = run(server, go, 2)
    assert 1 <= len(rows) < 2_000
    start = min(r.t_scheduled for r in rows)
    assert all(r.t_scheduled - start < 300_000_000 for r in rows)


def test_open_loop_uncapped_overlaps(server) -> None:
    """Without a cap, arrivals do not wait for answers: requests pile up in flight."""
    async def go(send, clock):
        return await run_open_loop(specs(4, tokens=16), [0, 1_000_000, 2_000_000, 3_000_000],
                                   send, clock)

    with LatenessProbe() as probe:
        rows = run(server, go, 4)
    assert max_in_flight(rows) >= 3
    bound_ns = probe.allow_ms(20.0, hops=2) * 1e6  # as in test_open_loop_keeps_a_low_rate
    assert all((r.t_sent - r.t_scheduled) < bound_ns for r in rows), probe


def test_warmups_are_flagged_and_not_returned(server) -> None:
    seen: list[Record] = []
    point = ConcurrencyPoint(users=2, requests=2)
    rows = run(server, lambda send, clock: run_point(point, specs(2), send, clock, seen.append,
                                                     warmup=specs(1)), 2)
    assert len(rows) == 2 and not any(r.warmup for r in rows)
    assert [r.warmup for r in seen].count(True) == 1 and seen[0].warmup
    assert seen[0].load == "c=2" and seen[0].t_scheduled is None


SWEEP = experiment(
    "sweep", embedded("m"), workload=dict(queries=2, capacities=[256], output_tokens=4),
    load=dict(kind="concurrency", values=[1, 3], requests=6), slo=dict(e2e_ms=60000))


@pytest.mark.slow
def test_sweep_through_the_runner_resumes_whole_points(tmp_path) -> None:
    """A [load] sweep writes labelled rows; a resume reruns only unfinished points."""
    import json

    from kvlab.errors import RunInterrupted
    from kvlab.run.runner import RunOutput, RunRequest, SilentReporter, run_experiment
    from kvlab.rundir import read_records

    class StopAfter(SilentReporter):
        def __init__(self, n: int) -> None:
            self.n = n

        def advance(self, record) -> None:
            self.n -= 1
            if self.n == 0:
                raise KeyboardInterrupt

    path = SWEEP.write(tmp_path)
    with pytest.raises(RunInterrupted):
        run_experiment(RunRequest(path),
                       RunOutput(tmp_path / "runs", reporter=StopAfter(8)))  # inside c=3
    (run_dir,) = (tmp_path / "runs").iterdir()
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["points_done"] == [["m", 256, "c=1"]]

    result = run_experiment(RunRequest(resume=run_dir))
    records = read_records(run_dir / "records.jsonl")
    c1 = [r for r in records if r.load == "c=1" and not r.warmup]
    assert len(c1) == 6  # not rerun
    assert {(r.query_id, r.repetition) for r in c1} == {
        (q, rep) for q in ("q01", "q02") for rep in range(3)}
    load = {p["load"]: p for p in result.evaluation.to_json()["load"]}
    assert set(load) == {"c=1", "c=3"}
    assert load["c=3"]["requests"] == 6 and load["c=3"]["max_in_flight"] <= 3
    assert load["c=1"]["max_in_flight"] == 1 and load["c=1"]["slo_met"] == 6
    assert "## Load" in (run_dir / "report.md").read_text()
