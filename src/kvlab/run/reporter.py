"""Progress callbacks of a run: the interface the executor calls and the CLI renders.

It sits below both :mod:`kvlab.run.executor` (which calls it) and
:mod:`kvlab.run.runner` (which passes one in), so neither imports the other's
types.
"""

from __future__ import annotations

from typing import Protocol

from kvlab.rundir import Record


class Reporter(Protocol):
    """Progress callbacks; the CLI renders them (bar, plain lines or nothing)."""

    def begin(self, mode: str, capacity: int, total: int) -> None: ...
    def advance(self, record: Record) -> None: ...
    def end(self, mode: str, capacity: int) -> None: ...
    def note(self, message: str) -> None: ...


class SilentReporter:
    """Reports nothing (``--quiet``)."""

    def begin(self, mode: str, capacity: int, total: int) -> None:
        pass

    def advance(self, record: Record) -> None:
        pass

    def end(self, mode: str, capacity: int) -> None:
        pass

    def note(self, message: str) -> None:
        pass
