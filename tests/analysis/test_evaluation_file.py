"""evaluation.json read back typed: the same summaries, load points, comparisons and
refusals the live evaluation wrote, from files of every version on disk."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvlab.analysis.evaluate import SCHEMA_VERSION, evaluate
from kvlab.analysis.evaluation_file import EvaluationFileError, StoredEvaluation
from kvlab.analysis.run_view import EvaluateOptions, RunView
from kvlab.analysis.validate import Reason
from tests.report.synthetic_runs import make_row, two_mode_rows

DATA = Path(__file__).parent / "data"


def _written() -> tuple[dict[str, object], StoredEvaluation]:
    rows = two_mode_rows(6)
    rows.append(make_row("slow", 256, 9, prefill=10, decode=5, output_tokens=3))  # short: refused
    live = evaluate(RunView(rows, [("slow", "fast")], run_id="r1", experiment="synthetic"),
                    options=EvaluateOptions(resamples=200))
    data = json.loads(json.dumps(live.to_json()))
    return data, StoredEvaluation.from_dict(data)


def test_the_file_reads_back_into_what_the_evaluation_wrote() -> None:
    data, stored = _written()
    assert stored.current and stored.schema_version == SCHEMA_VERSION
    assert (stored.run_id, stored.experiment) == ("r1", "synthetic")
    assert [s.to_json() for s in stored.summaries] == data["summaries"]
    assert [p.to_dict() for p in stored.load] == data["load"]
    assert [v.to_dict() for v in stored.violations] == data["violations"]
    assert [p.to_dict() for p in stored.prefix_reuse] == data["prefix_reuse"]
    assert stored.valid.to_dict() == data["valid"]
    [first, *_] = stored.comparisons
    assert (first.a, first.b, first.status) == ("slow", "fast", "refused")
    ok = next(c for c in stored.comparisons if c.status == "ok")
    e2e = ok.metrics["e2e_ms"]
    assert e2e.ratio is not None and e2e.mean_a is not None and e2e.interval is not None
    assert e2e.interval.low <= e2e.ratio <= e2e.interval.high
    pair = stored.pair("slow", "fast", ok.capacity, ok.load)
    assert pair is not None and pair.count_a.valid == 6
    assert stored.summary("fast", 256) is not None and stored.summary("fast", 99) is None
    assert any(v.reason is not Reason.MISSING_PAIR for v in stored.violations)


def test_a_file_todays_kvlab_wrote_for_a_real_run_reads() -> None:
    """quickstart at make run's sizes on the embedded toy model (kvlab 2026-12-07)."""
    stored = StoredEvaluation.read(DATA / "quickstart-evaluation-v2.json")
    assert stored.experiment == "quickstart" and stored.current
    assert {s.capacity for s in stored.summaries} == {256, 2048}
    assert all(s.count.valid == s.count.measured == 5 for s in stored.summaries)
    assert {(c.a, c.b) for c in stored.comparisons} == {
        ("recompute", "kv-cache"), ("recompute-openai", "kv-cache-openai")}
    assert all(c.metrics["itl_effective_ms"].ratio for c in stored.comparisons
               if c.status == "ok")


def test_a_schema_1_file_reads_and_says_its_load_figures_counted_refused_rows() -> None:
    data, _ = _written()
    old = {k: v for k, v in data.items() if k not in ("schema_version", "valid")}
    old["summaries"] = [{k: v for k, v in s.items() if k != "valid"}
                        for s in data["summaries"]]  # type: ignore[attr-defined]
    old["load"] = [{k: v for k, v in p.items() if k != "count"}
                   for p in data["load"]]  # type: ignore[attr-defined]
    stored = StoredEvaluation.from_dict(old)
    assert stored.schema_version == 1 and stored.counts_refused_rows and not stored.current
    assert stored.summaries[0].count.measured == 0  # not counted in version 1
    assert stored.load[0].mode == data["load"][0]["mode"]  # type: ignore[index]


def test_a_file_that_does_not_read_says_which_and_why(tmp_path: Path) -> None:
    path = tmp_path / "evaluation.json"
    with pytest.raises(EvaluationFileError, match="cannot read it"):
        StoredEvaluation.read(path)
    path.write_text(json.dumps({"schema_version": 2, "summaries": [{"mode": "a"}]}))
    with pytest.raises(EvaluationFileError, match=r"evaluation.json: .*KeyError: 'capacity'"):
        StoredEvaluation.read(path)
    path.write_text("[1, 2]")
    with pytest.raises(EvaluationFileError, match="not a JSON object"):
        StoredEvaluation.read(path)
