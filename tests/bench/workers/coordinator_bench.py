"""Benchmark: how many records per second the coordinator of ``kvlab run --workers`` takes in.

With load workers, the coordinator no longer reads streams: it takes each finished
record from a worker (a Ray object), merges it into completion order and hands it to
the run's writer (JSON, on the writer's thread). Its limit is in records per second;
in events per second it is that times the events per record (one per streamed chunk).

Here each worker produces ready-made records of ``--events`` chunks as fast as it can
(no HTTP: the workers' own ingest is what ``kvlab calibrate --workers`` measures), and
the coordinator runs the real path (:func:`kvlab.bench.workers.dispatch.collect` into a
:class:`kvlab.rundir.writer.RunWriter`). Printed: records/s through the
coordinator and its CPU µs per record (process time, the writer's thread included),
so 1e6 / µs is the records/s one core could take.

Usage (from the repository root; needs the ray extra):

    .venv/bin/python -m tests.bench.workers.coordinator_bench --workers 2 --records 20000
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from pathlib import Path

from kvlab.bench.client.endpoints import Endpoint, RequestSpec
from kvlab.bench.plan.loads.base import Shard
from kvlab.bench.plan.schedule import ClosedLoopShare
from kvlab.bench.workers.dispatch import Launch, collect
from kvlab.bench.workers.ray_pool import RayLoadWorker, RayPool, RaySettings
from kvlab.rundir import ApiKind, Outcome, Record, RunClock, RunWriter


class RecordSource(RayLoadWorker):
    """A worker that lands ``len(shard.specs)`` ready-made records as fast as it can."""

    async def _run(self, shard: Shard, endpoint: Endpoint, clock: RunClock,
                   start: asyncio.Future[int]) -> None:
        await start
        assert isinstance(shard.share, ClosedLoopShare)
        events = shard.share.users  # the bench passes the chunks per record here
        for i, spec in enumerate(shard.specs):
            now = clock.now()
            self._records.append(Record(
                **spec.identity(), api=ApiKind.LLAMACPP_COMPLETION, path="/completion",
                stream=True, prompt_sha256="0" * 64, prompt=spec.prompt,
                requested_tokens=events, t_sent=now - 1_000_000, t_end=now,
                t_first_content=now - 900_000, t_last_content=now,
                chunk_ns=list(range(now - events, now)), chunk_tokens=[1] * events,
                output_tokens=events, prompt_tokens=100, outcome=Outcome.OK, text="x" * events))
            self._wake()
            if i % 64 == 0:
                await asyncio.sleep(0)  # let drains through


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--records", type=int, default=20_000, help="in all")
    parser.add_argument("--events", type=int, default=64, help="chunks per record")
    args = parser.parse_args()
    import ray

    pool = RayPool(RaySettings(workers=args.workers))
    try:
        pool.start()
        # the actors of this bench: record sources instead of HTTP clients
        for handle in pool.handles:
            ray.kill(handle.actor)
        for i, handle in enumerate(pool.handles):
            handle.actor = ray.remote(num_cpus=1)(RecordSource).remote(i)
        per = args.records // args.workers
        clock = RunClock()
        shards = [Shard(worker=k, share=ClosedLoopShare("bench", args.events),
                        specs=tuple(RequestSpec(prompt="p" * 200, max_tokens=args.events,
                                                run_id="bench", mode="m", query_id=f"q{i}",
                                                position=k * per + i, worker=k)
                                    for i in range(per)))
                  for k in range(args.workers)]

        async def go() -> tuple[int, float, float]:
            endpoint = Endpoint("http://127.0.0.1:1", ApiKind.LLAMACPP_COMPLETION)
            for handle, shard in zip(pool.handles, shards, strict=True):
                await handle.load(shard, endpoint, clock.t0_ns)
            with tempfile.TemporaryDirectory() as tmp, RunWriter(Path(tmp)) as writer:
                cpu0, wall0 = time.process_time(), time.perf_counter()
                records = await collect(Launch(list(pool.handles), shards, []), clock,
                                        writer.append)
                writer.sync()
                return len(records), time.perf_counter() - wall0, time.process_time() - cpu0

        count, wall, cpu = asyncio.run(go())
    finally:
        pool.close()
    print(json.dumps({"workers": args.workers, "records": count, "events_per_record":
                      args.events, "wall_s": round(wall, 3),
                      "records_per_s": round(count / wall),
                      "coordinator_cpu_us_per_record": round(cpu / count * 1e6, 1),
                      "one_core_records_per_s": round(count / cpu),
                      "one_core_events_per_s": round(count / cpu * args.events)}))


if __name__ == "__main__":
    main()
