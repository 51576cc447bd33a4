"""A sharded point through in-process workers against the real synthetic server.

:class:`~kvlab.bench.workers.worker.LoadWorker` objects on this process's loop are
workers as the coordinator sees them (the Ray driver holds the same object in an actor,
tests/run/test_workers_ray.py): the same requests as one process, records in
completion order, every landed record kept when the point is cancelled or a worker fails.
"""

from __future__ import annotations

import asyncio
import json
import urllib.request
from collections.abc import Iterator

import pytest

from kvlab.bench.calibrate.server import synthetic_process
from kvlab.bench.client.endpoints import Endpoint, HarnessClient, RequestSpec
from kvlab.bench.plan.loads.base import LoadStrategy
from kvlab.bench.plan.loads.concurrency import ConcurrencyPoint
from kvlab.bench.plan.loads.rate import RatePoint
from kvlab.bench.plan.schedule import run_point
from kvlab.bench.workers.dispatch import collect, launch, stop_all
from kvlab.bench.workers.merge import Merger
from kvlab.bench.workers.worker import LoadWorker
from kvlab.errors import WorkerError
from kvlab.rundir import ApiKind, Outcome, Record, RunClock


@pytest.fixture(scope="module")
def endpoint() -> Iterator[Endpoint]:
    with synthetic_process() as url:
        yield Endpoint(url, ApiKind.LLAMACPP_COMPLETION, model="synthetic")


def specs(n: int, itl_ms: float = 2.0, tokens: int = 6) -> list[RequestSpec]:
    return [RequestSpec(prompt=f"p{i}", max_tokens=tokens, run_id="r", mode="m",
                        capacity=256, query_id=f"q{i % 4}", repetition=i // 4, position=i,
                        params={"synthetic": {"ttft_ms": 1, "itl_ms": itl_ms}})
            for i in range(n)]


def sharded(endpoint: Endpoint, point: LoadStrategy, todo: list[RequestSpec], workers: int,
            landed: list[Record]) -> list[Record]:
    async def go() -> list[Record]:
        clock = RunClock()
        started = await launch([LoadWorker(i) for i in range(workers)], point, todo,
                               endpoint, clock)
        assert [o.exchanges for o in started.offsets] == [16] * len(started.handles)
        return await collect(started, clock, landed.append)

    return asyncio.run(go())


def one_process(endpoint: Endpoint, point: LoadStrategy, todo: list[RequestSpec]) -> list[Record]:
    async def go() -> list[Record]:
        clock = RunClock()
        async with HarnessClient(max_connections=point.max_in_flight(len(todo))) as pool:
            async def send(spec: RequestSpec) -> Record:
                return await pool.send(endpoint, spec, clock)

            return await run_point(point, todo, send, clock)

    return asyncio.run(go())


def identity(r: Record) -> tuple:
    return (r.position, r.query_id, r.repetition, r.load, r.outcome, r.output_tokens,
            r.prompt_tokens, len(r.chunk_ns), r.text)


@pytest.mark.parametrize("point", [RatePoint(rate=200.0, requests=24),
                                   ConcurrencyPoint(users=4, requests=24)])
def test_workers_send_what_one_process_sends(endpoint, point) -> None:
    landed: list[Record] = []
    records = sharded(endpoint, point, specs(30), 2, landed)
    alone = one_process(endpoint, point, specs(30))
    assert sorted(map(identity, records)) == sorted(map(identity, alone))
    assert {r.worker for r in records} == {0, 1} and {r.worker for r in alone} == {None}
    assert landed == records  # each handed to the writer once, as it could be written
    ends = [r.t_end for r in records]
    assert ends == sorted(ends)  # completion order, as one process appends them
    if isinstance(point, RatePoint):  # each left at its planned deadline, on its worker's clock
        lag_ms = [(r.t_sent - r.t_scheduled) / 1e6 for r in records]
        assert min(lag_ms) >= 0


def test_a_cancelled_point_stops_every_worker_and_keeps_every_landed_record(endpoint) -> None:
    """Ctrl-C cancels the coordinator's task mid-point: the records the workers landed
    are all handed over before the cancellation goes on, and no request keeps running."""
    landed: list[Record] = []
    workers = [LoadWorker(0), LoadWorker(1)]
    point = ConcurrencyPoint(users=4, requests=400)
    answers(endpoint)  # empties the server's log

    async def go() -> None:
        clock = RunClock()
        started = await launch(workers, point, specs(400, itl_ms=5, tokens=7), endpoint,
                               clock)
        task = asyncio.ensure_future(collect(started, clock, landed.append))
        while len(landed) < 12:
            await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        for w in workers:  # stopped: nothing left running, nothing held back
            assert w._task is not None and w._task.done()
            assert (await w.drain(0.0)).records == []

    asyncio.run(go())
    finished = answers(endpoint)
    assert 12 <= len(landed) < 400
    assert len({r.position for r in landed}) == len(landed)
    assert all(r.outcome == Outcome.OK for r in landed)
    # every answer the server finished is a record, but those still being read (at
    # most one per user) when the point was cancelled
    assert 0 <= finished - len(landed) <= 4, f"{finished} answers, {len(landed)} records"


def test_stopping_hands_back_the_records_landed_since_the_last_drain(endpoint) -> None:
    """Workers left running with nobody draining them hold their records; stop_all
    returns every one of them (the Ctrl-C path of collect)."""
    workers = [LoadWorker(0), LoadWorker(1)]
    point = ConcurrencyPoint(users=2, requests=400)
    answers(endpoint)

    seen = 0  # answers the server finished while the workers ran

    async def go() -> list[Record]:
        nonlocal seen
        clock = RunClock()
        await launch(workers, point, specs(400, itl_ms=1, tokens=7), endpoint, clock)
        for w in workers:
            await w.go(clock.now())
        # until a dozen answers are out (not a fixed sleep: a loaded machine may take
        # longer to start the workers), then stop with nobody having drained them
        deadline = asyncio.get_running_loop().time() + 60
        while seen < 12 and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.05)
            seen += await asyncio.to_thread(answers, endpoint)
        return await stop_all(workers, {}, Merger([0, 1]))

    kept = asyncio.run(go())
    finished = seen + answers(endpoint)
    assert len(kept) >= 10 and {r.worker for r in kept} == {0, 1}
    assert [r.t_end for r in kept] == sorted(r.t_end for r in kept)
    assert 0 <= finished - len(kept) <= 2, f"{finished} answers, {len(kept)} records"


def answers(endpoint: Endpoint) -> int:
    """Answers of 7 tokens the synthetic server finished since the last call."""
    with urllib.request.urlopen(f"{endpoint.base_url}/synthetic/log?clear=1") as answer:
        log = json.loads(answer.read())
    return sum(1 for e in log.values() if e["schedule"]["tokens"] == 7)


def test_a_worker_that_fails_is_named_and_its_records_kept(endpoint) -> None:
    """A fault of kvlab's own code in a worker (a body json cannot encode) is raised as
    WorkerError naming the worker; what every worker landed is kept."""
    todo = specs(12)
    todo[7] = RequestSpec(prompt="bad", max_tokens=4, position=7, params={"x": object()})
    landed: list[Record] = []
    point = ConcurrencyPoint(users=2, requests=12)
    with pytest.raises(WorkerError, match=r"load worker 1 failed: TypeError"):
        sharded(endpoint, point, todo, 2, landed)
    assert 7 not in {r.position for r in landed}
    assert {1, 3, 5} <= {r.position for r in landed}  # worker 1's rows before the fault
