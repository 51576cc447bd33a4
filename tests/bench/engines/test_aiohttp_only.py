"""The throwaway aiohttp engine: a run through it, resumed with the engine it recorded."""

from __future__ import annotations

from kvlab.bench.calibrate.server import synthetic_process
from kvlab.bench.engines.kinds import saved_engine
from kvlab.bench.records import read_records
from kvlab.bench.run.runner import RunOutput, RunRequest, run_experiment
from tests.experiments import experiment, synthetic


def test_a_run_through_aiohttp(tmp_path) -> None:
    from kvlab.bench.engines.aiohttp_only import AiohttpSettings

    with synthetic_process() as url:
        path = experiment("via-aiohttp", synthetic(url), workload=dict(
            queries=2, capacities=[256], output_tokens=4), load=dict(
            kind="concurrency", values=[2], requests=4)).write(tmp_path)
        result = run_experiment(RunRequest(path, engine=AiohttpSettings()),
                                RunOutput(tmp_path / "runs", html=False))
    rows = [r for r in read_records(result.run_dir.records_path) if not r.warmup]
    assert len(rows) == 4 and all(r.read_lag_ns is None for r in rows)  # no kernel stamps
    state = result.run_dir.state
    assert saved_engine(state.workers) == AiohttpSettings()
    assert state.sessions[-1].workers == {"engine": "aiohttp"}
    assert result.evaluation.counts["refused_rows"] == 0
