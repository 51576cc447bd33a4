"""The progress reporter: quiet, plain lines off a terminal, a bar on one."""

from __future__ import annotations

import io

from rich.console import Console

from kvlab.cli.progress import BarReporter, PlainReporter, make_reporter
from kvlab.run.runner import SilentReporter
from kvlab.rundir import ApiKind, Outcome, Record


def record(qid: str, e2e_ms: float, outcome: Outcome = Outcome.OK) -> Record:
    return Record(run_id="r", mode="m", capacity=256, query_id=qid,
                  api=ApiKind.LLAMACPP_COMPLETION, path="/completion", stream=True,
                  prompt_sha256="x", requested_tokens=4, t_sent=0,
                  t_end=int(e2e_ms * 1e6), outcome=outcome,
                  error=None if outcome == Outcome.OK else "boom")


def drive(reporter) -> None:
    reporter.note("m @ 256: starting embedded server")
    reporter.begin("m", 256, 3)
    reporter.advance(record("q01", 100))
    reporter.advance(record("q02", 200))
    reporter.advance(record("q03", 300, Outcome.TIMEOUT))
    reporter.end("m", 256)


def test_quiet_reports_nothing() -> None:
    out = io.StringIO()
    reporter = make_reporter(True, Console(file=out, force_terminal=True))
    assert isinstance(reporter, SilentReporter)
    drive(reporter)
    assert out.getvalue() == ""


def test_not_a_terminal_prints_plain_lines() -> None:
    out = io.StringIO()
    reporter = make_reporter(False, Console(file=out, force_terminal=False, width=120))
    assert isinstance(reporter, PlainReporter) and not isinstance(reporter, BarReporter)
    drive(reporter)
    lines = out.getvalue().splitlines()
    assert lines == [
        "m @ 256: starting embedded server",
        "m @ 256: 3 requests",
        "  q03: timeout boom",
        "m @ 256: 3/3 done, 1 failed, mean e2e 200.0 ms",
    ]
    assert "\x1b[" not in out.getvalue()  # no escape codes in logs


def test_terminal_shows_a_bar_with_counts_and_mean() -> None:
    out = io.StringIO()
    reporter = make_reporter(False, Console(file=out, force_terminal=True, width=150))
    assert isinstance(reporter, BarReporter)
    drive(reporter)
    text = out.getvalue()
    assert "m @ 256" in text and "3/3" in text and "ETA" in text
    assert "mean e2e 200.0 ms" in text
    assert "q03: timeout boom" in text
