"""Summaries per (mode, capacity, load) over hand-made records with known timings."""

from __future__ import annotations

from kvlab.analysis.summaries import summarize_run
from kvlab.analysis.valid_rows import judge
from kvlab.labels import load_order
from kvlab.rundir import Outcome
from tests.report.synthetic_runs import make_row

R = 300  # bootstrap resamples: enough for these clean data, fast


def test_a_resumed_row_supersedes_its_failed_attempt() -> None:
    failed = make_row("a", 256, 0, prefill=20, decode=30, outcome=Outcome.TIMEOUT, position=0)
    retried = make_row("a", 256, 0, prefill=20, decode=30, position=5)
    [s] = summarize_run(judge([failed, retried]), resamples=R)
    assert (s.rows, s.refused) == (1, 0)


def test_loads_sort_numerically_and_sequential_first() -> None:
    labels = ["c=16", None, "c=2", "rate=0.5", "c=4"]
    assert sorted(labels, key=load_order) == [None, "c=2", "c=4", "c=16", "rate=0.5"]
    rows = [make_row("a", 256, 0, prefill=1, decode=2, load=lab) for lab in ("c=8", "c=2")]
    assert [k[2] for k in judge(rows).groups()] == ["c=2", "c=8"]
