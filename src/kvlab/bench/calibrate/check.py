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
from dataclasses import asdict, dataclass, field
from typing import Any

import aiohttp

from kvlab.bench.calibrate.accuracy import Errors, pcts, steady_rate, timestamp_errors
from kvlab.bench.calibrate.server import (
    check_clock,
    get_json,
    raise_fd_limit,
    server_cpu_s,
    split_cpus,
    synthetic_process,
)
from kvlab.bench.client.endpoints import Endpoint, HarnessClient, RequestSpec
from kvlab.bench.client.gcpause import paused_gc
from kvlab.bench.records import ApiKind, Record, RunClock
from kvlab.errors import ConfigError


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


# The ingest burst's clients: the harness (kvlab's own HTTP client), the harness on
# aiohttp, and a plain aiohttp client that does nothing but parse events.
INGEST_CLIENTS = ("kvlab", "kvlab-aiohttp", "aiohttp-baseline")


@dataclass
class LoadResult:
    """One load level: errors plus client and server resource use."""

    label: str
    concurrency: int
    wall_s: float
    errors: Errors
    events_per_s: float
    tokens_per_s: float
    client_cpu_us_per_token: float | None
    server_cpu_frac: float | None  # server CPU seconds per wall second (1.0 = a core)
    server_lateness_p99_ms: float | None
    offered_events_per_s: float | None = None
    ok: bool | None = None  # ramp: on time and keeping up
    # "kernel": reads stamped by the kernel on arrival; "read": when the loop handled them
    stamps: str = "read"
    # kernel stamps only: how late the loop handled reads (= a read-time stamp's error)
    read_lag_ms: dict[str, float | None] = field(default_factory=dict)


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
    endpoint = Endpoint(base_url=base_url, api=api, model="synthetic", timeout_s=120.0)
    clock = RunClock(time.perf_counter_ns() - round(known_delay_ms * 1e6))
    true_t0 = clock.t0_ns + round(known_delay_ms * 1e6)
    tokens = int(schedule["tokens"])
    records: list[Record] = []
    stop_at = 0.0  # set when the streams start
    # Spread the streams over one whole request (TTFT + tokens x ITL), not one ITL:
    # closed-loop streams started together stay phase-locked, so every stream would
    # open its next request in the same instant and the per-request set-up of all of
    # them (~0.5 ms each) would land on the events of the others.
    if spread_s is None:
        spread_s = (schedule.get("ttft_ms", 0.0) + tokens * schedule.get("itl_ms", 0.0)) / 1e3
    spread_s = min(spread_s, duration_s / 2)  # every stream starts inside the level

    async def worker(i: int, client: HarnessClient) -> None:
        await asyncio.sleep(spread_s * i / concurrency)
        j = 0
        while j == 0 or time.perf_counter() < stop_at:  # at least one request per stream
            spec = RequestSpec(
                prompt="calibrate", max_tokens=tokens, stream=True, run_id="calibrate",
                mode=label, query_id=f"w{i}", repetition=j,
                params={"synthetic": {**schedule, "id": f"{label}-{i}-{j}"}},
            )
            records.append(await client.send(endpoint, spec, clock))
            j += 1

    async with aiohttp.ClientSession() as session:
        await get_json(session, base_url + "/synthetic/log?clear=1")
        await get_json(session, base_url + "/synthetic/stats?reset=1")
        cpu0, wall0 = time.process_time(), time.perf_counter()
        with paused_gc():
            async with HarnessClient(max_connections=concurrency, http_client=http_client,
                                     keep_read_lags=True) as client:
                begin_ns = clock.now()
                stop_at = time.perf_counter() + duration_s
                await asyncio.gather(*(worker(i, client) for i in range(concurrency)))
                lags = list(client.read_lags_ns or ())
        cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
        stats = await get_json(session, base_url + "/synthetic/stats")
        log = await get_json(session, base_url + "/synthetic/log?clear=1")
    errors = timestamp_errors(records, log, true_t0)
    events_s, tokens_s = steady_rate(records, begin_ns + round(spread_s * 1e9),
                                     begin_ns + round(duration_s * 1e9))
    return LoadResult(
        label=label, concurrency=concurrency, wall_s=wall, errors=errors,
        events_per_s=events_s, tokens_per_s=tokens_s,
        client_cpu_us_per_token=cpu / errors.tokens * 1e6 if errors.tokens else None,
        server_cpu_frac=None,  # filled by _level_with_cpu
        server_lateness_p99_ms=stats["lateness_ms"]["p99"],
        stamps="kernel" if lags else "read",
        read_lag_ms=pcts([lag / 1e6 for lag in lags]) if lags else {},
    )


