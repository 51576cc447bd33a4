"""report.md of a run, whole: the sections in order, rendered from its Evaluation.

:mod:`kvlab.report.markdown` and its neighbours render one section each; this module
puts them together for one run directory. Nothing is computed here.
"""

from __future__ import annotations

from pathlib import Path

from kvlab.bench.analysis.evaluate import Evaluation
from kvlab.bench.store.rundir import RunDir
from kvlab.experiment import Experiment
from kvlab.report.markdown import (
    aa_markdown,
    client_markdown,
    kv_check_markdown,
    load_markdown,
    order_markdown,
    render_report,
)
from kvlab.report.peer_definitions import definitions_markdown
from kvlab.report.prompts import prompts_markdown
from kvlab.report.reasoning import reasoning_markdown
from kvlab.report.server_counters import server_counters_markdown
from kvlab.report.server_histograms import server_histograms_markdown
from kvlab.report.verdicts import pairs_markdown
from kvlab.report.workers import workers_markdown
from kvlab.report.workloads import workloads_markdown


def render_document(run: RunDir, experiment: Experiment, evaluation: Evaluation) -> str:
    """report.md: protocol, definitions, validation, summaries, comparisons with their
    intervals, prompts, run order, load points, load workers and their clocks, client
    load, KV check, reasoning streams, server counters and histograms, capacity search,
    prefix cache, multi-turn growth,
    other tools' definitions and, for an A/A run, the
    noise floor."""
    manifest = run.manifest()
    records = run.records
    report = render_report(evaluation, experiment, manifest,
                           intervals=pairs_markdown(evaluation.pairs, evaluation.named_pairs))
    report += prompts_markdown(manifest, records, experiment.workload.prompt_fraction,
                               experiment.workload.dataset)
    report += order_markdown(evaluation.order)
    report += load_markdown(evaluation.load)
    report += workers_markdown(manifest, records)
    if evaluation.client is not None:
        report += client_markdown(evaluation.client)
    report += kv_check_markdown(manifest)
    report += reasoning_markdown(evaluation.reasoning)
    report += server_counters_markdown(evaluation.server_counters)
    report += server_histograms_markdown(evaluation.server_histograms)
    report += workloads_markdown(evaluation)
    report += definitions_markdown(evaluation.definitions)
    if evaluation.repeat_aa:
        report += aa_markdown(evaluation, evaluation.repeat_aa)
    return report


def write_document(run: RunDir, experiment: Experiment, evaluation: Evaluation) -> Path:
    """Write report.md into the run directory; return its path."""
    run.report_path.write_text(render_document(run, experiment, evaluation), encoding="utf-8")
    return run.report_path
