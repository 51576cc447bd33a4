"""The executor walks a plan through the in-memory driver: no server, no socket.

Each test plans a real experiment file (tests/experiments.py), creates its run
directory and drives the plan with :class:`MemoryTarget` in place of the servers and the
in-memory driver in place of the HTTP client; the run is then evaluated like any other.
"""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager, nullcontext
from pathlib import Path
from typing import Any

import pytest

from kvlab.bench.client.endpoints import Endpoint
from kvlab.bench.drivers.memory import MemoryDriver, MemorySettings
from kvlab.bench.plan.sizing import Counter, Sizing
from kvlab.errors import RunInterrupted
from kvlab.records import RunClock, read_records
from kvlab.run.journal import Journal
from kvlab.run.planner import RunRequest, plan_new, plan_resume
from kvlab.run.reporter import SilentReporter
from kvlab.run.rundir import create_run
from kvlab.run.runner import drive, evaluate_run
from kvlab.run.runplan import Launch, ModePlan, RunPlan
from kvlab.store.rundir import RunDir
from tests.experiments import experiment, external


async def words(text: str) -> int:
    """What the memory driver counts: one token per word."""
    return len(text.split())


class MemoryTarget:
    """A (mode, capacity) that is always up, counts words, has no /metrics."""

    def __init__(self, mode: ModePlan, launch: Launch) -> None:
        self.mode = mode
        self.stopped = False

    async def up(self, log: Path, ready_timeout_s: float, note: Callable[[str], None]
                 ) -> Endpoint:
        return Endpoint("http://memory.invalid/v1", self.mode.api, model="m",
                        name=self.mode.name)

    @asynccontextmanager
    async def counter(self, params: dict[str, Any], tokenizer: Path | None
                      ) -> AsyncIterator[Counter]:
        yield Counter(words, Sizing("tokenizer-file", "words"))

    def gauges(self, path: Path, clock: RunClock, load: str | None, start: int,
               end: Callable[[], int], poll: bool) -> AbstractAsyncContextManager[None]:
        return nullcontext()

    def died(self) -> str | None:
        return None

    def down(self) -> dict[str, Any] | None:
        self.stopped = True
        return {"launched": False, "memory": True}


class StopAfter(SilentReporter):
    """Ctrl-C after ``n`` measured records."""

    def __init__(self, n: int) -> None:
        self.n = n

    def advance(self, record: object) -> None:
        self.n -= 1
        if self.n == 0:
            raise KeyboardInterrupt


@pytest.fixture(autouse=True)
def no_socket(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any connection attempt fails the test: the memory driver needs none."""
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("a socket was connected")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)


def memory(name: str = "a", **settings: Any) -> Any:
    return external(name, "http://memory.invalid/v1", "m", **settings)


def run(tmp_path: Path, plan_and_experiment: tuple[RunPlan, Any], reporter: Any = None,
        driver: MemoryDriver | None = None) -> RunDir:
    plan, exp = plan_and_experiment
    file = tmp_path / f"{exp.name}.toml"
    run_dir = create_run(tmp_path / "runs", file, exp)
    drive(plan, Journal(run_dir, reporter or SilentReporter()),
          driver or MemorySettings(ttft_ms=1, itl_ms=0.5).build(), targets=MemoryTarget)
    return run_dir


def test_a_sweep_runs_whole_points_through_the_driver(tmp_path) -> None:
    path = experiment("sweep", memory(), workload=dict(queries=3, capacities=[256, 512],
                                                       output_tokens=4),
                      load=dict(kind="concurrency", values=[1, 2], requests=4)).write(tmp_path)
    driver = MemorySettings(ttft_ms=1, itl_ms=0.5, slots=1).build()
    run_dir = run(tmp_path, plan_new(RunRequest(path)), driver=driver)
    evaluation = evaluate_run(run_dir.path)
    assert evaluation.counts["refused_rows"] == 0
    assert [(s.capacity, s.load, s.requests) for s in evaluation.load] == [
        (256, "c=1", 4), (256, "c=2", 4), (512, "c=1", 4), (512, "c=2", 4)]
    assert len(driver.sent) == 2 * (1 + 4 + 4)  # per capacity: a warm-up and two points
    state = RunDir.open(run_dir.path).state
    assert state.points_done == [("a", c, label) for c in (256, 512) for label in ("c=1", "c=2")]
    assert [(s.mode, s.capacity, s.facts) for s in state.servers] == [
        ("a", c, {"launched": False, "memory": True}) for c in (256, 512)]
    assert state.prompt_sizing is not None and set(state.prompt_sizing) == {"256", "512"}


def test_interleaved_rows_alternate_and_a_resume_skips_what_was_done(tmp_path) -> None:
    path = experiment("alternate", memory("a"), memory("b"), order="interleaved",
                      workload=dict(queries=4, capacities=[256], output_tokens=2,
                                    repetitions=2)).write(tmp_path)
    with pytest.raises(RunInterrupted) as info:
        run(tmp_path, plan_new(RunRequest(path)), reporter=StopAfter(5))
    assert info.value.exit_status == 130
    (run_path,) = (tmp_path / "runs").iterdir()
    kept = [r for r in read_records(run_path / "records.jsonl") if not r.warmup]
    assert [r.mode for r in kept] == ["a", "b", "a", "b", "a"]

    resumed = RunDir.open(run_path)
    plan = plan_resume(RunRequest(resume=run_path), resumed)
    drive(plan, Journal(resumed, SilentReporter()), MemorySettings().build(),
          targets=MemoryTarget)
    rows = sorted((r for r in read_records(run_path / "records.jsonl") if not r.warmup),
                  key=lambda r: r.position)
    keys = [(r.mode, r.query_id, r.repetition) for r in rows]
    assert len(keys) == len(set(keys)) == 2 * 4 * 2  # every row once
    # what is left alternates again, from the first mode: a has 5 rows left, b 6
    assert [r.mode for r in rows[5:]] == ["a", "b"] * 5 + ["b"]
    invocations = RunDir.open(run_path).state.invocations
    assert len(invocations) == 2 and invocations[-1].run_order["used"] == "interleaved"
