"""The cross-check: four clients measure one synthetic server, back to back, in rounds.

:func:`run_crosscheck` starts ``kvlab serve-synthetic`` once on the schedule, then in
each round runs every client on the same job (:mod:`.clients`), in an order rotated by
one each round so that no client always goes first or last. Each client's files are
read back as records (its own clock), its errors set against the schedule
(:mod:`.accuracy`), and each peer's file against what the peer printed. A client whose
command fails is one line naming it and its exit status; the others go on.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from kvlab.analysis.stats import Interval, percentile
from kvlab.crosscheck.accuracy import RoundTrip, Schedule, client_errors, round_trip
from kvlab.crosscheck.clients import CLIENTS, Job
from kvlab.crosscheck.result import ClientLine, CrossCheck, Figure, RoundTripLine, save
from kvlab.errors import ConfigError, KvlabError, ServerLaunchError
from kvlab.rundir import Record
from kvlab.servers.preflight import cpu_flags
from kvlab.servers.process import free_port
from kvlab.servers.vllm_env import find_vllm
from kvlab.servers.vllm_model import convert_bundled
from kvlab.store.runs import load_run_or_import

Progress = Callable[[str], None]
CLIENT_TIMEOUT_S = 300  # one client's run of one round, start-up included
PROMPT = ("Request {i} of the cross-check: in two sentences, say what a KV cache keeps "
          "between two decoding steps and why.")


@dataclass
class _Runs:
    """What one client left over the rounds."""

    rows: list[Record] = field(default_factory=list)
    trips: list[RoundTrip] = field(default_factory=list)
    late_ms: list[float] = field(default_factory=list)  # the server's first tokens, late by
    answered: int = 0  # requests the server answered while the client ran
    seconds: float = 0.0
    failed: bool = False


def tokenizer_dir() -> Path:
    """The bundled Gemma 3 270M's tokenizer, in the checkpoint kvlab converts for vLLM."""
    return convert_bundled(find_vllm()).path


