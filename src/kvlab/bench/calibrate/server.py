"""The synthetic server process ``kvlab calibrate`` measures against, and this process's set-up.

:func:`synthetic_process` starts ``python -m kvlab.serve.synthetic`` in its own process;
:func:`check_clock` checks its ``perf_counter`` is ours; :func:`split_cpus` and
:func:`raise_fd_limit` prepare this process for 1024 streams on separate CPUs.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from typing import Any

import aiohttp

from kvlab import watchdog
from kvlab.errors import ServerLaunchError

# -- the server process and its clock --------------------------------------------------------------


@contextlib.contextmanager
def synthetic_process(host: str = "127.0.0.1", timeout_s: float = 20.0,
                      cpus: set[int] | None = None,
                      options: Sequence[str] = ()) -> Iterator[str]:
    """Start ``python -m kvlab.serve.synthetic`` on a free port; yield its base URL.

    ``cpus``: the CPUs the server may run on (None: wherever the OS likes); ``options``:
    more of its command-line options (``["--slots", "1"]``)."""
    watchdog.ensure()  # it ends with this process, however that ends
    proc = subprocess.Popen(
        [sys.executable, "-m", "kvlab.serve.synthetic", "--host", host, "--port", "0",
         *options],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    if cpus:
        os.sched_setaffinity(proc.pid, cpus)
    try:
        assert proc.stdout is not None
        deadline = time.monotonic() + timeout_s
        line = ""
        while time.monotonic() < deadline and "listening on" not in line:
            line = proc.stdout.readline()
            if not line and proc.poll() is not None:
                break
        if "listening on" not in line:
            err = proc.stderr.read()[-500:] if proc.stderr and proc.poll() is not None else ""
            raise ServerLaunchError(f"the synthetic server did not start: {err or line!r}")
        yield line.rsplit(" ", 1)[-1].strip()
    finally:
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        for pipe in (proc.stdout, proc.stderr):
            if pipe is not None:
                pipe.close()


async def get_json(session: aiohttp.ClientSession, url: str) -> Any:
    """The JSON body of ``GET url``."""
    async with session.get(url) as resp:
        return await resp.json()


async def check_clock(base_url: str) -> dict[str, Any]:
    """Is the server's perf_counter the client's? (its reading must fall between ours)."""
    async with aiohttp.ClientSession() as session:
        before = time.perf_counter_ns()
        server = (await get_json(session, base_url + "/synthetic/clock"))["perf_counter_ns"]
        after = time.perf_counter_ns()
    shared = before <= server <= after
    return {"shared": shared, "implementation": time.get_clock_info("perf_counter").implementation,
            "round_trip_ms": (after - before) / 1e6}


async def server_cpu_s(base_url: str) -> float:
    """CPU seconds the synthetic server has used so far."""
    async with aiohttp.ClientSession() as session:
        return float((await get_json(session, base_url + "/synthetic/stats"))["cpu_s"])


def split_cpus() -> tuple[set[int] | None, set[int] | None]:
    """(client CPUs, server CPUs): the last usable CPU for the server; (None, None)
    where affinity is not available or there is a single CPU."""
    if not hasattr(os, "sched_getaffinity"):
        return None, None
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        return None, None
    return set(cpus[:-1]), {cpus[-1]}


def raise_fd_limit() -> None:
    """1024 streams need more than the common default of 1024 open files."""
    with contextlib.suppress(ImportError, ValueError, OSError):
        import resource

        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if soft < 8192:
            resource.setrlimit(resource.RLIMIT_NOFILE, (min(8192, hard), hard))
