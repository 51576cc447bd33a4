"""kill -9 in the middle of a load point loses at most the rows in flight.

A real ``kvlab run`` (a subprocess) measures a concurrency point against the synthetic
server, started here so it outlives the run. Once records land, the run is killed
with SIGKILL mid-point. Every answer the server finished before that must be in
records.jsonl except those the client was still reading: at most the point's
concurrency. (A writer that kept the point's rows until its end would lose them all.)
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request

from kvlab.bench.calibrate.server import synthetic_process
from kvlab.rundir import read_records
from tests.experiments import Experiment, experiment, synthetic

USERS = 1
TOKENS = 20


def killed(url: str) -> Experiment:
    """A concurrency point far longer than the test lets it run."""
    return experiment("killed", synthetic(url), workload=dict(
        capacities=[256], queries=3, output_tokens=TOKENS, warmup=1), load=dict(
        kind="concurrency", values=[USERS], requests=2000))


def test_kill_9_mid_point_loses_at_most_the_rows_in_flight(tmp_path) -> None:
    with synthetic_process() as url:
        path = killed(url).write(tmp_path)
        process = subprocess.Popen(
            [sys.executable, "-m", "kvlab", "run", str(path), "--out", str(tmp_path / "runs"),
             "-q"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            deadline = time.monotonic() + 120
            lines = 0
            while lines < 60 and time.monotonic() < deadline and process.poll() is None:
                time.sleep(0.02)
                found = list((tmp_path / "runs").glob("*/records.jsonl"))
                lines = found[0].read_bytes().count(b"\n") if found else 0
            time.sleep(0.37)  # then kill at a moment unrelated to the last write seen
            assert process.poll() is None, process.stderr.read() if process.stderr else ""
            os.kill(process.pid, signal.SIGKILL)
            process.wait(timeout=30)
        finally:
            if process.poll() is None:
                process.kill()
        with urllib.request.urlopen(f"{url}/synthetic/log", timeout=10) as answer:
            log = json.loads(answer.read())
    assert lines >= 60, "no record reached the file mid-point"
    finished = [e for e in log.values() if e["schedule"]["tokens"] == TOKENS]  # not probes
    run_dir = next((tmp_path / "runs").iterdir())
    records = read_records(run_dir / "records.jsonl")  # a torn last line is skipped
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert "points_done" not in manifest  # killed mid-point
    assert len(finished) < 2000  # the point was far from its end
    lost = len(finished) - len(records)
    assert 0 <= lost <= USERS, f"{len(finished)} answers finished, {len(records)} recorded"
