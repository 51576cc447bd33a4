"""The registered checks: each adds its list to the evaluation under its key, in the
registry's order, and a check the run asks for but its server kind cannot feed says
so (``not measured: <kind> exposes no ...``) instead of disappearing."""

from __future__ import annotations

from kvlab.analysis.checks import CHECKS, KNEE, PROCESS_MEMORY, SERVER_HISTOGRAMS
from kvlab.analysis.evaluate import evaluate
from kvlab.analysis.run_view import EvaluateOptions, RunView
from kvlab.report.knee import KneeSection
from kvlab.report.section import ReportInput
from kvlab.report.server_memory import ServerMemory
from kvlab.rundir import MemorySample
from tests.analysis.test_knee_check import KVLAB, _point
from tests.rows import row

CELL = ("kvlab-serve", 512)
OPTIONS = EvaluateOptions(resamples=10)


def test_every_check_adds_its_list_under_its_key_in_registry_order() -> None:
    records, gauges = _point(4, 0, 10.0, 4, 0)
    evaluation = evaluate(RunView(records, gauges=gauges, budgets={CELL: KVLAB}),
                          options=OPTIONS)
    doc = evaluation.to_json()
    assert list(doc)[-len(CHECKS):] == [c.key for c in CHECKS]
    assert all(doc[c.key] == [f.to_dict() for f in evaluation.found(c)] for c in CHECKS)
    assert len(doc[KNEE.key]) == 1


def test_a_load_run_on_a_server_without_a_budget_says_the_knee_was_not_measured() -> None:
    records, gauges = _point(4, 0, 10.0, 4, 0)
    view = RunView(records, gauges=gauges, servers={CELL: "llama-server"})
    evaluation = evaluate(view, options=OPTIONS)
    assert evaluation.found(KNEE) == []
    line = "not measured: llama-server exposes no KV budget (kvlab-serve @ 512)"
    assert evaluation.not_measured[KNEE.key] == [line]
    assert evaluation.not_measured[SERVER_HISTOGRAMS.key] == [
        "not measured: llama-server exposes no request histograms (kvlab-serve @ 512 c=4)"]
    assert evaluation.not_measured[PROCESS_MEMORY.key] == [
        "not measured: llama-server exposes no process tree to sample (kvlab-serve @ 512)"]
    report = ReportInput(evaluation, None)
    assert f"- {line}" in KneeSection().markdown(report)
    assert line in KneeSection().html(report)
    assert "process tree to sample" in ServerMemory().markdown(report)


def test_a_measured_check_has_no_not_measured_line() -> None:
    records, gauges = _point(4, 0, 10.0, 4, 0)
    memory = [MemorySample(mode=CELL[0], capacity=CELL[1], load="c=4", t_ns=int(10.3e9),
                           rss_bytes=1 << 30, processes=1, phase="during")]
    view = RunView(records, gauges=gauges, budgets={CELL: KVLAB}, memory=memory,
                   servers={CELL: "kvlab"})
    evaluation = evaluate(view, options=OPTIONS)
    assert len(evaluation.found(KNEE)) == 1 and len(evaluation.found(PROCESS_MEMORY)) == 1
    assert KNEE.key not in evaluation.not_measured
    assert PROCESS_MEMORY.key not in evaluation.not_measured


def test_a_sequential_run_or_an_external_endpoint_asks_for_no_knee() -> None:
    records, gauges = _point(4, 0, 10.0, 4, 0)
    external = evaluate(RunView(records, gauges=gauges), options=OPTIONS)  # no servers
    assert external.not_measured == {}
    sequential = evaluate(RunView([row(), row(query_id="q02")], servers={("a", 512): "x"}))
    assert sequential.not_measured == {}  # no load point: no knee, memory or histograms
