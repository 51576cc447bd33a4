"""One calibration level: its closed-loop streams, as a client process runs its share,
and its figures (:class:`LoadResult`) from every share and the server's send log.

A level is ``total`` streams against the synthetic server; stream ``i`` starts
``i / total`` of ``spread_s`` after the level's start and sends one request after the
other until ``duration_s`` has passed. :func:`run_streams` runs some of those streams
(all of them in one process; ``kvlab calibrate --workers N`` gives each worker every
N-th) through kvlab's own HTTP client, on a clock the caller gives, and returns what
this process saw: its records, the event loop's lag of each kernel-stamped read and
the CPU time it used.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from kvlab.bench.calibrate.accuracy import Errors, pcts, steady_rate, timestamp_errors
from kvlab.bench.client.endpoints import Endpoint, HarnessClient, RequestSpec
from kvlab.bench.client.gcpause import paused_gc
from kvlab.bench.plan.schedule import sleep_until
from kvlab.rundir import ApiKind, Record, RunClock


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
class Share:
    """One process's part of a level: ``records`` on a clock whose origin is ``t0_ns``
    (that process's ``perf_counter_ns``) and the level's start on it (``start_ns``), the
    loop lag of each kernel-stamped read (ns) and the process's CPU seconds over the
    level."""

    records: list[Record] = field(default_factory=list)
    lags_ns: list[int] = field(default_factory=list)
    cpu_s: float = 0.0
    t0_ns: int = 0
    start_ns: int = 0


async def run_streams(base_url: str, label: str, streams: Sequence[int], total: int,
                      duration_s: float, schedule: dict[str, Any], api: ApiKind,
                      spread_s: float, http_client: str, t0_ns: int,
                      start_ns: int | None = None) -> Share:
    """Streams ``streams`` (indices out of ``total``) of one level, on a clock with
    origin ``t0_ns``, starting at ``start_ns`` on it (waits until then; None: as soon
    as the client is ready)."""
    endpoint = Endpoint(base_url=base_url, api=api, model="synthetic", timeout_s=120.0)
    clock = RunClock(t0_ns)
    tokens = int(schedule["tokens"])
    share = Share(t0_ns=t0_ns)
    stop_ns = 0  # set at the start

    async def stream(i: int, client: HarnessClient) -> None:
        await sleep_until(clock, share.start_ns + round(spread_s * 1e9 * i / total))
        j = 0
        while j == 0 or clock.now() < stop_ns:  # at least one request per stream
            spec = RequestSpec(
                prompt="calibrate", max_tokens=tokens, stream=True, run_id="calibrate",
                mode=label, query_id=f"w{i}", repetition=j,
                params={"synthetic": {**schedule, "id": f"{label}-{i}-{j}"}},
            )
            share.records.append(await client.send(endpoint, spec, clock))
            j += 1

    cpu0 = time.process_time()
    with paused_gc():
        async with HarnessClient(max_connections=max(1, len(streams)),
                                 http_client=http_client, keep_read_lags=True) as client:
            # a start already passed (a slow set-up) counts from when the streams can go
            share.start_ns = max(clock.now(), start_ns if start_ns is not None else 0)
            stop_ns = share.start_ns + round(duration_s * 1e9)
            await asyncio.gather(*(stream(i, client) for i in streams))
            share.lags_ns = list(client.read_lags_ns or ())
    share.cpu_s = time.process_time() - cpu0
    return share


def rebased(share: Share, t0_ns: int) -> list[Record]:
    """``share``'s records with every clock field moved to a clock with origin ``t0_ns``
    (on the same machine's clock: the move is exact)."""
    shift = share.t0_ns - t0_ns
    if shift == 0:
        return share.records

    def moved(value: int | None) -> int | None:
        return None if value is None else value + shift

    return [r.model_copy(update={
        "t_sent": r.t_sent + shift, "t_end": r.t_end + shift,
        "t_headers": moved(r.t_headers), "t_first_chunk": moved(r.t_first_chunk),
        "t_first_content": moved(r.t_first_content), "t_last_content": moved(r.t_last_content),
        "chunk_ns": [t + shift for t in r.chunk_ns]}) for r in share.records]


def level_spread(schedule: dict[str, Any], duration_s: float, spread_s: float | None) -> float:
    """Seconds over which a level's streams start (default: one whole request).

    Spread the streams over one whole request (TTFT + tokens x ITL), not one ITL:
    closed-loop streams started together stay phase-locked, so every stream would open
    its next request in the same instant and the per-request set-up of all of them
    (~0.5 ms each) would land on the events of the others."""
    if spread_s is None:
        tokens = int(schedule["tokens"])
        spread_s = (schedule.get("ttft_ms", 0.0) + tokens * schedule.get("itl_ms", 0.0)) / 1e3
    return min(spread_s, duration_s / 2)  # every stream starts inside the level


def level_result(label: str, concurrency: int, wall_s: float, shares: list[Share],
                 log: dict[str, Any], stats: dict[str, Any], origin_ns: int, delay_ns: int,
                 spread_s: float, duration_s: float) -> LoadResult:
    """A level's figures from what every client process saw (``shares``) and the
    server's send log. Records are moved to one clock origin, ``origin_ns`` (this
    machine's clock, which the server shares: exact); ``delay_ns``: how late every
    reading was made to read (``known_delay_ms``). The steady part starts once every
    process has started its last stream."""
    records = [r for share in shares for r in rebased(share, origin_ns)]
    begin_ns = max(share.start_ns + share.t0_ns - origin_ns for share in shares)
    lags = [lag for share in shares for lag in share.lags_ns]
    cpu = sum(share.cpu_s for share in shares)
    errors = timestamp_errors(records, log, origin_ns + delay_ns)
    events_s, tokens_s = steady_rate(records, begin_ns + round(spread_s * 1e9),
                                     begin_ns + round(duration_s * 1e9))
    return LoadResult(
        label=label, concurrency=concurrency, wall_s=wall_s, errors=errors,
        events_per_s=events_s, tokens_per_s=tokens_s,
        client_cpu_us_per_token=cpu / errors.tokens * 1e6 if errors.tokens else None,
        server_cpu_frac=None,  # filled by _level_with_cpu
        server_lateness_p99_ms=stats["lateness_ms"]["p99"],
        stamps="kernel" if lags else "read",
        read_lag_ms=pcts([lag / 1e6 for lag in lags]) if lags else {},
    )