# -- ingest: the harness against a plain aiohttp client ----------------------------------


async def _baseline_stream(session: aiohttp.ClientSession, url: str, body: dict[str, Any],
                           llama: bool) -> tuple[int, int]:
    """The plain client: read lines, json.loads each ``data:`` event; (events, tokens)."""
    events = tokens = 0
    async with session.post(url, json=body) as resp:
        async for line in resp.content:
            if not line.startswith(b"data: ") or line.startswith(b"data: [DONE]"):
                continue
            obj = json.loads(line[6:])
            if llama:
                if obj.get("stop"):
                    continue
                events += 1
                tokens += len(obj.get("tokens") or ())
            elif obj.get("choices") and obj["choices"][0].get("delta", {}).get("content"):
                events += 1
                tokens += 1
    return events, tokens


async def ingest_burst(base_url: str, client: str, settings: CalibrateSettings) -> IngestResult:
    """Streams with no delay between writes for ``ingest_duration_s``; one client's rate."""
    streams = settings.ingest_streams
    schedule = {"ttft_ms": 0.0, "itl_ms": 0.0, "tokens": settings.ingest_tokens,
                "tokens_per_event": 1, "events_per_write": settings.events_per_write}
    api = settings.api
    llama = api is ApiKind.LLAMACPP_COMPLETION
    path = "/completion" if llama else "/v1/chat/completions"
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
            body = {"prompt": "ingest", "n_predict": settings.ingest_tokens, "stream": True,
                    "model": "synthetic", "max_tokens": settings.ingest_tokens,
                    "messages": [{"role": "user", "content": "ingest"}],
                    "synthetic": schedule}
            while time.perf_counter() < stop_at:
                e, t = await _baseline_stream(session, base_url + path, body, llama)
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


async def _level_with_cpu(base_url: str, *args: Any, **kwargs: Any) -> LoadResult:
    scpu0 = await server_cpu_s(base_url)
    result = await run_level(base_url, *args, **kwargs)
    result.server_cpu_frac = (await server_cpu_s(base_url) - scpu0) / result.wall_s
    return result


async def calibrate_against(base_url: str, settings: CalibrateSettings,
                            progress: Any = None) -> CalibrationReport:
    """Run every phase against a synthetic server already listening at ``base_url``."""
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
            settings.known_delay_ms, http_client=settings.http_client))
    ingest: list[IngestResult] = []
    ramp: list[LoadResult] = []
    notes: list[str] = []
    max_events = max_tokens = None
    if settings.ingest:
        for name in INGEST_CLIENTS:
            say(f"ingest burst: {name}")
            ingest.append(await ingest_burst(base_url, name, settings))
        for res in ingest:
            if res.server_cpu_frac is not None and res.server_cpu_frac > 0.85:
                notes.append(f"ingest burst ({res.client}): the server used "
                             f"{res.server_cpu_frac:.0%} of a core and may have been the limit")
        ramp, max_events, max_tokens = await _ramp(base_url, settings, say)
        stopped = ramp[-1] if ramp and not ramp[-1].ok else None
        if stopped and stopped.server_cpu_frac and stopped.server_cpu_frac > 0.85:
            notes.append(f"the ramp stopped at {stopped.offered_events_per_s:,.0f} events/s "
                         f"with the server at {stopped.server_cpu_frac:.0%} of a core: the "
                         "limit found may be the server's, not the client's")
    return CalibrationReport(clock, accuracy, ingest, ramp, max_events, max_tokens, notes)


async def _ramp(base_url: str, settings: CalibrateSettings,
                say: Any) -> tuple[list[LoadResult], float | None, float | None]:
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
                                    http_client=settings.http_client)
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
