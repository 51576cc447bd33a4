"""The lateness probe (tests/lateness.py) sees a process kept off the CPU."""

from __future__ import annotations

import os
import signal
import time

import pytest

from tests.lateness import LatenessProbe


def test_a_probe_held_off_the_cpu_reports_the_hold() -> None:
    with LatenessProbe() as probe:
        os.kill(probe.pid, signal.SIGSTOP)  # what a loaded machine does to a sleeper
        time.sleep(0.1)
        os.kill(probe.pid, signal.SIGCONT)
        time.sleep(0.02)  # a few ordinary samples after it
    assert len(probe.samples_ns) >= 2
    assert probe.worst_ms >= 100.0 - probe.period_s * 1e3, probe
    assert probe.allow_ms(5.0, hops=2) == 5.0 + 2 * probe.worst_ms


def test_a_bound_counts_at_least_one_wait() -> None:
    with LatenessProbe() as probe:
        time.sleep(0.01)
    with pytest.raises(ValueError, match="at least once"):
        probe.allow_ms(1.0, hops=0)
