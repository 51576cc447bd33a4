"""Measure the measurer: the harness client against the synthetic server's own clock.

The synthetic server (:mod:`kvlab.serve.synthetic`) runs in its own process and logs
``perf_counter_ns`` at each content write; the harness client stamps each network read
with the same clock (CLOCK_MONOTONIC on Linux, checked via ``/synthetic/clock``): the
kernel's arrival time of the read through kvlab's own HTTP client, the moment the
read's coroutine resumed through aiohttp (``http_client="aiohttp"``). So:

- TTFT error: first-content arrival - its send time (ms)
- latency error: each content chunk's arrival - its send time (ms)
- gap error: |client gap between successive chunks - server gap between their sends|
- read lag (kernel stamps only): how long after arrival the client's loop handled a
  read, the error a client stamping reads when it handles them would add

``known_delay_ms`` moves the client's clock origin back so every timestamp the harness
takes reads that much late (a client that stamps each read late): the TTFT and latency
errors must grow by exactly that, the gap errors not at all (a constant lag cancels).

The error figures are :mod:`kvlab.bench.calibrate.accuracy`; the server process, its clock
check and this process's set-up are :mod:`kvlab.bench.calibrate.server`.

Ingest: (1) a burst with no inter-token delay: the harness, the harness on aiohttp,
and a plain aiohttp client (``async for line in resp.content`` + ``json.loads``), all
in this process; (2) a ramp of paced rates whose highest rate with on-time timestamps
is the client's limit.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass
from typing import Any

import aiohttp

from kvlab.api.dialect import Dialect
from kvlab.api.dialects import dialect_of
from kvlab.bench.calibrate.level import LoadResult, level_result, level_spread, run_streams
from kvlab.bench.calibrate.server import (
    check_clock,
    get_json,
    raise_fd_limit,
    server_cpu_s,
    split_cpus,
    synthetic_process,
)
from kvlab.bench.client.endpoints import Endpoint, HarnessClient, RequestSpec
from kvlab.errors import ConfigError
from kvlab.rundir import ApiKind, RunClock


@dataclass(frozen=True)
class CalibrateSettings:
    """What ``kvlab calibrate`` runs. Times in ms unless the name says otherwise."""

    concurrency: tuple[int, ...] = (1, 64, 256, 1024)
    duration_s: float = 6.0  # per accuracy level: no new request starts after this
    ttft_ms: float = 20.0
    itl_ms: float = 50.0
    tokens: int = 32
    api: ApiKind = ApiKind.LLAMACPP_COMPLETION
    known_delay_ms: float = 0.0  # every client timestamp read this much late (self-test)
    ingest: bool = True
    ingest_streams: int = 64
    ingest_duration_s: float = 3.0
    ingest_tokens: int = 1024  # per request in the burst
    events_per_write: int = 64  # burst: server-side batching so the server is not the limit
    # The ramp writes one event per send, as servers stream tokens, so each event costs
    # the client a read: the limit it finds is the one real streams meet.
    ramp_events_per_write: int = 1
    ramp_rates: tuple[float, ...] = (5e3, 7.5e3, 10e3, 12.5e3, 15e3, 20e3, 25e3, 30e3, 40e3,
                                     50e3, 75e3, 100e3)  # events/s
    ramp_duration_s: float = 2.0
    lag_limit_ms: float = 2.0  # ramp: p99 latency error above this = "error grows"
    pin_cpus: bool = False  # server on the last CPU, client on the others (>= 2 CPUs)
    http_client: str = "auto"  # HarnessClient's: "auto" (kvlab's own on http://) or "aiohttp"
    workers: int | None = None  # the client as N load workers on a local Ray (spread.py)


# The ingest burst's clients: the harness (kvlab's own HTTP client), the harness on
# aiohttp, and a plain aiohttp client that does nothing but parse events.
INGEST_CLIENTS = ("kvlab", "kvlab-aiohttp", "aiohttp-baseline")


@dataclass
class IngestResult:
    """Events a client process took in per second in the burst test."""

    client: str  # "kvlab", "kvlab-aiohttp" (HarnessClient on aiohttp) or "aiohttp-baseline"
    events: int
    tokens: int
    wall_s: float
    events_per_s: float
    tokens_per_s: float
    cpu_us_per_event: float
    server_cpu_frac: float | None


@dataclass
class CalibrationReport:
    clock: dict[str, Any]
    accuracy: list[LoadResult]
    ingest: list[IngestResult]
    ramp: list[LoadResult]
    max_events_per_s: float | None
    max_tokens_per_s: float | None
    notes: list[str]
    # with load workers: the pool's facts (Ray, each worker's process) and per level the
    # workers' clock offsets (bench.workers.clocks.ClockOffset.to_json())
    workers: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


# -- load against the synthetic server --------------------------------------------------


async def run_level(
    base_url: str,
    label: str,
    concurrency: int,
    duration_s: float,
    schedule: dict[str, Any],
    api: ApiKind = ApiKind.LLAMACPP_COMPLETION,
    known_delay_ms: float = 0.0,
    spread_s: float | None = None,
    http_client: str = "auto",
) -> LoadResult:
    """``concurrency`` closed-loop streams for ``duration_s`` through the harness client.

    Stream i starts i/concurrency of ``spread_s`` after the first (default: one
    request's duration), so the streams' events and request boundaries are spread
    evenly over time.
    ``known_delay_ms`` shifts the client's clock origin so every timestamp it takes
    reads that much late: a known error the figures must report.
    """
    clock = RunClock(time.perf_counter_ns() - round(known_delay_ms * 1e6))
    true_t0 = clock.t0_ns + round(known_delay_ms * 1e6)
    spread_s = level_spread(schedule, duration_s, spread_s)
    async with aiohttp.ClientSession() as session:
        await get_json(session, base_url + "/synthetic/log?clear=1")
        await get_json(session, base_url + "/synthetic/stats?reset=1")
        wall0 = time.perf_counter()
        share = await run_streams(base_url, label, range(concurrency), concurrency,
                                  duration_s, schedule, api, spread_s, http_client,
                                  clock.t0_ns)
        wall = time.perf_counter() - wall0
        stats = await get_json(session, base_url + "/synthetic/stats")
        log = await get_json(session, base_url + "/synthetic/log?clear=1")
    return level_result(label, concurrency, wall, [share], log, stats, clock.t0_ns,
                        true_t0 - clock.t0_ns, spread_s, duration_s)


# -- ingest: the harness against a plain aiohttp client ----------------------------------


async def _baseline_stream(session: aiohttp.ClientSession, url: str, body: dict[str, Any],
                           dialect: Dialect) -> tuple[int, int]:
    """The plain client: read lines, json.loads each ``data:`` event; (events, tokens)."""
    events = tokens = 0
    async with session.post(url, json=body) as resp:
        async for line in resp.content:
            if not line.startswith(b"data: ") or line.startswith(b"data: [DONE]"):
                continue
            held = dialect.event_tokens(json.loads(line[6:]))
            if held:
                events += 1
                tokens += held
    return events, tokens


async def ingest_burst(base_url: str, client: str, settings: CalibrateSettings) -> IngestResult:
    """Streams with no delay between writes for ``ingest_duration_s``; one client's rate."""
    streams = settings.ingest_streams
    schedule = {"ttft_ms": 0.0, "itl_ms": 0.0, "tokens": settings.ingest_tokens,
                "tokens_per_event": 1, "events_per_write": settings.events_per_write}
    api = settings.api
    dialect = dialect_of(api)
    events = tokens = 0
    stop_at = time.perf_counter() + settings.ingest_duration_s
    scpu0 = await server_cpu_s(base_url)
    cpu0, wall0 = time.process_time(), time.perf_counter()
    if client in ("kvlab", "kvlab-aiohttp"):
        http_client = "aiohttp" if client == "kvlab-aiohttp" else "auto"
        endpoint = Endpoint(base_url=base_url, api=api, model="synthetic", timeout_s=120.0)
        clock = RunClock()

        async def worker(i: int, hc: HarnessClient) -> None:
            nonlocal events, tokens
            while time.perf_counter() < stop_at:
                spec = RequestSpec(prompt="ingest", max_tokens=settings.ingest_tokens,
                                   params={"synthetic": schedule})
                rec = await hc.send(endpoint, spec, clock)
                events += len(rec.chunk_ns)
                tokens += rec.output_tokens or 0

        async with HarnessClient(max_connections=streams, http_client=http_client) as hc:
            await asyncio.gather(*(worker(i, hc) for i in range(streams)))
    else:
        connector = aiohttp.TCPConnector(limit=streams)

        async def plain(session: aiohttp.ClientSession) -> None:
            nonlocal events, tokens
            body = {**dialect.body("ingest", settings.ingest_tokens, True, "synthetic"),
                    "synthetic": schedule}
            while time.perf_counter() < stop_at:
                e, t = await _baseline_stream(session, base_url + dialect.path, body, dialect)
                events += e
                tokens += t

        async with aiohttp.ClientSession(connector=connector) as session:
            await asyncio.gather(*(plain(session) for _ in range(streams)))
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    scpu = await server_cpu_s(base_url) - scpu0
    return IngestResult(
        client=client, events=events, tokens=tokens, wall_s=wall,
        events_per_s=events / wall, tokens_per_s=tokens / wall,
        cpu_us_per_event=cpu / events * 1e6 if events else math.inf,
        server_cpu_frac=scpu / wall,
    )


# -- the whole calibration -------------------------------------------------------------


# run_level's signature: one level, in this process or over load workers (spread.py)
LevelFn = Callable[..., Awaitable[LoadResult]]


async def _level_with_cpu(base_url: str, *args: Any, level: LevelFn | None = None,
                          **kwargs: Any) -> LoadResult:
    scpu0 = await server_cpu_s(base_url)
    result = await (level or run_level)(base_url, *args, **kwargs)
    result.server_cpu_frac = (await server_cpu_s(base_url) - scpu0) / result.wall_s
    return result


async def calibrate_against(base_url: str, settings: CalibrateSettings,
                            progress: Any = None, level: LevelFn | None = None
                            ) -> CalibrationReport:
    """Run every phase against a synthetic server already listening at ``base_url``;
    ``level`` runs each level (default :func:`run_level`, in this process; given, the
    burst that compares client implementations in this process is left out)."""
    say = progress or (lambda _msg: None)
    clock = await check_clock(base_url)
    if not clock["shared"]:
        raise ConfigError(
            "the synthetic server's perf_counter is not this process's clock "
            f"({clock['implementation']}); calibrate needs client and server on one Linux host"
        )
    schedule = {"ttft_ms": settings.ttft_ms, "itl_ms": settings.itl_ms,
                "tokens": settings.tokens, "tokens_per_event": 1, "events_per_write": 1}
    accuracy = []
    for c in settings.concurrency:
        say(f"accuracy: concurrency {c}, {settings.itl_ms:g} ms ITL")
        accuracy.append(await _level_with_cpu(
            base_url, f"c={c}", c, settings.duration_s, schedule, settings.api,
            settings.known_delay_ms, http_client=settings.http_client, level=level))
    ingest: list[IngestResult] = []
    ramp: list[LoadResult] = []
    notes: list[str] = []
    max_events = max_tokens = None
    if settings.ingest:
        for name in INGEST_CLIENTS if level is None else ():
            say(f"ingest burst: {name}")
            ingest.append(await ingest_burst(base_url, name, settings))
        for res in ingest:
            if res.server_cpu_frac is not None and res.server_cpu_frac > 0.85:
                notes.append(f"ingest burst ({res.client}): the server used "
                             f"{res.server_cpu_frac:.0%} of a core and may have been the limit")
        ramp, max_events, max_tokens = await _ramp(base_url, settings, say, level)
        stopped = ramp[-1] if ramp and not ramp[-1].ok else None
        if stopped and stopped.server_cpu_frac and stopped.server_cpu_frac > 0.85:
            notes.append(f"the ramp stopped at {stopped.offered_events_per_s:,.0f} events/s "
                         f"with the server at {stopped.server_cpu_frac:.0%} of a core: the "
                         "limit found may be the server's, not the client's")
    return CalibrationReport(clock, accuracy, ingest, ramp, max_events, max_tokens, notes)


async def _ramp(base_url: str, settings: CalibrateSettings, say: Any, level: LevelFn | None
                ) -> tuple[list[LoadResult], float | None, float | None]:
    """Paced rates, lowest first; the limit is the last rate kept on time and in full."""
    streams, per_write = settings.ingest_streams, settings.ramp_events_per_write
    levels: list[LoadResult] = []
    best: LoadResult | None = None
    for rate in settings.ramp_rates:
        interval_ms = streams * per_write / rate * 1e3
        # ~0.25 s per request: short enough that a level's ragged start and end (up to
        # one request per stream) cost little of its duration.
        writes = max(2, math.ceil(250.0 / interval_ms))
        schedule = {"ttft_ms": interval_ms, "itl_ms": interval_ms, "tokens": writes * per_write,
                    "tokens_per_event": 1, "events_per_write": per_write}
        say(f"ingest ramp: {rate:,.0f} events/s offered")
        # Streams one write interval apart: the ramp measures sustained ingest, and a
        # spread over a whole (~1 s) request would leave part of a short level idle.
        res = await _level_with_cpu(base_url, f"ramp={rate:g}", streams,
                                    settings.ramp_duration_s, schedule, settings.api,
                                    spread_s=interval_ms / 1e3,
                                    http_client=settings.http_client, level=level)
        res.offered_events_per_s = rate
        p99 = res.errors.latency_ms.get("p99")
        # Kept = nothing failed, every event was stamped within the lag limit (a client
        # that cannot keep up reads late, or stalls the server's writes: the error
        # grows), and the steady part of the level came within 80 % of the offered rate
        # (a client that falls behind sends its next requests late: the rate drops).
        res.ok = (res.errors.failed == 0 and p99 is not None and p99 <= settings.lag_limit_ms
                  and res.events_per_s >= 0.8 * rate)
        levels.append(res)
        if not res.ok:
            break
        best = res
    if best is None:
        return levels, None, None
    return levels, best.events_per_s, best.tokens_per_s


def calibrate(settings: CalibrateSettings, progress: Any = None) -> CalibrationReport:
    """Start the synthetic server in its own process and run :func:`calibrate_against`.

    With ``pin_cpus`` and at least two CPUs, the server runs on the last CPU and this
    client on the others, so the two processes never take turns on one core. Measured
    on 2 cores at 256 streams (3 alternating runs each): median gap error 0.07-0.18 ms
    pinned vs 0.14-0.22 ms not, p99 1.1-3.7 ms vs 1.3-2.6 ms: no clear gain at p99,
    hence off by default.
    """
    if settings.workers is not None:
        raise ValueError("load workers are calibrated by "
                         "kvlab.bench.calibrate.spread.calibrate_on_workers")
    raise_fd_limit()
    client_cpus, server_cpus = split_cpus() if settings.pin_cpus else (None, None)
    before = os.sched_getaffinity(0) if client_cpus else None
    try:
        if client_cpus:
            os.sched_setaffinity(0, client_cpus)
        with synthetic_process(cpus=server_cpus) as base_url:
            report = asyncio.run(calibrate_against(base_url, settings, progress))
    finally:
        if before:
            os.sched_setaffinity(0, before)
    report.notes.append(
        f"client on CPUs {sorted(client_cpus)}, synthetic server on CPUs {sorted(server_cpus)}"
        if client_cpus and server_cpus else "client and server not pinned to CPUs")
    return report
