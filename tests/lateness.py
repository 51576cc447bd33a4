"""How late this machine runs a waiting program right now: timing bounds for tests.

A test that checks something happens on time (a request leaves on its deadline, a
timeout fires, a stream keeps its schedule) cannot hold it to a figure tuned on one
machine: on a loaded, slower or single-core machine every wake-up and every switch
between processes comes later. So such a test measures, in the same run, how late the
operating system wakes a sleeping process (:class:`LatenessProbe`, a separate process,
so neither this process's GIL nor the code under test adds to what it sees), and
allows its fixed expectation plus that lateness once per hop::

    with LatenessProbe() as probe:
        lag_ms = ...  # the timed part
    assert lag_ms < probe.allow_ms(20.0, hops=2)

``expected_ms`` is what the code under test may take on an idle machine (the figure
the test always held); ``hops`` counts the times the timed path waits to be given the
CPU again (a timer wake-up, a process woken by a socket): each can come late by up to
the worst lateness seen while the test ran. A real bug (a request held back, a timer
not armed, a clock read at the wrong moment) adds its own delay on top, which an idle
machine's small lateness does not hide: ``test_lateness.py`` shows one failing.
"""

from __future__ import annotations

import json
import subprocess
import sys
from types import TracebackType

# The probe process: sleeps PERIOD_S at a time (select on stdin, so closing stdin stops
# it at once) and records, in ns, how much later than asked each sleep ended, counted
# from the end of the sleep before (so time off the CPU while awake counts too).
PERIOD_S = 0.002
_PROBE = """
import json, os, select, sys, time
period_ns = int(float(sys.argv[1]) * 1e9)
late = []
t0 = time.perf_counter_ns()
time.sleep(period_ns / 1e9)  # one sample before "ready": never none
now = time.perf_counter_ns()
late.append(now - t0 - period_ns)
t0 = now
print("ready", flush=True)
while True:
    readable, _, _ = select.select([0], [], [], period_ns / 1e9)
    now = time.perf_counter_ns()
    if readable and not os.read(0, 4096):
        break  # stdin closed: the test's timed part is over
    if not readable:  # from the end of the last sleep: a stop anywhere in between counts
        late.append(now - t0 - period_ns)
    t0 = now
print(json.dumps(late), flush=True)
"""


class LatenessProbe:
    """While its ``with`` block runs, how late this machine wakes a sleeping process.

    After the block: ``samples_ns`` (each sleep's lateness), :attr:`worst_ms` and
    :meth:`allow_ms`. The probe sleeps nearly all the time (a fraction of a percent of
    one core), so it does not load the machine it measures.
    """

    def __init__(self, period_s: float = PERIOD_S) -> None:
        self.period_s = period_s
        self.samples_ns: list[int] = []
        self._proc: subprocess.Popen[str] | None = None

    def __enter__(self) -> LatenessProbe:
        self._proc = subprocess.Popen(
            [sys.executable, "-I", "-S", "-c", _PROBE, str(self.period_s)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert self._proc.stdout is not None
        if self._proc.stdout.readline().strip() != "ready":  # sampling before we go on
            self._proc.kill()
            raise RuntimeError("the lateness probe did not start")
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        assert self._proc is not None
        out, _ = self._proc.communicate(timeout=60)  # closes stdin: the probe stops
        self.samples_ns = json.loads(out.strip().splitlines()[-1]) if out.strip() else []
        if exc_type is None and not self.samples_ns:
            raise RuntimeError("the lateness probe took no sample")

    @property
    def pid(self) -> int:
        """The probe process's id (while the block runs)."""
        assert self._proc is not None
        return self._proc.pid

    @property
    def worst_ms(self) -> float:
        """The latest wake-up seen while the block ran, in ms (never below 0)."""
        return max(0.0, max(self.samples_ns, default=0) / 1e6)

    def lateness_ms(self, hops: int) -> float:
        """How much later than on an idle machine a path with ``hops`` waits for the
        CPU may end: the worst lateness seen, once per wait."""
        if hops < 1:
            raise ValueError("a timed path waits for the CPU at least once")
        return hops * self.worst_ms

    def allow_ms(self, expected_ms: float, hops: int) -> float:
        """An upper bound for a duration: ``expected_ms`` on an idle machine plus
        :meth:`lateness_ms` for ``hops`` waits for the CPU along the timed path."""
        return expected_ms + self.lateness_ms(hops)

    def __repr__(self) -> str:  # shown by pytest when an assertion with a bound fails
        n = len(self.samples_ns)
        return f"LatenessProbe(samples={n}, worst_ms={self.worst_ms:.3f})"
