"""Real runs against kvlab serve (the toy model) and llama-server (the bundled Gemma 3
270M): the concurrency knee measured where its KV budget predicts it, at two budgets
each with no change to the code; a trace's prefix hits predicted block by block; the
server's memory sampled during every load point."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvlab.analysis.checks import KNEE, PROCESS_MEMORY, SERVER_HISTOGRAMS, TRACE_HITS
from kvlab.analysis.evaluate import Evaluation
from kvlab.run.runner import RunOutput, RunRequest, run_experiment
from tests.conftest import llama_server_missing
from tests.experiments import embedded, experiment, llamacpp

pytestmark = pytest.mark.slow
EXPERIMENTS = Path(__file__).parents[2] / "experiments"

# 32 prompt + 200 output tokens: 231 in KV, 15 blocks of 16 (2 at admission). A request
# lasts 0.25-1 s on the toy: at N = 1 no 0.25 s poll of /metrics may land inside it, and
# the point is then judged by the larger N that ran all its requests at once.
WORK = {"capacities": [512], "output_tokens": 200, "warmup": 0}
DATA = {"kind": "random", "rows": 6, "seed": 3,
        "input": {"distribution": "fixed", "value": 32},
        "output": {"distribution": "fixed", "value": 200}}
BUDGETS = {"pool-45": 45, "pool-75": 75}  # 3 and 5 sequences of 15 blocks


@pytest.fixture(scope="module")
def knee_run(tmp_path_factory: pytest.TempPathFactory) -> Evaluation:
    folder = tmp_path_factory.mktemp("knee")
    modes = [embedded(name, preset="toy", slots=8, kv_blocks=blocks, prefix_cache=False,
                      stream=True, api="llamacpp-completion")
             for name, blocks in BUDGETS.items()]
    path = experiment("toy-knee", *modes, workload=WORK, dataset=DATA,
                      protocol={"ignore_eos": True, "cache_prompt": False},
                      load={"kind": "concurrency", "values": [1, 2, 3, 4, 5, 6],
                            "rounds": 1}).write(folder)
    return run_experiment(RunRequest(path), RunOutput(folder / "runs", html=False)).evaluation


def test_two_budgets_each_measured_within_one_step_of_their_prediction(
        knee_run: Evaluation) -> None:
    checks = {c.mode: c for c in knee_run.found(KNEE)}
    assert set(checks) == set(BUDGETS)
    for name, blocks in BUDGETS.items():
        check = checks[name]
        assert check.knee is not None, check.describe()
        assert check.knee.capacity == blocks  # read back from the server's /metrics
        assert (check.prompt_tokens, check.output_tokens) == ((32, 32), (200, 200))
        assert check.knee.fits == blocks // 15
        assert check.verdict == "within one step", check.describe()
    assert checks["pool-75"].measured_first_past > checks["pool-45"].measured_first_past


# llama-server: 32 prompt tokens (33 with BOS) + 32 output in a slot of 512 cells; -np
# slots run at once, the next request waits for one. A request lasts 1-3 s here.
SLOTS = {"slots-2": 2, "slots-3": 3}


@pytest.fixture(scope="module")
def llama_knee_run(tmp_path_factory: pytest.TempPathFactory) -> Evaluation:
    reason = llama_server_missing()
    if reason:
        pytest.skip(reason)
    folder = tmp_path_factory.mktemp("llama-knee")
    modes = [llamacpp(name, "llamacpp-completion", threads=1, slots=slots, stream=True)
             for name, slots in SLOTS.items()]
    data = {**DATA, "output": {"distribution": "fixed", "value": 32}}
    path = experiment("llama-knee", *modes, workload={**WORK, "output_tokens": 32},
                      dataset=data, protocol={"ignore_eos": True, "cache_prompt": False},
                      load={"kind": "concurrency", "values": [1, 2, 3, 4],
                            "rounds": 1}).write(folder)
    return run_experiment(RunRequest(path), RunOutput(folder / "runs", html=False)).evaluation


@pytest.mark.llamacpp
def test_llama_servers_two_slot_counts_each_measured_within_one_step(
        llama_knee_run: Evaluation) -> None:
    checks = {c.mode: c for c in llama_knee_run.found(KNEE)}
    assert set(checks) == set(SLOTS)
    for name, slots in SLOTS.items():
        check = checks[name]
        assert check.knee is not None and check.server == "llamacpp", check.describe()
        assert (check.knee.fits, check.knee.first_past) == (slots, slots + 1)
        assert check.verdict == "within one step", check.describe()
    assert checks["slots-3"].measured_first_past > checks["slots-2"].measured_first_past
    rows = [m for m in llama_knee_run.found(PROCESS_MEMORY) if m.mode == "slots-2"]
    assert len(rows) == 4 and all(m.kv_bytes == checks["slots-2"].knee.budget_bytes
                                  for m in rows)
    # llama-server keeps no request histograms: the report says so, point by point
    assert llama_knee_run.found(SERVER_HISTOGRAMS) == []
    (line,) = llama_knee_run.not_measured[SERVER_HISTOGRAMS.key]
    assert line.startswith("not measured: llamacpp exposes no request histograms (")
    assert line.count(" @ ") == 8  # 2 servers × 4 load points
    assert KNEE.key not in llama_knee_run.not_measured  # both budgets were recorded


def test_the_servers_memory_is_sampled_against_its_kv_and_weights(
        knee_run: Evaluation) -> None:
    rows = {(m.mode, m.load): m for m in knee_run.found(PROCESS_MEMORY)}
    assert len(rows) == 2 * 6
    for (mode, _), m in rows.items():
        assert m.samples >= 2 and m.processes >= 1
        assert m.rss_max >= m.rss_start > 0
        assert m.weights_bytes is not None and m.weights_bytes > 0
        check = next(c for c in knee_run.found(KNEE) if c.mode == mode)
        assert check.knee is not None and m.kv_bytes == check.knee.budget_bytes
        assert m.rest == m.rss_max - m.weights_bytes - m.kv_bytes


def test_a_trace_predicts_the_prefix_hits_the_server_counts(tmp_path: Path) -> None:
    shipped = (EXPERIMENTS / "trace-cache.toml").read_text()
    path = tmp_path / "trace-cache.toml"
    path.write_text(shipped.replace('path = "data/trace.jsonl"',
                                    f'path = "{EXPERIMENTS / "data" / "trace.jsonl"}"'))
    evaluation = run_experiment(RunRequest(path), RunOutput(tmp_path / "runs", html=False)
                                ).evaluation
    points = {(p.mode, p.load): p for p in evaluation.found(TRACE_HITS)}
    assert set(points) == {(m, f"trace={s}") for m in ("large-pool", "small-pool")
                           for s in ("1.0", "2.0")}
    for p in points.values():
        assert not p.drift, p.to_dict()
        assert p.predicted == p.counted == p.cached
    # the second replay finds the first's blocks, fewer of them in the small pool
    large, small = points[("large-pool", "trace=2.0")], points[("small-pool", "trace=2.0")]
    assert large.predicted > small.predicted > 0
