"""Seed 003's Compose sequence, run for real on the CPU profiles of experiments/compose.yaml.

Profile up, ``kvlab run --no-launch`` (it measures cpu@512 and stops where nothing
answers cpu@2048), the profile down and the next one up, ``kvlab run --resume``: as the
seed runs its six GPU profiles. It runs wherever a Docker daemon answers (``.ci/run``
installs and starts one where it can) and skips, saying why, elsewhere. The image is
built from what kvlab has (``kvlab llamacpp image``), cached under ~/.cache/kvlab.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from kvlab.servers.process import free_port
from tests.conftest import llama_server_missing

# a fresh machine builds the image first (debootstrap: about a minute) inside the fixture
pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]
ROOT = Path(__file__).resolve().parents[2]
COMPOSE_FILE = ROOT / "experiments" / "compose.yaml"
EXPERIMENT = ROOT / "experiments" / "llamacpp-compose-cpu.toml"
PROFILES = ("cpu-512", "cpu-2048")


@pytest.fixture(scope="module")
def compose() -> Iterator[tuple[list[str], dict[str, str]]]:
    """The compose command for a project of this test's own, on free ports, with the
    image built (or found); every profile is taken down at the end."""
    from kvlab.servers.docker_image import compose_command, docker_problem, ensure_image

    problem = docker_problem() or llama_server_missing()
    command = compose_command()
    if problem is None and command is None:
        problem = "neither docker compose nor docker-compose runs here"
    if problem is not None:
        pytest.skip(f"the Compose sequence needs Docker: {problem}")
    ensure_image()
    env = {**os.environ, "KVLAB_CPU_PORT_512": str(free_port()),
           "KVLAB_CPU_PORT_2048": str(free_port()), "KVLAB_CPU_THREADS": "2"}
    argv = [*(command or []), "-f", str(COMPOSE_FILE), "-p", f"kvlab-test-{os.getpid()}"]
    try:
        yield argv, env
    finally:
        for profile in PROFILES:
            subprocess.run([*argv, "--profile", profile, "down"], env=env,
                           capture_output=True, timeout=120, check=False)


def _compose(compose: tuple[list[str], dict[str, str]], *args: str) -> None:
    argv, env = compose
    done = subprocess.run([*argv, *args], env=env, capture_output=True, text=True,
                          timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-2000:]


def _kvlab(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kvlab", *args], capture_output=True,
                          text=True, timeout=600, check=False)


def test_the_seeds_sequence_measures_every_cpu_profile(
        compose: tuple[list[str], dict[str, str]], tmp_path: Path) -> None:
    from kvlab.analysis.valid_rows import current_rows
    from kvlab.analysis.validate import check_row
    from kvlab.experiment import load_experiment
    from kvlab.rundir import load_run

    _, env = compose
    urls = {c: f"http://127.0.0.1:{env[f'KVLAB_CPU_PORT_{c}']}" for c in (512, 2048)}
    _compose(compose, "--profile", "cpu-512", "up", "-d")
    first = _kvlab("run", str(EXPERIMENT), "--no-launch", "--out", str(tmp_path), "-q",
                   "--no-history", *[a for c, url in urls.items()
                                     for a in ("--endpoint", f"cpu@{c}={url}")])
    # cpu@2048 has no server yet: the run stops there, says how to go on, keeps its rows
    assert first.returncode != 0
    assert urls[2048] in first.stderr and "--resume" in first.stderr, first.stderr
    (run_dir,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    _compose(compose, "--profile", "cpu-512", "down")
    _compose(compose, "--profile", "cpu-2048", "up", "-d")
    resumed = _kvlab("run", "--resume", str(run_dir), "-q", "--no-history")
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    _compose(compose, "--profile", "cpu-2048", "down")

    queries = load_experiment(EXPERIMENT).workload.queries
    rows = [r for r in current_rows(load_run(run_dir).records) if not r.warmup]
    for capacity in (512, 2048):
        cell = [r for r in rows if r.capacity == capacity]
        assert len(cell) == queries, capacity
        assert all(check_row(r) == [] for r in cell), [check_row(r) for r in cell]
    manifest = json.loads((run_dir / "manifest.json").read_text())
    props = {s["capacity"]: s["facts"]["props"] for s in manifest["servers"]}
    assert sorted(props) == [512, 2048]  # each container's /props, kept in the run
    for capacity, found in props.items():
        assert found["default_generation_settings"]["n_ctx"] == capacity
