"""The shipped workload experiments, run end to end on the embedded or synthetic server.

Each one runs as shipped (a synthetic server's URL replaced by the one this test
started); the checks are on what each row asked for and what the server counted,
never on speed.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvlab.analysis.validate import Reason, check_row
from kvlab.bench.calibrate.server import synthetic_process
from kvlab.bench.plan.loads.trace import TracePoint
from kvlab.run.runner import RunOutput, RunRequest, RunResult, run_experiment
from kvlab.rundir import Prepared, Record, read_records

EXPERIMENTS = Path(__file__).resolve().parents[2] / "experiments"


def shipped(name: str, tmp_path: Path, url: str | None = None) -> RunResult:
    """Run experiments/<name>.toml from a copy beside its data (a synthetic server's
    port replaced by ``url``)."""
    text = (EXPERIMENTS / f"{name}.toml").read_text()
    path = EXPERIMENTS / f"{name}.toml"
    if url is not None:
        path = tmp_path / f"{name}.toml"
        path.write_text(text.replace("http://127.0.0.1:8090", url).replace(
            '"data/', f'"{EXPERIMENTS}/data/'))
    return run_experiment(RunRequest(path), RunOutput(tmp_path / "runs", html=False))


def measured(result: RunResult) -> list[Record]:
    return [r for r in read_records(result.run_dir.records_path) if not r.warmup]


def prepared(result: RunResult) -> Prepared:
    return Prepared.load(result.run_dir.prepared_path)


@pytest.mark.slow
def test_jsonl_rows_ask_for_their_own_output_lengths(tmp_path) -> None:
    result = shipped("dataset-jsonl", tmp_path)
    rows = measured(result)
    asked = {json.loads(line)["id"]: json.loads(line)["max_tokens"] for line in
             (EXPERIMENTS / "data" / "prompts.jsonl").read_text().splitlines()}
    assert {r.query_id: r.requested_tokens for r in rows} == asked
    assert all(r.output_tokens == r.requested_tokens for r in rows)
    assert result.evaluation.counts["refused_rows"] == 0
    # a row is judged against its own request: one short of it is refused
    short = rows[0].model_copy(update={"output_tokens": rows[0].requested_tokens - 1})
    (violation,) = check_row(short)
    assert violation.reason is Reason.OUTPUT_TOKENS
    assert violation.detail == (f"{short.output_tokens} output tokens, "
                                f"{short.requested_tokens} requested")
    manifest = result.run_dir.manifest()
    assert manifest["dataset_file"] == str(EXPERIMENTS / "data" / "prompts.jsonl")
    assert "Prompts = the rows of" in result.run_dir.report_path.read_text()


@pytest.mark.slow
def test_csv_rows_through_a_column_mapping_on_the_chat_api(tmp_path) -> None:
    result = shipped("dataset-csv", tmp_path)
    rows = measured(result)
    assert [r.query_id for r in rows] == ["h1", "h2", "h3", "h4", "h5"]
    assert [r.requested_tokens for r in rows] == [10, 18, 26, 14, 6]
    assert result.evaluation.counts["refused_rows"] == 0
    h3 = next(p for p in prepared(result).prompts[256] if p.query_id == "h3")
    assert "\nand who trims them?" in h3.prompt and h3.source.endswith("questions.csv:4")


@pytest.mark.slow
def test_sharegpt_answers_size_the_outputs(tmp_path) -> None:
    result = shipped("dataset-sharegpt", tmp_path)
    by_id = {p.query_id: p for p in prepared(result).prompts[512]}
    assert list(by_id) == ["lamp", "ferry", "nets", "fog"]
    assert by_id["ferry"].prompt == "How often does the ferry cross to the island?"
    # the toy model's tokens are bytes: the answer's length, bounded to 4..48
    answer = "Three times a day in summer and once a day in winter."
    assert by_id["ferry"].output_tokens == min(48, len(answer.encode()))
    rows = measured(result)
    assert all(r.output_tokens == by_id[r.query_id].output_tokens for r in rows)
    assert result.evaluation.counts["refused_rows"] == 0


@pytest.mark.slow
def test_random_prompts_have_the_drawn_lengths_the_server_counted(tmp_path) -> None:
    result = shipped("dataset-random", tmp_path)
    plan = {p.query_id: p for p in prepared(result).prompts[512]}
    rows = measured(result)
    assert len(rows) == 12 and result.evaluation.counts["refused_rows"] == 0
    for r in rows:
        assert r.prompt_tokens == plan[r.query_id].target_tokens == plan[r.query_id].tokens
        assert r.requested_tokens == plan[r.query_id].output_tokens
    assert len({r.prompt_tokens for r in rows}) > 6


@pytest.mark.slow
def test_shared_prefixes_are_answered_from_the_cache_only_where_reuse_is_asked(
        tmp_path) -> None:
    result = shipped("prefix-shared", tmp_path)
    rows = measured(result)
    reuse = sorted((r for r in rows if r.mode == "reuse"), key=lambda r: r.position)
    recompute = [r for r in rows if r.mode == "recompute"]
    assert all(r.cached_tokens == 0 for r in recompute)
    # in each group of 4 the rows after the first take the 192-token prefix (and the
    # blank line after it) from the cache; the first finds nothing (not even the
    # warm-up's prompt, which opens with its own words)
    hits = [r.cached_tokens or 0 for r in reuse]
    assert all(hits[i] >= 192 for i in range(12) if i % 4), hits
    assert [hits[i] for i in (0, 4, 8)] == [0, 0, 0], hits
    evaluation = result.evaluation
    (split,) = [s for s in evaluation.prefix_cache if s.mode == "reuse"]
    assert split.hits == 9 and split.ttft_hit_ms.count == 9 and split.ttft_miss_ms.count == 3
    assert [p.status for p in evaluation.prefix_reuse] == ["verified", "reuse allowed"]
    assert evaluation.counts["refused_rows"] == 0
    assert [c.status for c in evaluation.comparisons] == ["ok"]
    report = result.run_dir.report_path.read_text()
    assert "## Prefix cache" in report and "Cached / prompt tokens per row, reuse" in report


@pytest.mark.slow
def test_unique_prefixes_leave_the_cache_nothing_to_reuse(tmp_path) -> None:
    result = shipped("prefix-unique", tmp_path)
    rows = measured(result)
    assert len(rows) == 8 and all(r.cached_tokens == 0 for r in rows)
    (split,) = result.evaluation.prefix_cache
    assert split.hits == 0 and split.ttft_miss_ms.count == 8


@pytest.mark.slow
def test_multi_turn_prompts_grow_as_sized_and_reuse_the_earlier_turns(tmp_path) -> None:
    result = shipped("multi-turn", tmp_path)
    evaluation = result.evaluation
    assert evaluation.counts["refused_rows"] == 0
    checks = {c.conversation: c for c in evaluation.turns}
    assert sorted(checks) == ["ferry", "fog", "lamp", "nets"]
    assert all(c.status == "grows as sized" for c in checks.values()), \
        [c.to_dict() for c in checks.values()]
    assert checks["lamp"].turns == [1, 2, 3] and checks["fog"].turns == [1, 2]
    rows = {r.query_id: r for r in measured(result)}
    for conversation, check in checks.items():
        for turn in check.turns[1:]:  # each later turn reuses the turn before it
            row = rows[f"{conversation}.t{turn}"]
            before = rows[f"{conversation}.t{turn - 1}"]
            assert (row.cached_tokens or 0) >= (before.prompt_tokens or 0) - 1
    assert "## Multi-turn growth" in result.run_dir.report_path.read_text()


@pytest.mark.slow
def test_a_trace_is_replayed_at_its_times_and_lengths(tmp_path) -> None:
    trace = [json.loads(line) for line in
             (EXPERIMENTS / "data" / "trace.jsonl").read_text().splitlines()]
    with synthetic_process() as url:
        result = shipped("trace-replay", tmp_path, url)
    rows = measured(result)
    times = [t["timestamp"] for t in trace]
    for speed in (1.0, 2.0):
        point = sorted((r for r in rows if r.load == f"trace={speed!r}"),
                       key=lambda r: r.t_scheduled or 0)
        assert len(point) == len(trace)
        start = point[0].t_scheduled or 0
        expected = TracePoint(speed, times_ms=tuple(times)).arrivals_ns(None)
        assert [(r.t_scheduled or 0) - start for r in point] == expected
        for r in point:  # calibration counts exactly what the server reports
            line = trace[int(r.query_id.removeprefix("line")) - 1]
            assert r.prompt_tokens == line["input_length"]
            assert r.requested_tokens == r.output_tokens == line["output_length"]
    assert result.evaluation.counts["refused_rows"] == 0
    loads = {s.load: s for s in result.evaluation.load}
    assert set(loads) == {"trace=1.0", "trace=2.0"}
    assert loads["trace=2.0"].scheduled_rate == pytest.approx(
        2 * loads["trace=1.0"].scheduled_rate, rel=1e-6)


@pytest.mark.slow
def test_bursty_arrivals_follow_their_gamma_schedule(tmp_path) -> None:
    from kvlab.experiment import load_experiment

    with synthetic_process(options=["--slots", "2"]) as url:
        result = shipped("bursty-arrivals", tmp_path, url)
    experiment = load_experiment(EXPERIMENTS / "bursty-arrivals.toml")
    rows = measured(result)
    for point in experiment.load.points(60):
        mine = sorted((r for r in rows if r.load == point.label),
                      key=lambda r: r.t_scheduled or 0)
        start = mine[0].t_scheduled or 0
        assert [(r.t_scheduled or 0) - start for r in mine] == point.arrivals_ns(60)
    assert result.evaluation.counts["refused_rows"] == 0
    assert {s.load for s in result.evaluation.load} == {"rate=8.0", "rate=14.0"}


@pytest.mark.slow
def test_an_interrupted_dataset_run_resumes_from_the_file_it_began_with(tmp_path) -> None:
    """The run dir's copy of the experiment names the file relative to the original
    experiment; a resume reads the file recorded in the manifest instead."""
    from kvlab.errors import RunInterrupted
    from tests.run.test_runner import StopAfter

    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "prompts.jsonl").write_text(
        (EXPERIMENTS / "data" / "prompts.jsonl").read_text())
    path = tmp_path / "dataset-jsonl.toml"
    path.write_text((EXPERIMENTS / "dataset-jsonl.toml").read_text())
    with pytest.raises(RunInterrupted):
        run_experiment(RunRequest(path),
                       RunOutput(tmp_path / "runs", reporter=StopAfter(2), html=False))
    (run_dir,) = (tmp_path / "runs").iterdir()
    result = run_experiment(RunRequest(resume=run_dir), RunOutput(html=False))
    rows = measured(result)
    assert sorted(r.query_id for r in rows) == ["kv1", "kv2", "kv3", "kv4", "kv5", "kv6"]
    assert result.evaluation.counts["refused_rows"] == 0
