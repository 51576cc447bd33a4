"""Run order plans: blocked, ABBA (exact sequence), interleaved alternation."""

from __future__ import annotations

import pytest

from kvlab.bench.plan.order import (
    Block,
    interleave,
    plan_blocks,
    resolve_order,
    sequence_of,
    server_launches,
    split,
)
from tests.experiments import embedded, experiment

CAPS = {"A": [256, 1024], "B": [256, 1024]}


def test_blocked_runs_each_mode_whole() -> None:
    assert plan_blocks(["A", "B"], CAPS, "blocked") == [
        Block("A", 256), Block("A", 1024), Block("B", 256), Block("B", 1024)]


def test_abba_sequence_is_exact() -> None:
    blocks = plan_blocks(["A", "B"], CAPS, "abba")
    assert sequence_of(blocks) == [
        ["A", 256, 0, 2], ["B", 256, 0, 2], ["B", 256, 1, 2], ["A", 256, 1, 2],
        ["A", 1024, 0, 2], ["B", 1024, 0, 2], ["B", 1024, 1, 2], ["A", 1024, 1, 2]]
    # B's two halves share one server; A restarts for its second half
    launches = server_launches(blocks)
    assert [[b.mode for b in s] for s in launches] == [
        ["A"], ["B", "B"], ["A"], ["A"], ["B", "B"], ["A"]]
    three = plan_blocks(["A", "B", "C"], {m: [256] for m in "ABC"}, "abba")
    assert [b.mode for b in three] == ["A", "B", "C", "C", "B", "A"]


def test_abba_only_pairs_modes_sharing_a_capacity() -> None:
    blocks = plan_blocks(["A", "B"], {"A": [256, 512], "B": [256]}, "abba")
    assert [(b.mode, b.capacity) for b in blocks] == [
        ("A", 256), ("B", 256), ("B", 256), ("A", 256), ("A", 512), ("A", 512)]


def test_split_covers_rows_once() -> None:
    rows = list(range(7))
    assert split(rows, 0, 2) == [0, 1, 2] and split(rows, 1, 2) == [3, 4, 5, 6]
    assert split(rows, 0, 1) == rows
    with pytest.raises(ValueError):
        split(rows, 2, 2)


def test_interleaved_alternates_request_by_request() -> None:
    assert interleave({"A": [0, 1, 2], "B": [0, 1]}) == [
        ("A", 0), ("B", 0), ("A", 1), ("B", 1), ("A", 2)]


def test_resolve_order_records_a_fallback() -> None:
    assert resolve_order("abba", {"A": "embedded", "B": "embedded"}).used == "abba"
    choice = resolve_order("interleaved", {"A": "llamacpp", "B": "external"})
    assert choice.used == "abba" and "A" in (choice.reason or "")
    assert resolve_order("interleaved", {"A": "external", "B": "embedded"}).used == "interleaved"
    single = resolve_order("abba", {"A": "embedded"})
    assert single.used == "blocked" and single.to_dict()["requested"] == "abba"


ABBA = experiment(
    "abba", embedded("a"), embedded("b", no_cache=True),
    workload=dict(queries=4, capacities=[256], output_tokens=4), compare=[("a", "b")],
    order="abba")


@pytest.mark.slow
def test_abba_run_and_repeat_aa_through_the_runner(tmp_path) -> None:
    """The runner follows A B B A (positions), records it, and --repeat-aa reports A/A."""
    import json

    from kvlab.records import read_records
    from kvlab.run.runner import RunOutput, RunRequest, run_experiment

    path = ABBA.write(tmp_path)
    result = run_experiment(RunRequest(path), RunOutput(tmp_path / "runs"))
    rows = sorted((r for r in read_records(result.run_dir.records_path) if not r.warmup),
                  key=lambda r: r.position)
    assert [r.mode for r in rows] == ["a", "a", "b", "b", "b", "b", "a", "a"]
    assert [r.query_id for r in rows if r.mode == "a"] == ["q01", "q02", "q03", "q04"]
    manifest = json.loads(result.run_dir.manifest_path.read_text())
    assert manifest["order"]["used"] == "abba"
    assert [s["mode"] for s in manifest["servers"]] == ["a", "b", "a"]  # b's halves share
    assert "Order used: **abba**" in result.run_dir.report_path.read_text()

    aa = run_experiment(RunRequest(path, repeat_aa="b"), RunOutput(tmp_path / "runs"))
    modes = {r.mode for r in read_records(aa.run_dir.records_path)}
    assert modes == {"b", "b-again"}
    assert [(c.a, c.b) for c in aa.evaluation.comparisons] == [("b", "b-again")]
    report = aa.run_dir.report_path.read_text()
    assert "## A/A noise floor" in report and "| 256 | e2e_ms |" in report
    assert aa.evaluation.to_json()["repeat_aa"] == "b"
