"""report.md from a hand-built evaluation: sections, numbers and refusals."""

from __future__ import annotations

from kvlab.analysis.evaluate import evaluate
from kvlab.analysis.run_view import RunView
from kvlab.experiment import parse_experiment
from kvlab.report.document import render_report
from kvlab.rundir import RunState
from tests.rows import MS, row

EXPERIMENT = parse_experiment(
    'name = "x"\ncompare = [["a", "b"]]\n[[modes]]\nname = "a"\n[[modes]]\nname = "b"\n'
)


def test_report_states_protocol_definitions_validation_and_numbers() -> None:
    records = [
        row(mode="a", t_end=1200 * MS), row(mode="a", query_id="q02", t_end=1200 * MS),
        row(mode="b"), row(mode="b", query_id="q02", output_tokens=12),
    ]
    evaluation = evaluate(RunView(records, EXPERIMENT.compare, run_id="run-1", experiment="x"))
    manifest = {"kvlab_version": "0.1.0", "git_commit": "abc", "host": {"cores": 2},
                "servers": [{"mode": "a", "capacity": 512, "facts": {"argv": ["kvlab", "serve"]},
                             "started": "t0", "stopped": "t1"}]}
    text = render_report(evaluation, EXPERIMENT, RunState.model_validate(manifest))
    assert text.startswith("# kvlab run `run-1` — x")
    assert "Output forced to 64 tokens" in text and "seed 42" in text
    assert "`itl_effective_ms`" in text
    assert "| b | 512 | q02 | 0 | output_tokens | 12 output tokens, 64 requested |" in text
    assert "| a | 512 | 2 of 2 | none | 250 | 1200.00 |" in text  # summary row from records
    assert "| b | 512 | 1 of 2 | 1 output_tokens | 250 |" in text  # n valid of m, by class
    assert "3 valid of 4 (refused: 1 output_tokens)" in text
    assert "refused" in text  # the a/b comparison is refused: b has a refused row
    assert "`kvlab serve`" in text and "git commit abc" in text


def _kv_check(cells_logged: int) -> dict:
    predicted = {"kind": "kv", "cells": 512, "layers": 3, "n_seq_max": 1, "n_stream": 1,
                 "k_bytes": 786432, "v_bytes": 786432}
    logged = {"kind": "kv", "cells": cells_logged, "layers": 3, "n_seq_max": 1,
              "n_stream": 1, "type_k": "f16", "type_v": "f16", "size_mib": 1.5,
              "k_mib": 0.75, "v_mib": 0.75}
    match = cells_logged == 512
    return {"caches": [{"kind": "kv", "predicted": predicted, "logged": logged,
                        "match": match, "mismatches": [] if match else ["cells"]}],
            "match": match}


def test_kv_check_section_shows_each_server_and_a_disagreement() -> None:
    from kvlab.report.kv_check import kv_check_markdown

    manifest = {"servers": [
        {"mode": "t1", "capacity": 512, "facts": {"kv_check": _kv_check(512)}},
        {"mode": "t2", "capacity": 512, "facts": {"kv_check": _kv_check(768)}},
        {"mode": "embedded", "capacity": 512, "facts": {"argv": []}},
    ]}
    text = kv_check_markdown(RunState.model_validate(manifest))
    assert "## KV check" in text
    assert "### t1 @ 512" in text and "### t2 @ 512" in text
    assert "embedded" not in text
    assert "512 / 768" in text  # the disagreement is printed, not hidden
    assert kv_check_markdown(RunState(servers=[])) == ""
