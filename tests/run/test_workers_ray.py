"""kvlab run --workers on Ray: a two-node cluster (Ray's own test-cluster utility) and
a local Ray kvlab starts, against the real synthetic server.

- the same validated rows as one process, with records from both nodes, each worker's
  clock offset within its bound of zero (the two nodes share this machine's clock);
- Ctrl-C (SIGINT to a real ``kvlab run``) stops every worker and keeps every record
  finished before it; the worker processes (and, for a local Ray, every process kvlab
  started) are gone; ``--resume`` completes the run.

Ray's object stores are kept at 100 MB: the machine is shared.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from kvlab.bench.calibrate.server import synthetic_process
from kvlab.bench.drivers.ray import RayDriverSettings
from kvlab.records import read_records
from kvlab.run.runner import RunOutput, RunRequest, run_experiment
from tests.experiments import experiment, synthetic

cluster_utils = pytest.importorskip("ray.cluster_utils",
                                    reason="the ray extra is not installed (make test does)")

STORE = 100 * 2**20


@pytest.fixture(scope="module")
def cluster() -> Iterator[object]:
    """Two Ray nodes on this machine, one CPU each (one worker each)."""
    c = cluster_utils.Cluster(initialize_head=True, head_node_args={
        "num_cpus": 1, "object_store_memory": STORE, "include_dashboard": False})
    try:
        c.add_node(num_cpus=1, object_store_memory=STORE)
        c.wait_for_nodes()
        yield c
    finally:
        c.shutdown()


@pytest.fixture(scope="module")
def synthetic_url() -> Iterator[str]:
    with synthetic_process() as url:
        yield url


def sharded(tmp_path: Path, url: str, requests: int = 16, tokens: int = 4) -> Path:
    """Concurrency 2 against the synthetic server, written in ``tmp_path``."""
    return experiment("sharded", synthetic(url), workload=dict(
        capacities=[256], queries=4, output_tokens=tokens, warmup=1), load=dict(
        kind="concurrency", values=[2], requests=requests)).write(tmp_path)


def alive(pid: int) -> bool:
    """True while ``pid`` is a process that has not exited (a zombie counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def descendants(pid: int) -> set[int]:
    """Every process below ``pid`` now (from /proc)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as stat:
                    ppid = int(stat.read().rsplit(")", 1)[1].split()[1])
            except (FileNotFoundError, ProcessLookupError, IndexError):
                continue
            children.setdefault(ppid, []).append(int(entry))
    found, todo = set(), [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.add(child)
            todo.append(child)
    return found


def gone_within(pids: set[int], seconds: float) -> set[int]:
    """The processes of ``pids`` still alive after waiting up to ``seconds``."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and any(alive(p) for p in pids):
        time.sleep(0.2)
    return {p for p in pids if alive(p)}


def test_two_nodes_give_the_rows_of_one_process_from_both_nodes(tmp_path, cluster,
                                                                 synthetic_url) -> None:
    path = sharded(tmp_path, synthetic_url)
    alone = run_experiment(RunRequest(path), RunOutput(tmp_path / "one", html=False))
    shared = run_experiment(RunRequest(path, driver=RayDriverSettings(count=2,
                                       address=cluster.address, per_node=1)),
                            RunOutput(tmp_path / "two", html=False))

    def rows(result) -> list[tuple]:
        return sorted((r.mode, r.capacity, r.query_id, r.repetition, r.load, r.position,
                       r.prompt_sha256, r.prompt_tokens, r.output_tokens, r.outcome)
                      for r in read_records(result.run_dir.records_path) if not r.warmup)

    assert rows(shared) == rows(alone) and len(rows(alone)) == 16
    for result in (alone, shared):  # every row validated and counted
        assert result.evaluation.counts["refused_rows"] == 0
        assert [(s.queries, s.refused) for s in result.evaluation.summaries] == [(16, 0)]
    manifest = shared.run_dir.manifest()
    facts = manifest["invocations"][0]["workers"]
    node_of = {w["worker"]: w["node_id"] for w in facts["workers"]}
    records = [r for r in read_records(shared.run_dir.records_path) if not r.warmup]
    assert {node_of[r.worker] for r in records} == {n.node_id for n in
                                                    cluster.list_all_nodes()}
    assert facts["nodes"] == 2 and manifest["workers"]["per_node"] == 1
    (point,) = manifest["worker_clocks"]
    assert [c["worker"] for c in point["clocks"]] == [0, 1]
    for clock in point["clocks"]:  # one machine, one clock: no offset beyond the bound
        assert abs(clock["offset_ns"]) <= clock["error_ns"] < 50_000_000
    ends = [r.t_end for r in read_records(shared.run_dir.records_path)]
    assert ends == sorted(ends)  # one file, in completion order
    report = shared.run_dir.report_path.read_text()
    assert "## Load workers and clocks" in report and "on 2 node(s)" in report


def interrupt(args: list[str], records: Path, cwd: Path, enough: int = 30
              ) -> tuple[subprocess.Popen[str], set[int], str]:
    """Start ``kvlab run`` ARGS, wait for ``enough`` records, note its processes and
    send it SIGINT (Ctrl-C); returns it exited, the processes it had, its stderr."""
    process = subprocess.Popen([sys.executable, "-m", "kvlab", *args], cwd=cwd,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                               start_new_session=True)
    seen: set[int] = set()
    try:
        deadline = time.monotonic() + 240
        lines = 0
        while lines < enough and time.monotonic() < deadline and process.poll() is None:
            time.sleep(0.05)
            seen |= descendants(process.pid)
            found = list(records.glob("*/records.jsonl"))
            lines = found[0].read_bytes().count(b"\n") if found else 0
        assert process.poll() is None, process.stderr.read() if process.stderr else ""
        seen |= descendants(process.pid)
        os.kill(process.pid, signal.SIGINT)
        _, err = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
    return process, seen, err


def finished_answers(url: str, tokens: int) -> int:
    with urllib.request.urlopen(f"{url}/synthetic/log?clear=1", timeout=10) as answer:
        log = json.loads(answer.read())
    return sum(1 for e in log.values() if e["schedule"]["tokens"] == tokens)


def test_ctrl_c_on_a_cluster_stops_the_workers_keeps_the_records_and_resumes(
        tmp_path, cluster, synthetic_url) -> None:
    path = sharded(tmp_path, synthetic_url, requests=600, tokens=8)
    runs = tmp_path / "runs"
    finished_answers(synthetic_url, 8)  # clear the log
    process, _, err = interrupt([
        "run", str(path), "--out", str(runs), "-q", "--workers", "2", "--ray-address",
        cluster.address, "--workers-per-node", "1"], runs, tmp_path)
    answered = finished_answers(synthetic_url, 8)
    assert process.returncode == 130, err
    message = err.strip()
    assert message.startswith("error: interrupted: ") and "\n" not in message, err
    run_dir = next(runs.iterdir())
    manifest = json.loads((run_dir / "manifest.json").read_text())
    pids = {w["pid"] for w in manifest["invocations"][0]["workers"]["workers"]}
    assert gone_within(pids, 30) == set()  # no worker left behind
    assert cluster.remaining_processes_alive()  # the cluster itself keeps running
    assert len(cluster.global_state._live_node_ids()) == 2
    records = read_records(run_dir / "records.jsonl")
    assert f"{len(records)} records kept" in message
    measured = [r for r in records if not r.warmup]
    assert {r.worker for r in measured} == {0, 1}
    lost = answered - len(records)
    assert 0 <= lost <= 2, f"{answered} answers finished, {len(records)} recorded"
    assert len(measured) < 600  # stopped mid-point
    resumed = subprocess.run([sys.executable, "-m", "kvlab", "run", "--resume", str(run_dir),
                              "-q", "--json"], capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stderr
    evaluation = json.loads(resumed.stdout.strip().splitlines()[-1])
    assert evaluation["counts"]["refused_rows"] == 0
    final = json.loads((run_dir / "manifest.json").read_text())
    assert final["points_done"] == [["chat", 256, "c=2"]]
    assert final["invocations"][1]["workers"]["address"] == cluster.address  # kept for resume


def test_ctrl_c_with_a_local_ray_leaves_no_process_behind(tmp_path, synthetic_url) -> None:
    path = sharded(tmp_path, synthetic_url, requests=600, tokens=8)
    runs = tmp_path / "runs"
    process, seen, err = interrupt(["run", str(path), "--out", str(runs), "-q", "--workers",
                                    "2"], runs, tmp_path)
    assert process.returncode == 130, err
    assert len(seen) >= 3  # Ray's own processes and the two workers were there
    assert gone_within(seen, 30) == set(), "processes left behind"
    run_dir = next(runs.iterdir())
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert {w["pid"] for w in manifest["invocations"][0]["workers"]["workers"]} <= seen
    assert len(read_records(run_dir / "records.jsonl")) >= 30
