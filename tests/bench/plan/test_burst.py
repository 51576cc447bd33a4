"""The throwaway burst strategy, end to end: file, plan, executor, shards, report."""

from __future__ import annotations

from kvlab.bench.client.endpoints import RequestSpec
from kvlab.bench.engines.memory import MemorySettings
from kvlab.bench.records import read_records
from kvlab.bench.run.journal import Journal
from kvlab.bench.run.planner import RunRequest, plan_new
from kvlab.bench.run.reporter import SilentReporter
from kvlab.bench.run.rundir import create_run
from kvlab.bench.run.runner import drive, evaluate_run
from tests.bench.run.test_executor import MemoryTarget, memory, no_socket  # noqa: F401
from tests.experiments import experiment


def test_a_burst_sweep_runs_and_reports(tmp_path) -> None:
    path = experiment("bursts", memory(), workload=dict(queries=2, capacities=[256],
                                                        output_tokens=2),
                      load=dict(kind="burst", values=[2, 3], gap_s=0.02, requests=6)
                      ).write(tmp_path)
    plan, exp = plan_new(RunRequest(path))
    assert [s.point.describe() for s in plan.steps if hasattr(s, "point")] == [
        "6 requests in bursts of 2, 0.02 s apart", "6 requests in bursts of 3, 0.02 s apart"]
    specs = [RequestSpec(prompt="p", max_tokens=2, position=i) for i in range(6)]
    shards = plan.steps[2].point.shard(specs, 2)  # type: ignore[attr-defined]
    assert sorted(s.position for sh in shards for s in sh.specs) == list(range(6))
    run_dir = create_run(tmp_path / "runs", path, exp)
    drive(plan, Journal(run_dir, SilentReporter()), MemorySettings().build(),
          targets=MemoryTarget)
    rows = [r for r in read_records(run_dir.records_path) if not r.warmup]
    assert sorted({r.load for r in rows}) == ["burst=2", "burst=3"] and len(rows) == 12
    evaluation = evaluate_run(run_dir.path)
    assert [(s.load, s.kind, s.requests) for s in evaluation.load] == [
        ("burst=2", "burst", 6), ("burst=3", "burst", 6)]
    assert "burst=3" in run_dir.report_path.read_text()
