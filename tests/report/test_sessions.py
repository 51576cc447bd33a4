"""The Sessions section: left out without sessions, its figure drawn where there are."""

from __future__ import annotations

from kvlab.report import plots
from kvlab.report.sessions import sessions_body


def test_a_run_without_sessions_has_no_section_and_no_figure() -> None:
    assert sessions_body([]) == "" and plots.sessions_by_turn([]) is None
