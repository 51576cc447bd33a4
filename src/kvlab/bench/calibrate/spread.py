"""``kvlab calibrate --workers N``: the client as N load workers, measured as one.

The synthetic server runs here; N load workers (Ray actors on a local Ray, as ``kvlab
run --workers N`` starts them) share each level's streams, stream ``i`` on worker
``i mod N``, all starting at one instant (each worker's clock offset is measured by
ping-pong first, and its records come back on its own clock). The server shares this
machine's clock with every worker, so each record's timestamps are compared with the
server's send times exactly, as in one process; the figures (timestamp and gap
errors, the ramp's highest on-time rate) are those of the N workers together. The
ingest burst, which compares client implementations in one process, is left out.

The limit found is saved as the limit of N workers (``by_workers`` in the calibration
file): a run with ``--workers N`` is held to it.
"""

from __future__ import annotations

import asyncio
import os
import time
from typing import Any

import aiohttp

from kvlab.bench.calibrate.check import (
    CalibrateSettings,
    CalibrationReport,
    calibrate_against,
)
from kvlab.bench.calibrate.level import LoadResult, level_result, level_spread, run_streams
from kvlab.bench.calibrate.server import get_json, raise_fd_limit, synthetic_process
from kvlab.bench.workers.clocks import measure_offset
from kvlab.bench.workers.ray_pool import RayHandle, RayPool, RaySettings
from kvlab.rundir import ApiKind

START_LEAD_NS = 300_000_000  # the common start: time for every worker to get ready


class WorkerLevels:
    """Runs levels over the pool's workers (``calibrate_against``'s ``level``); keeps
    each level's clock offsets."""

    def __init__(self, handles: list[RayHandle]) -> None:
        self.handles = handles
        self.clocks: list[dict[str, Any]] = []

    async def __call__(self, base_url: str, label: str, concurrency: int, duration_s: float,
                       schedule: dict[str, Any], api: ApiKind = ApiKind.LLAMACPP_COMPLETION,
                       known_delay_ms: float = 0.0, spread_s: float | None = None,
                       http_client: str = "auto") -> LoadResult:
        spread = level_spread(schedule, duration_s, spread_s)
        delay = round(known_delay_ms * 1e6)
        origin = time.perf_counter_ns() - delay  # readings made to read late, if asked
        n = len(self.handles)
        used = [(k, h) for k, h in enumerate(self.handles) if k < concurrency]
        offsets = [await measure_offset(h.now_ns) for _, h in used]
        self.clocks.append({"level": label, "clocks": [
            {"worker": k, **o.to_json()} for (k, _), o in zip(used, offsets, strict=True)]})
        async with aiohttp.ClientSession() as session:
            await get_json(session, base_url + "/synthetic/log?clear=1")
            await get_json(session, base_url + "/synthetic/stats?reset=1")
            wall0 = time.perf_counter()
            start = time.perf_counter_ns() - origin + START_LEAD_NS
            shares = await asyncio.gather(*(
                h.call(run_streams, base_url, label, list(range(k, concurrency, n)),
                       concurrency, duration_s, schedule, api, spread, http_client,
                       origin + o.offset_ns, start)
                for (k, h), o in zip(used, offsets, strict=True)))
            wall = time.perf_counter() - wall0
            stats = await get_json(session, base_url + "/synthetic/stats")
            log = await get_json(session, base_url + "/synthetic/log?clear=1")
        return level_result(label, concurrency, wall, list(shares), log, stats, origin, delay,
                            spread, duration_s)


def calibrate_on_workers(settings: CalibrateSettings, progress: Any = None) -> CalibrationReport:
    """Start the synthetic server and ``settings.workers`` load workers on a local Ray,
    calibrate them as one client, stop both."""
    assert settings.workers is not None
    raise_fd_limit()
    say = progress or (lambda _msg: None)
    say(f"starting {settings.workers} load workers on a local Ray")
    pool = RayPool(RaySettings(workers=settings.workers, http_client=settings.http_client))
    try:
        pool.start()
        levels = WorkerLevels(pool.handles)
        with synthetic_process() as base_url:
            report = asyncio.run(calibrate_against(base_url, settings, progress, level=levels))
    finally:
        pool.close()
    report.workers = {**pool.facts, "levels": levels.clocks}
    cores = os.cpu_count()
    report.notes.append(
        f"{settings.workers} load workers and the synthetic server on this machine's "
        f"{cores} cores, with Ray's own processes and this coordinator: the limit is that "
        "of the workers on this machine, not of a worker with a core of its own")
    report.notes.append("ingest burst left out: it compares client implementations in one "
                        "process")
    return report
