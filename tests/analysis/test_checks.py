"""The registered checks: each adds its list to the evaluation under its key, in the
registry's order, and a check the run asks for but its server kind cannot feed says
so (``not measured: <kind> exposes no ...``) instead of disappearing."""

from __future__ import annotations

from dataclasses import replace

from kvlab.analysis.checks import CHECKS, KNEE, PROCESS_MEMORY, SERVER_HISTOGRAMS, TRACE_HITS
from kvlab.analysis.evaluate import evaluate
from kvlab.analysis.run_view import EvaluateOptions, RunView
from kvlab.metric_names import EMBEDDED
from kvlab.report.knee import KneeSection
from kvlab.report.section import ReportInput
from kvlab.report.server_memory import ServerMemory
from kvlab.rundir import GaugeSample, MemorySample
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


def _renamed(gauges: list[GaugeSample], prefix: str) -> list[GaugeSample]:
    """The readings as a server whose names begin with ``prefix`` gives them."""
    return [g.model_copy(update={"samples": {k.replace("kvlab:", prefix): v
                                             for k, v in g.samples.items()}})
            for g in gauges]


def test_a_new_kind_that_declares_nothing_is_named_in_each_check_it_cannot_feed() -> None:
    """A kind kvlab knows nothing of (no metric names, no KV budget recorded, one budget
    that cannot be read) gets a line in each check that needs them, never silence."""
    records, gauges = _point(4, 0, 10.0, 4, 0)
    view = RunView(records, gauges=_renamed(gauges, "sglang:"), servers={CELL: "sglang"},
                   unreadable={CELL: "kv_served: unknown pool 'radix'"})
    evaluation = evaluate(view, options=OPTIONS)
    assert evaluation.server_counters == [] and evaluation.found(KNEE) == []
    assert evaluation.not_measured[KNEE.key] == [
        "not measured: sglang recorded what kvlab cannot read (kvlab-serve @ 512: "
        "kv_served: unknown pool 'radix')",
        "not measured: sglang exposes no /metrics counters kvlab reads (kvlab-serve @ 512)"]
    memory = [MemorySample(mode=CELL[0], capacity=CELL[1], load="c=4", t_ns=int(10.3e9),
                           rss_bytes=1 << 30, processes=1, phase="during")]
    bare = evaluate(replace(view, unreadable={}, memory=memory), options=OPTIONS)
    no_budget = "not measured: sglang exposes no KV budget (kvlab-serve @ 512)"
    assert bare.not_measured[KNEE.key][0] == no_budget
    assert len(bare.found(PROCESS_MEMORY)) == 1  # its RSS, without KV bytes: said so
    assert bare.not_measured[PROCESS_MEMORY.key] == [no_budget]
    assert TRACE_HITS.key not in bare.not_measured  # no trace replayed: not asked


def test_the_metric_names_a_kind_recorded_feed_the_counters_and_the_knee() -> None:
    records, gauges = _point(4, 0, 10.0, 4, 0)
    names = replace(EMBEDDED, server="sglang", prefix="sglang:")
    view = RunView(records, gauges=_renamed(gauges, "sglang:"), budgets={CELL: KVLAB},
                   servers={CELL: "sglang"}, metric_names={CELL: names})
    evaluation = evaluate(view, options=OPTIONS)
    (counted,) = evaluation.server_counters
    assert (counted.server, counted.prompt.status) == ("sglang", "equal")
    (knee,) = evaluation.found(KNEE)
    assert knee.server == "sglang" and knee.points[0].running_max == 4
    assert KNEE.key not in evaluation.not_measured
