"""Progress of a run, as the runner's ``Reporter``: a Rich bar, plain lines, or nothing.

``make_reporter(quiet, console)`` picks one: nothing with ``--quiet``; a live bar per
(mode, capacity[, load]) when ``console`` is a terminal (requests done / total, elapsed,
ETA, running mean e2e); otherwise plain lines (one when a block starts, one per failed
request, one when it ends with its mean e2e), so logs and CI output stay readable.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.console import Console

from kvlab.analysis.metrics import e2e_ms
from kvlab.rundir import Outcome, Record

if TYPE_CHECKING:
    from kvlab.run.reporter import Reporter


class _Tally:
    """Requests done, failed, and the running mean e2e of one block."""

    def __init__(self, total: int) -> None:
        self.total = total
        self.done = 0
        self.failed = 0
        self.e2e_sum_ms = 0.0

    def add(self, record: Record) -> None:
        self.done += 1
        if record.outcome != Outcome.OK:
            self.failed += 1
        self.e2e_sum_ms += e2e_ms(record)

    @property
    def mean_e2e(self) -> str:
        return f"{self.e2e_sum_ms / self.done:.1f} ms" if self.done else "–"


class PlainReporter:
    """Plain lines on ``console`` (not a terminal: logs, CI, pipes)."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.tally = _Tally(0)
        self.label = ""

    def _print(self, text: str) -> None:
        self.console.print(text, highlight=False, markup=False, soft_wrap=True)

    def begin(self, mode: str, capacity: int, total: int) -> None:
        self.tally = _Tally(total)
        self.label = f"{mode} @ {capacity}"
        self._print(f"{self.label}: {total} requests")

    def advance(self, record: Record) -> None:
        self.tally.add(record)
        if record.outcome != Outcome.OK:
            self._print(f"  {record.query_id}: {record.outcome} {record.error or ''}".rstrip())

    def end(self, mode: str, capacity: int) -> None:
        t = self.tally
        failed = f", {t.failed} failed" if t.failed else ""
        self._print(f"{self.label}: {t.done}/{t.total} done{failed}, mean e2e {t.mean_e2e}")

    def note(self, message: str) -> None:
        self._print(message)


class BarReporter(PlainReporter):
    """A Rich progress bar per block: done/total, elapsed, ETA, running mean e2e."""

    def __init__(self, console: Console) -> None:
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        super().__init__(console)
        self.progress = Progress(
            TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
            TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(),
            TextColumn("mean e2e {task.fields[mean_e2e]}"),
            console=console, transient=False,
        )
        self.task: Any = None

    def begin(self, mode: str, capacity: int, total: int) -> None:
        self.tally = _Tally(total)
        self.label = f"{mode} @ {capacity}"
        self.progress.start()
        self.task = self.progress.add_task(self.label, total=total, mean_e2e="–")

    def advance(self, record: Record) -> None:
        self.tally.add(record)
        self.progress.update(self.task, advance=1, mean_e2e=self.tally.mean_e2e)
        if record.outcome != Outcome.OK:
            self.progress.console.print(
                f"  {record.query_id}: {record.outcome} {record.error or ''}".rstrip(),
                highlight=False, markup=False)

    def end(self, mode: str, capacity: int) -> None:
        self.progress.stop()

    def note(self, message: str) -> None:
        self.progress.console.print(message, highlight=False, markup=False)


def make_reporter(quiet: bool, console: Console) -> Reporter:
    """Nothing (quiet), a bar (``console`` is a terminal) or plain lines."""
    from kvlab.run.reporter import SilentReporter

    if quiet:
        return SilentReporter()
    return BarReporter(console) if console.is_terminal else PlainReporter(console)
