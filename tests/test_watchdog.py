"""kvlab.watchdog on real processes.

- A parent that calls ``ensure()`` and starts children that escape everything else
  (a daemon in its own session re-parented to init at once, one deaf to SIGTERM, one
  with an environment of its own, without the marker) is killed with SIGKILL, or
  exits: none of its children survives it.
- ``kill -9`` of a real ``kvlab run`` in the middle of a load point leaves none of the
  processes it started: vLLM's API server, EngineCore, Worker and resource tracker;
  llama-server; ``kvlab serve``. Each such test notes every descendant of the run with
  psutil while it measures, SIGKILLs it once a measured answer is recorded, then finds
  none of them alive a few seconds later. Whatever a failing test finds is killed
  before it fails (never 4 GB of vLLM left on a shared machine).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest

from kvlab import watchdog
from tests.conftest import llama_server_missing, vllm_missing
from tests.experiments import embedded, experiment, llamacpp, synthetic, vllm

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="needs /proc")

# A parent that marks itself, then starts: a daemon (double fork + setsid: another
# session, re-parented to init before the watchdog can see it in the tree: found by the
# marker), a child that ignores SIGTERM, and a child with an environment of its own (no
# marker: found in the tree, as vLLM's EngineCore once it rewrites its environ). It
# prints their pids, then sleeps.
PARENT = textwrap.dedent("""
    import os, signal, subprocess, sys, time
    from kvlab import watchdog
    watchdog.ensure()
    sleeper = [sys.executable, "-c", "import time; time.sleep(300)"]
    deaf = [sys.executable, "-c", "import signal, time; "
            "signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(300)"]
    daemon = subprocess.run([sys.executable, "-c",
        "import os, subprocess, sys; p = subprocess.Popen(sys.argv[1:], "
        "start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL); "
        "print(p.pid)", *sleeper],
        capture_output=True, text=True, check=True).stdout.strip()
    others = [subprocess.Popen(deaf).pid,
              subprocess.Popen(sleeper, env={"PATH": os.environ["PATH"]}).pid]
    time.sleep(1.5)  # the watchdog has noted its children by now
    print(daemon, *others, flush=True)
    if sys.argv[1:] == ["exit"]:
        sys.exit(0)
    time.sleep(300)