def _start_server(schedule: Schedule, log: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    proc = subprocess.Popen(
        [sys.executable, "-m", "kvlab.serve.synthetic", "--port", str(port),
         "--ttft-ms", str(schedule.ttft_ms), "--itl-ms", str(schedule.itl_ms),
         "--tokens", str(schedule.tokens)],
        stdout=log.open("wb"), stderr=subprocess.STDOUT, start_new_session=True)
    for _ in range(100):
        try:
            with urllib.request.urlopen(url + "/health", timeout=1) as answer:
                if answer.status == 200:
                    return proc, url
        except OSError:
            if proc.poll() is not None:
                break
            time.sleep(0.1)
    proc.terminate()
    raise ServerLaunchError(f"the synthetic server did not answer {url}/health; see {log}")


def _get(url: str) -> Any:
    try:
        with urllib.request.urlopen(url, timeout=5) as answer:
            return json.loads(answer.read())
    except (OSError, ValueError):
        return None


def _lateness_p99(url: str) -> float | None:
    """The p99 of every write's lateness against its deadline (the server's stats)."""
    value = ((_get(url + "/synthetic/stats") or {}).get("lateness_ms") or {}).get("p99")
    return float(value) if isinstance(value, int | float) else None


def _first_token_lateness(url: str, schedule: Schedule) -> list[float]:
    """How late the server wrote each first token since its log was last read (ms
    after t_received + TTFT), the log emptied: what of a client's TTFT error is the
    server's own."""
    log = _get(url + "/synthetic/log?clear=1") or {}
    return [(e["send_ns"][0] - e["t_recv_ns"]) / 1e6 - schedule.ttft_ms
            for e in log.values() if isinstance(e, dict) and e.get("send_ns")]


def _one(name: str, job: Job, k: int, runs: _Runs, failures: list[str],
         schedule: Schedule, progress: Progress) -> None:
    """Run client ``name`` on ``job`` (round ``k``); keep its rows or one failure line."""
    client = CLIENTS[name]
    _first_token_lateness(job.url, schedule)  # empties the server's log
    job.out.mkdir(parents=True, exist_ok=True)
    log = job.out / f"{name}.log"
    started = time.monotonic()
    try:
        argv = client.command(job)
        with log.open("wb") as sink:
            done = subprocess.run(argv, stdout=sink, stderr=subprocess.STDOUT,
                                  env=client.environment(), timeout=CLIENT_TIMEOUT_S,
                                  check=False)
        status = done.returncode
    except subprocess.TimeoutExpired:
        status = None
    except KvlabError as exc:  # not installed: the one line says what to run
        failures.append(f"{client.program} (round {k}): {exc}")
        runs.failed = True
        return
    runs.seconds += time.monotonic() - started
    late = _first_token_lateness(job.url, schedule)
    runs.late_ms += late
    runs.answered += len(late)
    if status != 0:
        what = f"ran past {CLIENT_TIMEOUT_S} s" if status is None else f"exited {status}"
        failures.append(f"{client.program} (round {k}): {what}; log: {log}")
        runs.failed = True
        return
    try:
        result = client.result(job)
        rows = [r for r in load_run_or_import(result, job.tokens).records if not r.warmup]
        reported = client.reported(job)
    except (KvlabError, OSError, ValueError, KeyError, TypeError, IndexError) as exc:
        failures.append(f"{client.program} (round {k}): its result could not be read "
                        f"({type(exc).__name__}: {exc}); log: {log}")
        runs.failed = True
        return
    runs.rows += rows
    if reported is not None:
        runs.trips.append(round_trip(name, str(result), rows, reported.requests,
                                     reported.median_ttft_ms))
    progress(f"round {k}: {client.program}: {len(rows)} requests in its file, "
             f"{len(late)} answered by the server, in {time.monotonic() - started:.1f} s")


def _figure(value: float | None, interval: Interval | None) -> Figure:
    if interval is None:
        return Figure(value=value)
    return Figure(value=value, low=interval.low, high=interval.high)


def run_crosscheck(out: Path, schedule: Schedule | None = None,
                   clients: Sequence[str] = tuple(CLIENTS), command: str = "",
                   progress: Progress = lambda _: None) -> CrossCheck:
    """Run the cross-check into ``out`` (one folder per round and client, then
    crosscheck.json and crosscheck.md) and return it."""
    schedule = schedule or Schedule()
    unknown = [c for c in clients if c not in CLIENTS]
    if unknown or not clients:
        raise ConfigError(f"unknown client {unknown[0] if unknown else '(none)'}; "
                          f"choose among {', '.join(CLIENTS)}")
    out.mkdir(parents=True, exist_ok=True)
    started_at = datetime.now().astimezone().isoformat(timespec="seconds")
    tokenizer = tokenizer_dir()
    prompts = tuple(PROMPT.format(i=i) for i in range(schedule.requests))
    load_before = list(os.getloadavg())
    runs = {name: _Runs() for name in clients}
    failures: list[str] = []
    order: list[list[str]] = []
    proc, url = _start_server(schedule, out / "synthetic-server.log")
    try:
        for k in range(1, schedule.rounds + 1):
            shift = (k - 1) % len(clients)
            names = [*clients[shift:], *clients[:shift]]
            order.append(names)
            for name in names:
                if runs[name].failed:
                    continue  # one line per peer is enough; the rest goes on
                job = Job(url, prompts, schedule.tokens, out / f"round-{k}" / name,
                          tokenizer)
                _one(name, job, k, runs[name], failures, schedule, progress)
        lateness = _lateness_p99(url)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    lines = []
    for name in clients:
        if runs[name].failed and not runs[name].rows:
            continue
        errors = client_errors(name, runs[name].rows, schedule)
        client = CLIENTS[name]
        lines.append(ClientLine(
            client=name, program=client.program, version=client.version(),
            expected=errors.expected, recorded=errors.recorded,
            answered=runs[name].answered, counted=errors.counted,
            problems=list(errors.problems),
            ttft_median=_figure(errors.ttft.median_ms, errors.ttft.median_ci),
            ttft_p99=_figure(errors.ttft.p99_ms, errors.ttft.p99_ci),
            itl_median=_figure(errors.itl.median_ms, errors.itl.median_ci),
            itl_p99=_figure(errors.itl.p99_ms, errors.itl.p99_ci),
            within_tolerance=errors.within(schedule.tolerance_ms),
            server_late_median_ms=percentile(runs[name].late_ms, 50),
            server_late_p99_ms=percentile(runs[name].late_ms, 99),
            seconds=round(runs[name].seconds, 1)))
    trips = [RoundTripLine(client=name, file=t.file, printed_requests=t.printed_requests,
                           read_requests=t.read_requests,
                           printed_median_ttft_ms=t.printed_median_ttft_ms,
                           read_median_ttft_ms=t.read_median_ttft_ms,
                           relative_error=t.relative_error, holds=t.holds())
             for name in clients for t in runs[name].trips]
    result = CrossCheck(
        schedule={"ttft_ms": schedule.ttft_ms, "itl_ms": schedule.itl_ms,
                  "tokens": schedule.tokens, "requests": schedule.requests,
                  "rounds": schedule.rounds},
        schedule_text=schedule.describe(), tolerance_ms=schedule.tolerance_ms, order=order,
        clients=lines, round_trips=trips, failures=failures,
        server_lateness_p99_ms=lateness, load_before=load_before,
        load_after=list(os.getloadavg()), cpu_flags=cpu_flags() or [],
        command=command, started_at=started_at)
    save(result, out)
    return result
