"""The metric registry: each metric declared once, and every view follows it.

evaluation.json's summary keys are a contract (results pages and scripts read them):
the registry must give each summary exactly the keys it always had, with the values
its metric's statistic has.
"""

from __future__ import annotations

import pytest

from kvlab.analysis.gate import METRICS as GATE_METRICS
from kvlab.analysis.metric import DIST, STATS, VALUE, Column, Metric
from kvlab.analysis.summaries import summarize
from kvlab.analysis.summary_metrics import (
    COMPARED_METRICS,
    INTERVAL_METRICS,
    SUMMARY_METRICS,
    metric_definitions,
)
from kvlab.analysis.valid_rows import judge
from tests.rows import MS, row

SUMMARY_KEYS = {  # evaluation.json's summaries, as SCHEMA_VERSION 2 has had them
    "mode", "capacity", "load", "queries", "refused", "valid", "mean_ms",
    "tokens_per_second", "mean_prompt_tokens", "mean_prompt_ms", "mean_decode_ms",
    "mean_decode_per_token_ms", "mean_overhead_ms", "e2e_ms", "ttft_ms", "itl_effective_ms",
    "inter_delta_median_ms", "inter_delta_p95_ms", "mean_content_deltas", "mean_intervals",
    "system_tokens_per_s",
}


def test_a_summary_keeps_its_evaluation_json_keys_and_their_values() -> None:
    rows = [row(t_end=500 * MS), row(query_id="q02", t_end=1500 * MS, prompt_tokens=260)]
    s = summarize(judge(rows), resamples=200)
    doc = s.to_json()
    assert set(doc) >= SUMMARY_KEYS  # a key is only ever added (else: SCHEMA_VERSION)
    assert doc["mean_ms"] == s.mean("e2e_ms") == pytest.approx(1000.0)
    assert doc["e2e_ms"] == s.dist("e2e_ms") and doc["e2e_ms"]["count"] == 2
    assert doc["inter_delta_median_ms"] == s.dist("inter_delta_ms")["p50"]
    assert doc["tokens_per_second"] == s.figure("tokens_per_second")
    assert set(doc["mean_intervals"]) == {m.name for m in INTERVAL_METRICS}


def test_each_metric_is_declared_once_with_a_definition_and_unit() -> None:
    names = [m.name for m in SUMMARY_METRICS]
    assert len(names) == len(set(names))
    definitions = metric_definitions()
    assert all(definitions[m.name] == m.definition and m.unit for m in SUMMARY_METRICS)
    assert {"ratio", "reduction"} <= set(definitions)
    # every column and key names a statistic its metric has
    for m in SUMMARY_METRICS:
        allowed = {VALUE} if not m.distributed else {*STATS, DIST}
        assert {c.stat for c in m.columns} | {s for _, s in m.keys} <= allowed, m.name


def test_the_compared_metrics_are_the_gates_and_times() -> None:
    assert tuple(m.name for m in COMPARED_METRICS) == GATE_METRICS
    assert all(m.unit == "ms" and m.row is not None for m in COMPARED_METRICS)


def test_a_declaration_that_cannot_be_had_is_refused() -> None:
    with pytest.raises(ValueError, match="exactly one"):
        Metric("x", "ms", "two sources", row=lambda r: 1.0, group=lambda g: 1.0)
    with pytest.raises(ValueError, match="value per row"):
        Metric("x", "tokens/s", "a rate of the group", group=lambda g: 1.0, compared=True)
    with pytest.raises(ValueError, match="no statistic 'p95'"):
        Metric("x", "tokens/s", "a rate", group=lambda g: 1.0, columns=(Column("x", "p95"),))