""")


def running(pid: int) -> bool:
    """True while ``pid`` runs (a zombie waiting for its parent counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def still_running(pids: list[int], within_s: float) -> list[int]:
    deadline = time.monotonic() + within_s
    while any(running(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    return [p for p in pids if running(p)]


def start_parent(*args: str) -> tuple[subprocess.Popen[str], list[int]]:
    parent = subprocess.Popen([sys.executable, "-c", PARENT, *args], stdout=subprocess.PIPE,
                              text=True, start_new_session=True)
    assert parent.stdout is not None
    children = [int(p) for p in parent.stdout.readline().split()]
    assert len(children) == 3 and all(running(p) for p in children), children
    return parent, children


def kill_all(pids: list[int]) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def test_kill_9_of_the_parent_ends_every_child_even_a_daemon_deaf_to_sigterm() -> None:
    parent, children = start_parent()
    try:
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait()
        # the deaf one waits out the SIGTERM grace, then gets SIGKILL
        assert still_running(children, watchdog.GRACE_S + 10) == []
    finally:
        kill_all(children)


def test_a_normal_exit_ends_what_was_left_running_too() -> None:
    parent, children = start_parent("exit")
    try:
        assert parent.wait(timeout=30) == 0
        assert still_running(children, watchdog.GRACE_S + 10) == []
    finally:
        kill_all(children)


def test_the_marker_is_inherited_and_found() -> None:
    marker = watchdog.ensure()
    assert marker is not None and marker.startswith(watchdog.PREFIX)
    assert watchdog.ensure() == marker  # one watchdog per process
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    plain = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"],
                             env={k: v for k, v in os.environ.items() if k != marker})
    try:
        found = watchdog.holders(marker)
        assert child.pid in found and plain.pid not in found and os.getpid() not in found
        given = watchdog.marked({"A": "1"})
        assert given == {"A": "1", marker: str(os.getpid())}
        assert watchdog.marked(None) is None  # the child inherits the marked os.environ
    finally:
        for process in (child, plain):
            process.kill()
            process.wait()


def test_reap_ends_the_holders_and_spares_the_others() -> None:
    marker = watchdog.PREFIX + "test" + os.urandom(4).hex()
    held = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"],
                            env={**os.environ, marker: "1"})
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        time.sleep(0.2)  # its environ is readable once it has exec'd
        watchdog.reap(marker, grace_s=2)
        assert held.wait(timeout=5) == -signal.SIGTERM
        assert other.poll() is None
    finally:
        for process in (held, other):
            process.kill()
            process.wait()


# ------------------------------------------------------ kill -9 of a real kvlab run

AFTER_KILL_S = 20.0  # the watchdog's SIGTERM grace, then SIGKILL, with room for a busy machine


def measured_rows(runs: Path) -> int:
    found = list(runs.glob("*/records.jsonl"))
    rows = found[0].read_text().splitlines() if found else []
    return sum(1 for row in rows if row and not json.loads(row)["warmup"])


def alive(noted: dict[int, tuple[float, str]]) -> dict[int, str]:
    """The noted processes (pid -> create time, name) still running: pid -> name."""
    left = {}
    for pid, (created, _) in noted.items():
        try:
            process = psutil.Process(pid)
            if process.create_time() == created and process.status() != psutil.STATUS_ZOMBIE:
                left[pid] = " ".join(process.cmdline())[:120] or process.name()
        except psutil.Error:
            continue
    return left


def note(process: psutil.Process, noted: dict[int, tuple[float, str]]) -> None:
    """Add ``process``'s descendants now to ``noted`` (pid -> create time, and its name
    and command line as last seen: vLLM renames its processes after they start)."""
    for child in process.children(recursive=True):
        with contextlib.suppress(psutil.Error):
            created = noted.get(child.pid, (child.create_time(), ""))[0]
            if created == child.create_time():
                noted[child.pid] = (created,
                                    f"{child.name()}: {' '.join(child.cmdline())[:160]}")


def kill_mid_run(argv: list[str], tmp: Path, timeout_s: float = 600.0
                 ) -> tuple[list[str], dict[int, str]]:
    """Start ``kvlab run ARGV --out tmp/runs``, note its descendants until a measured
    row is recorded, SIGKILL it; returns (the name and command line of every
    descendant noted, those alive ``AFTER_KILL_S`` later)."""
    runs, log = tmp / "runs", tmp / "kvlab.log"
    with log.open("wb") as err:
        process = psutil.Popen([sys.executable, "-m", "kvlab", "run", *argv, "--out",
                                str(runs), "-q"], stdout=subprocess.DEVNULL, stderr=err,
                               start_new_session=True)
    noted: dict[int, tuple[float, str]] = {}
    try:
        deadline = time.monotonic() + timeout_s
        while measured_rows(runs) < 1:
            assert process.poll() is None, log.read_text()[-2000:]
            assert time.monotonic() < deadline, "no measured row in time"
            note(process, noted)
            time.sleep(0.1)
        note(process, noted)
        os.kill(process.pid, signal.SIGKILL)
        process.wait(timeout=30)
        killed = time.monotonic()
        while (left := alive(noted)) and time.monotonic() < killed + AFTER_KILL_S:
            time.sleep(0.2)
        print(f"{len(noted)} processes noted; {len(left)} left "
              f"{time.monotonic() - killed:.1f} s after kill -9")
        return [name for _, name in noted.values()], left
    finally:
        if process.poll() is None:
            process.kill()
        for pid in alive(noted):  # never leave a failing test's processes running
            with contextlib.suppress(psutil.Error):
                psutil.Process(pid).kill()


@pytest.mark.vllm
@pytest.mark.slow
def test_kill_9_during_a_vllm_point_leaves_no_vllm_process(tmp_path: Path) -> None:
    if reason := vllm_missing():
        pytest.skip(reason)
    path = experiment("vllm-kill", vllm("vllm", enforce_eager=True, kv_cache_space_gib=1,
                                        threads=1),
                      workload=dict(queries=30, capacities=[1024], prompt_fraction=0.5,
                                    output_tokens=8, warmup=1)).write(tmp_path, "vllm.toml")
    noted, left = kill_mid_run([str(path)], tmp_path)
    for name in ("VLLM::EngineCore", "VLLM::Worker", "resource_tracker"):
        assert any(name in n for n in noted), f"{name} was never seen: {noted}"
    assert not left, f"processes left after kill -9: {left}"


@pytest.mark.llamacpp
def test_kill_9_during_a_llama_server_point_leaves_no_llama_server(
        tmp_path: Path) -> None:
    if reason := llama_server_missing():
        pytest.skip(reason)
    path = experiment("llamacpp-kill", llamacpp("t1", "llamacpp-completion", threads=1),
                      workload=dict(queries=30, capacities=[512], output_tokens=16, warmup=1)
                      ).write(tmp_path, "llamacpp.toml")
    noted, left = kill_mid_run([str(path)], tmp_path, timeout_s=180)
    assert any("llama-server" in n for n in noted), noted
    assert not left, f"processes left after kill -9: {left}"


def test_kill_9_during_an_embedded_point_leaves_no_kvlab_serve(
        tmp_path: Path) -> None:
    path = experiment("embedded-kill", embedded("toy", "llamacpp-completion", preset="toy"),
                      workload=dict(queries=30, capacities=[192], output_tokens=16, warmup=1)
                      ).write(tmp_path, "embedded.toml")
    noted, left = kill_mid_run([str(path)], tmp_path, timeout_s=180)
    assert any("-m kvlab serve" in n for n in noted), noted
    assert not left, f"processes left after kill -9: {left}"


@pytest.mark.slow
def test_kill_9_with_a_local_ray_leaves_no_ray_process(tmp_path: Path) -> None:
    """Load workers on a local Ray kvlab starts (its GCS, raylet and workers) against
    the synthetic server."""
    pytest.importorskip("ray", reason="the ray extra is not installed (make test does)")
    from kvlab.bench.calibrate.server import synthetic_process

    with synthetic_process() as url:
        path = experiment("ray-kill", synthetic(url), workload=dict(
            queries=4, capacities=[256], output_tokens=8, warmup=1), load=dict(
            kind="concurrency", values=[2], requests=600)).write(tmp_path, "ray.toml")
        noted, left = kill_mid_run([str(path), "--workers", "2"], tmp_path, timeout_s=300)
    for name in ("raylet", "gcs_server", "ray::RayLoadWorker"):
        assert any(name in n for n in noted), f"{name} was never seen: {noted}"
    assert not left, f"processes left after kill -9: {left}"
