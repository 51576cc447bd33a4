"""Run a plan: walk its steps through a load driver, into the run's journal.

:class:`Executor` takes the steps of a :class:`~kvlab.run.runplan.RunPlan` in
order and reads nothing else: ``Launch`` brings a target up and prepares the capacity's
prompts, ``WarmUp`` and ``MeasureRows`` send requests one after another, ``MeasurePoint``
sends a point whole through the driver (the server's ``/metrics`` read around it),
``Search`` drives rate points, ``Stop`` stops the server. Each Record lands in the
:class:`~kvlab.run.journal.Journal` as it completes, a point is synced to the disk
before the next step, every server still up is stopped on every exit path, and a
managed server that died stops the run (:class:`ServerDied`).
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass, field

from kvlab.bench.client.endpoints import Endpoint, RequestSpec
from kvlab.bench.drivers.driver import LoadDriver
from kvlab.bench.plan.loads.base import LoadStrategy
from kvlab.bench.plan.workload import PreparedPrompt, warmup_prompt
from kvlab.records import Outcome, Record
from kvlab.run.journal import Journal
from kvlab.run.prompts import PromptBook
from kvlab.run.runplan import (
    Launch,
    MeasurePoint,
    MeasureRows,
    ModePlan,
    RunPlan,
    Search,
    Step,
    Stop,
    WarmUp,
)
from kvlab.run.search import SEARCH_DONE, search_capacity
from kvlab.run.targets import ServerTarget, Target
from kvlab.store.state import ServerEntry

TargetFactory = Callable[[ModePlan, Launch], Target]


class ServerDied(Exception):
    """A managed server exited mid-run (its rows failed); the run stops."""


@dataclass
class Live:
    """A (mode, capacity) up: its target, endpoint, prompts, manifest entry."""

    mode: ModePlan
    capacity: int
    target: Target
    entry: ServerEntry
    endpoint: Endpoint | None = None
    prompts: dict[str, PreparedPrompt] = field(default_factory=dict)
    dimension: int | None = None  # an embeddings server's declared vector length


class Executor:
    """Walks one plan over one run directory; ``targets`` makes what each ``Launch``
    reaches (default: real servers and endpoints)."""

    def __init__(self, plan: RunPlan, journal: Journal, driver: LoadDriver,
                 targets: TargetFactory | None = None) -> None:
        self.plan, self.journal, self.driver = plan, journal, driver
        self.prompts = PromptBook(plan, journal)
        self.targets = targets or (lambda mode, launch: ServerTarget(
            mode, launch, plan.request_timeout_s, journal.run.path))
        self.live: dict[tuple[str, int], Live] = {}

    async def run(self) -> None:
        """Every step, as one invocation of the runner."""
        invocation = self.journal.begin_invocation(self.plan, self.driver.facts())
        await self.walk(self.plan.steps)
        self.journal.end_invocation(invocation)

    async def walk(self, steps: tuple[Step, ...]) -> None:
        """Take ``steps`` in order; whatever happens, stop every server still up."""
        try:
            for step in steps:
                await self.take(step)
        finally:
            try:
                for mode, capacity in reversed(list(self.live)):
                    self.stop(mode, capacity)
            finally:
                await self.driver.aclose()

    async def take(self, step: Step) -> None:
        match step:
            case Launch():
                await self.launch(step)
            case WarmUp():
                live = self.live[(step.mode, step.capacity)]
                first = warmup_prompt(next(iter(live.prompts.values())),
                                      self.plan.workload.cache_prompt)
                for i in range(step.requests):
                    await self.send(live, first, i, warmup=True)
            case MeasureRows():
                await self.measure_rows(step)
            case MeasurePoint():
                await self.measure_point(self.live[(step.mode, step.capacity)], step.point)
            case Search():
                live = self.live[(step.mode, step.capacity)]
                await search_capacity(step, lambda p: self.measure_point(live, p),
                                      self.journal.run.records, self.journal.state,
                                      self.note(live))
                self.journal.mark_done(step.mode, step.capacity, SEARCH_DONE)
            case Stop():
                self.stop(step.mode, step.capacity)

    def note(self, live: Live) -> Callable[[str], None]:
        where = f"{live.mode.name} @ {live.capacity}"
        return lambda text: self.journal.reporter.note(f"{where}: {text}")

    async def launch(self, step: Launch) -> None:
        """Bring the target up (stopped on every exit path from here), prepare the
        capacity's prompts."""
        mode = self.plan.mode(step.mode)
        live = Live(mode, step.capacity, self.targets(mode, step),
                    self.journal.server_up(step.mode, step.capacity))
        self.live[(step.mode, step.capacity)] = live
        log = self.journal.run.log_path(step.mode, step.capacity)
        live.endpoint = await live.target.up(log, self.plan.ready_timeout_s, self.note(live))
        prompts = await self.prompts.of(step.capacity, live.target, mode.request_params())
        live.prompts = {p.query_id: p for p in prompts}
        if mode.batch is not None:  # embeddings: the width the server declares
            live.dimension = await live.target.declared_width()

    def stop(self, mode: str, capacity: int) -> None:
        live, facts = self.live.pop((mode, capacity)), None
        try:
            facts = live.target.down()
        finally:
            self.journal.server_down(live.entry, facts)

    def spec(self, live: Live, prompt: PreparedPrompt, repetition: int, position: int,
             warmup: bool = False) -> RequestSpec:
        following: list[PreparedPrompt] = []
        if live.mode.batch is not None:  # a batch: this query and the ones after it
            ids = [q.id for q in self.plan.workload.queries]
            at = ids.index(prompt.query_id) if prompt.query_id in ids else 0
            following = [live.prompts[ids[(at + k) % len(ids)]]
                         for k in range(1, live.mode.batch) if ids[(at + k) % len(ids)]
                         in live.prompts]
        return live.mode.request(prompt, live.capacity, repetition, position,
                                 self.journal.run.run_id, self.plan.workload.output_tokens,
                                 warmup, following, live.dimension)

    def check_alive(self, live: Live, records: list[Record]) -> None:
        """ServerDied when a failed row's managed server is no longer running."""
        if any(r.outcome != Outcome.OK for r in records) and (how := live.target.died()):
            raise ServerDied(f"{live.mode.name} @ {live.capacity}: the server {how} mid-run "
                             f"(log {self.journal.run.log_path(live.mode.name, live.capacity)})")

    async def send(self, live: Live, prompt: PreparedPrompt, repetition: int,
                   warmup: bool = False) -> None:
        """One request, one after another (a warm-up or a sequential row)."""
        assert live.endpoint is not None
        spec = self.spec(live, prompt, repetition, self.journal.take(1), warmup)
        record = await self.driver.send(live.endpoint, spec, self.journal.clock)
        self.journal.land(record)
        self.check_alive(live, [record])

    async def measure_rows(self, step: MeasureRows) -> None:
        """Sequential rows; one mode's are read around by its ``/metrics`` (without
        polling: a scrape would share the server with the row being timed), alternating
        modes' are not."""
        journal, first = self.journal, self.live[(step.rows[0].mode, step.capacity)]
        journal.reporter.begin(step.name, step.capacity, len(step.rows))
        async with nullcontext() if step.interleaved else first.target.gauges(
                journal.run.gauges_path, journal.clock, None, journal.position,
                lambda: journal.position, poll=False):
            for row in step.rows:
                live = self.live[(row.mode, step.capacity)]
                await self.send(live, live.prompts[row.query_id], row.repetition)
        await journal.writer.synced()  # the end of a sequential point
        journal.reporter.end(step.name, step.capacity)

    async def measure_point(self, live: Live, point: LoadStrategy) -> list[Record]:
        """One load point whole (a trace point at its rows' arrival times); entered in
        the state as done once its rows are on the disk."""
        assert live.endpoint is not None
        journal, queries = self.journal, self.plan.workload.queries
        point = point.with_prompts([live.prompts[q.id] for q in queries])
        n = point.planned_requests()
        first = journal.take(n)
        specs = [self.spec(live, live.prompts[queries[i % len(queries)].id],
                           i // len(queries), first + i) for i in range(n)]
        name, label = f"{live.mode.name} {point.label}", point.label or ""
        journal.reporter.begin(name, live.capacity, n)
        async with live.target.gauges(journal.run.gauges_path, journal.clock, point.label,
                                      first, lambda: first + n, poll=True):
            records = await self.driver.run_point(
                point, specs, live.endpoint, journal.clock, journal.land,
                lambda clocks: journal.point_clocks(live.mode.name, live.capacity, label,
                                                    clocks))
        await journal.writer.synced()  # the point's rows are on the disk
        journal.reporter.end(name, live.capacity)
        self.check_alive(live, records)
        journal.mark_done(live.mode.name, live.capacity, label)
        return records
