"""A process tree's resident memory, sampled into process_memory.jsonl around a point."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

from kvlab.run.tree_memory import TreeMemoryRecorder, tree_rss
from kvlab.rundir import RunClock, read_memory_samples


def test_a_tree_sums_its_children() -> None:
    alone = tree_rss(os.getpid())
    assert alone is not None and alone[0] > 0
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        with_child = tree_rss(os.getpid())
        assert with_child is not None and with_child[1] == alone[1] + 1
        assert with_child[0] > alone[0]
    finally:
        child.kill()
        child.wait()
    assert tree_rss(child.pid) is None  # gone: nothing to sample


def test_a_point_is_sampled_before_during_and_after(tmp_path: Path) -> None:
    path = tmp_path / "process_memory.jsonl"

    async def point() -> None:
        async with TreeMemoryRecorder(os.getpid(), path, RunClock(), mode="m", capacity=512,
                                      load="c=2", interval_s=0.02):
            await asyncio.sleep(0.1)

    asyncio.run(point())
    samples = read_memory_samples(path)
    assert samples[0].phase == "start" and samples[-1].phase == "end"
    assert sum(s.phase == "during" for s in samples) >= 2
    assert all((s.mode, s.capacity, s.load) == ("m", 512, "c=2") for s in samples)
    assert all(s.rss_bytes > 0 and s.processes >= 1 for s in samples)
    assert [s.t_ns for s in samples] == sorted(s.t_ns for s in samples)
