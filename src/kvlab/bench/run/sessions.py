"""One invocation of the runner over a run directory: servers up, rows sent, records kept.

A :class:`Session` walks the run order (blocked, ABBA shares or interleaved, see
:mod:`kvlab.bench.plan.order`): for each (mode, capacity) it starts the server (or checks
the endpoint), prepares the capacity's prompts on first use (``prepared.json``), warms
up, then sends the rows not done yet, one after another or as whole load points
(:mod:`kvlab.bench.plan.schedule`); where the protocol allows prefix reuse, the warm-up
prompt shares no prefix with any row (:func:`~kvlab.bench.plan.workload.warmup_prompt`).
The session owns the run's state
(:class:`~kvlab.bench.store.state.RunState`) in memory and saves it, and every Record
as it lands, through the run's one writer (:class:`~kvlab.bench.store.writer.RunWriter`,
off the event loop; synced to the disk at the end of each load point and on every
exit). The server is stopped and entered in the state on every exit path. With load
workers (``kvlab run --workers``, :mod:`kvlab.bench.run.workers`) each load point is
sent by them instead, into the same writer. :func:`drive` turns Ctrl-C, a dead server
and a lost worker into :class:`~kvlab.errors.RunInterrupted`.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AsyncExitStack, asynccontextmanager, suppress
from pathlib import Path
from typing import Any

from kvlab.bench.client.endpoints import Endpoint, HarnessClient, RequestSpec
from kvlab.bench.client.gauges import DEFAULT_INTERVAL_S, GaugeRecorder
from kvlab.bench.plan.loads.base import LoadStrategy
from kvlab.bench.plan.order import (
    Block,
    interleave,
    plan_blocks,
    resolve_order,
    sequence_of,
    server_sessions,
    split,
)
from kvlab.bench.plan.workload import Prepared, PreparedPrompt, Query, warmup_prompt
from kvlab.bench.records import Outcome, Record, RunClock
from kvlab.bench.run.reporter import Reporter
from kvlab.bench.run.rundir import now_iso
from kvlab.bench.run.search import SEARCH_DONE, search_capacity
from kvlab.bench.run.targets import Attach, AttachedServer, endpoint_for, make_server, redact_url
from kvlab.bench.run.workers import RunWorkers
from kvlab.bench.store.rundir import PREPARED_FILE, RunDir
from kvlab.bench.store.state import ServerEntry, SessionEntry
from kvlab.bench.store.writer import RunWriter
from kvlab.bench.workers.ray_pool import RaySettings
from kvlab.errors import ConfigError, RunInterrupted, WorkerError
from kvlab.experiment import Experiment, Mode, request_salt
from kvlab.servers.base import Server
from kvlab.servers.preflight import load_average


def queries_of(experiment: Experiment) -> list[Query]:
    """The experiment's queries, from its dataset (see bench.plan.datasets)."""
    return experiment.workload.source().queries()


class ServerDied(Exception):
    """A managed server exited mid-run (its rows failed); the session stops."""


class Session:
    """One invocation of the runner over a run directory (a run or a resume)."""

    def __init__(self, run: RunDir, experiment: Experiment, reporter: Reporter,
                 attach: Attach | None = None, workers: RaySettings | None = None) -> None:
        self.run = run
        self.experiment = experiment
        self.reporter = reporter
        self.attach = attach  # --no-launch: the user's servers instead of launching
        # the dataset's file as resolved when the run began (a resume reads it again)
        self.dataset = experiment.workload.source(run.state.dataset_file)
        self.queries = self.dataset.queries()
        self.state = run.state  # owned here, in memory; saved through self.writer
        existing = run.records
        # A key counts as done once it has an ok record; failed rows are retried.
        self.done = {r.key for r in existing if r.outcome == Outcome.OK}
        self.position = max((r.position for r in existing), default=-1) + 1
        self.written = 0
        self.clock = RunClock()
        self.prepared = (
            Prepared.load(run.prepared_path) if run.prepared_path.exists() else self._empty()
        )
        self.counts: dict[tuple[str, str], dict[str, int]] = {}  # prompt-sizing counts
        self.writer = RunWriter(run.path)  # the run's one writer, until close()
        # kvlab run --workers: load points go through these (started by drive)
        self.workers = RunWorkers(workers, self.state, self.writer) if workers else None

    def close(self) -> None:
        """End the load workers, write the state, sync every record to the disk, stop
        the writer."""
        try:
            if self.workers is not None:
                self.workers.close()
        finally:
            self.writer.save(self.state)
            self.writer.close()

    def _empty(self) -> Prepared:
        w = self.experiment.workload
        return Prepared(
            queries_per_mode=len(self.queries) * w.repetitions,
            modes=[m.name for m in self.experiment.modes],
            capacities=self.experiment.all_capacities(),
            output_tokens=w.output_tokens,
            prompt_fraction=w.prompt_fraction,
        )

    async def prompts(self, capacity: int, endpoint: Endpoint,
                      params: dict[str, Any] | None = None) -> list[PreparedPrompt]:
        """This capacity's prompts, prepared on first use with the token counter
        :func:`~kvlab.bench.plan.sizing.choose_counter` picks for ``endpoint`` (``params``:
        the mode's body fields, for calibration probes); the method is kept in
        prepared.json and the manifest (``prompt_sizing``)."""
        if capacity not in self.prepared.prompts:
            import httpx

            from kvlab.bench.plan.sizing import choose_counter

            w = self.experiment.workload
            # the path resolved when the run began (the run dir's copy of the file
            # would resolve a relative path against the run dir)
            named = self.state.tokenizer or w.tokenizer
            tokenizer = Path(named) if named else None
            async with httpx.AsyncClient() as client:
                counter = (await choose_counter(client, endpoint, params or {}, tokenizer)
                           ).share(self.counts)
                padding, prompts = await self.dataset.prepare(
                    counter, capacity, w.prompt_fraction, w.output_tokens)
            self.prepared.padding_tokens[capacity] = padding
            self.prepared.prompts[capacity] = prompts
            self.prepared.sizing[capacity] = counter.sizing.to_json()
            self.writer.save_text(PREPARED_FILE, self.prepared.dumps())
            sizing = self.state.prompt_sizing = self.state.prompt_sizing or {}
            sizing[str(capacity)] = counter.sizing.to_json()
            self.writer.save(self.state)
        return self.prepared.prompts[capacity]

    def todo(self, mode: Mode, capacity: int,
             blocks: list[Block] | None = None) -> list[tuple[int, str]]:
        """(repetition, query id) rows of this mode and capacity not done yet; with
        ``blocks`` (an ABBA share), only the rows of those shares."""
        rows = [
            (rep, q.id)
            for rep in range(self.experiment.workload.repetitions)
            for q in self.queries
        ]
        if blocks:
            rows = [r for b in blocks for r in split(rows, b.part, b.parts)]
        if self.experiment.search is not None:
            done = self.state.point_done(mode.name, capacity, SEARCH_DONE)
            return [] if done else [(0, SEARCH_DONE)]
        if not self.experiment.load.one_by_one:
            return self.points_todo(mode, capacity)
        return [
            (rep, qid) for rep, qid in rows
            if (mode.name, capacity, qid, rep, False, None) not in self.done
        ]

    @asynccontextmanager
    async def server_up(self, mode: Mode, capacity: int, client: HarnessClient
                        ) -> AsyncIterator[tuple[Endpoint, dict[str, PreparedPrompt],
                                                 Server | None]]:
        """Start the mode's server, check it, prepare prompts and warm up; stop it and
        record it in the state on the way out."""
        server = make_server(self.experiment, mode, capacity, self.attach)
        log = self.run.log_path(mode.name, capacity)
        entry = ServerEntry(mode=mode.name, capacity=capacity, started=now_iso())
        try:
            if server is not None:
                what = (f"checking {redact_url(server.base_url)}"
                        if isinstance(server, AttachedServer) else f"starting {mode.server} server")
                self.reporter.note(f"{mode.name} @ {capacity}: {what}")
                server.start(log, self.experiment.protocol.ready_timeout_s)
            endpoint = endpoint_for(self.experiment, mode, server)
            if server is None:
                from kvlab.bench.client.models import check_models

                await asyncio.to_thread(check_models, endpoint)
            prompts = {p.query_id: p for p in await self.prompts(
                capacity, endpoint, self.experiment.request_params(mode))}
            first = warmup_prompt(next(iter(prompts.values())),
                                  self.experiment.protocol.cache_prompt)
            for i in range(self.experiment.workload.warmup):
                await self.send(client, endpoint, mode, capacity, first, i, server,
                                warmup=True)
            yield endpoint, prompts, server
        finally:
            if server is not None:
                server.stop()
                entry.facts = server.facts()
            entry.stopped = now_iso()
            self.state.servers.append(entry)
            self.writer.save(self.state)

    async def measure(self, mode: Mode, capacity: int, client: HarnessClient,
                      blocks: list[Block] | None = None) -> None:
        """Start the server, warm up, send every row not done yet, stop the server."""
        todo = self.todo(mode, capacity, blocks)
        if not todo:
            return
        async with self.server_up(mode, capacity, client) as (endpoint, prompts, server):
            if self.experiment.search is not None:
                await search_capacity(self, mode, capacity, endpoint, prompts, server)
                return
            if not self.experiment.load.one_by_one:
                await self.measure_points(mode, capacity, endpoint, prompts, server)
                return
            self.reporter.begin(mode.name, capacity, len(todo))
            async with self.gauges(mode, capacity, None, endpoint, self.position,
                                   lambda: self.position, poll=False):
                for rep, qid in todo:
                    await self.send(client, endpoint, mode, capacity, prompts[qid], rep, server)
            await self.writer.synced()  # the end of a sequential point
            self.reporter.end(mode.name, capacity)

    async def measure_interleaved(self, modes: list[Mode], capacity: int,
                                  client: HarnessClient) -> None:
        """Every mode's server up at once; rows alternate request by request."""
        todo = {m.name: self.todo(m, capacity) for m in modes}
        modes = [m for m in modes if todo[m.name]]
        if not modes:
            return
        async with AsyncExitStack() as stack:
            up = {m.name: (m, *await stack.enter_async_context(
                self.server_up(m, capacity, client))) for m in modes}
            self.reporter.begin("+".join(up), capacity, sum(len(t) for t in todo.values()))
            for name, (rep, qid) in interleave({m.name: todo[m.name] for m in modes}):
                mode, endpoint, prompts, server = up[name]
                await self.send(client, endpoint, mode, capacity, prompts[qid], rep, server)
            await self.writer.synced()
            self.reporter.end("+".join(up), capacity)

    def points_todo(self, mode: Mode, capacity: int) -> list[tuple[int, str]]:
        """Load points of this mode and capacity not completed yet, as (index, label)."""
        return [(i, point.label or "") for i, point in enumerate(self.points())
                if not self.state.point_done(mode.name, capacity, point.label or "")]

    def points(self) -> Sequence[LoadStrategy]:
        w = self.experiment.workload
        return self.experiment.load.points(len(self.queries) * w.repetitions)

    async def measure_points(self, mode: Mode, capacity: int, endpoint: Endpoint,
                             prompts: dict[str, PreparedPrompt], server: Server | None
                             ) -> None:
        """Each load point not completed yet, whole (a partial point reruns entirely;
        its new rows supersede the earlier attempt's)."""
        pending = {label for _, label in self.points_todo(mode, capacity)}
        for point in self.points():
            if point.label in pending:
                await self.run_load_point(mode, capacity, endpoint, prompts, server, point)

    async def run_load_point(self, mode: Mode, capacity: int, endpoint: Endpoint,
                             prompts: dict[str, PreparedPrompt], server: Server | None,
                             point: LoadStrategy) -> list[Record]:
        """Send one load point whole (a trace point at its rows' arrival times), enter
        it in the state as done, and return its measured records."""
        from kvlab.bench.plan.schedule import run_point

        point = point.with_prompts([prompts[q.id] for q in self.queries])
        n = point.planned_requests()
        first = self.position
        specs = [self.spec(mode, capacity, prompts[self.queries[i % len(self.queries)].id],
                           i // len(self.queries), position=first + i)
                 for i in range(n)]
        self.position += n
        self.reporter.begin(f"{mode.name} {point.label}", capacity, n)

        def landed(record: Record) -> None:
            self.writer.append(record)
            self.written += 1
            if not record.warmup:
                self.reporter.advance(record)

        async with self.gauges(mode, capacity, point.label, endpoint, first, first + n):
            if self.workers is not None:
                records = await self.workers.send_point(
                    mode.name, capacity, point, specs, endpoint, self.clock, landed)
            else:
                async with HarnessClient(max_connections=point.max_in_flight(n)) as pool:
                    async def send(spec: RequestSpec) -> Record:
                        return await pool.send(endpoint, spec, self.clock)

                    records = await run_point(point, specs, send, self.clock, landed)
        await self.writer.synced()  # the point's rows are on the disk
        self.reporter.end(f"{mode.name} {point.label}", capacity)
        if any(r.outcome != Outcome.OK for r in records) and server is not None \
                and not server.is_alive():
            raise ServerDied(self.died(mode, capacity, server))
        self.mark_done(mode, capacity, point.label or "")
        return records

    def mark_done(self, mode: Mode, capacity: int, label: str) -> None:
        """Enter a load point (or a whole search, ``SEARCH_DONE``) as completed."""
        done = self.state.points_done = self.state.points_done or []
        done.append((mode.name, capacity, label))
        self.writer.save(self.state)

    @asynccontextmanager
    async def gauges(self, mode: Mode, capacity: int, load: str | None, endpoint: Endpoint,
                     start: int, end: int | Callable[[], int], poll: bool = True
                     ) -> AsyncIterator[None]:
        """Read the server's ``/metrics`` into gauges.jsonl around the requests at run
        positions ``start`` .. ``end`` (read on exit when a function), and during them
        with ``poll`` (not for sequential rows: a scrape would share the server with the
        row being timed). Nothing for a server without ``/metrics``; an external
        endpoint's key goes in the headers only."""
        headers = {"Authorization": f"Bearer {endpoint.api_key}"} if endpoint.api_key else {}
        last = end if callable(end) else (lambda: end)
        recorder = GaugeRecorder(endpoint.base_url, self.run.gauges_path, self.clock,
                                 mode=mode.name, capacity=capacity, load=load,
                                 start_position=start, end_position=last, headers=headers,
                                 interval_s=DEFAULT_INTERVAL_S if poll else None)
        try:
            async with recorder:
                yield
        finally:
            if recorder.problem:
                self.reporter.note(f"{mode.name} @ {capacity}: {recorder.problem}")

    def died(self, mode: Mode, capacity: int, server: Server) -> str:
        """The one-line reason a managed server stopped mid-run (its signal, if any)."""
        how = server.exit_description() or "exited"
        return (f"{mode.name} @ {capacity}: the server {how} mid-run "
                f"(log {self.run.log_path(mode.name, capacity)})")

    def spec(self, mode: Mode, capacity: int, prompt: PreparedPrompt, repetition: int,
             position: int, warmup: bool = False) -> RequestSpec:
        """The request of one row (identity included)."""
        return RequestSpec(
            prompt=prompt.prompt,
            max_tokens=prompt.asked_output(self.experiment.workload.output_tokens),
            stream=mode.stream,
            params=self.experiment.request_params(mode, request_salt(self.run.run_id, position)),
            run_id=self.run.run_id,
            mode=mode.name,
            capacity=capacity,
            query_id=prompt.query_id,
            repetition=repetition,
            position=position,
            warmup=warmup,
        )

    async def send(self, client: HarnessClient, endpoint: Endpoint, mode: Mode, capacity: int,
                   prompt: PreparedPrompt, repetition: int, server: Server | None,
                   warmup: bool = False) -> None:
        spec = self.spec(mode, capacity, prompt, repetition, self.position, warmup)
        record = await client.send(endpoint, spec, self.clock)
        self.writer.append(record)
        self.position += 1
        self.written += 1
        if not warmup:
            self.reporter.advance(record)
        if record.outcome != Outcome.OK and server is not None and not server.is_alive():
            raise ServerDied(self.died(mode, capacity, server))

    async def run_modes(self, modes: list[Mode]) -> None:
        choice = resolve_order(self.experiment.order, {m.name: m.server for m in modes},
                               alone={m.server: m.settings.program for m in modes
                                      if not m.settings.interleaves})
        blocks = plan_blocks([m.name for m in modes],
                             {m.name: self.experiment.capacities(m) for m in modes}, choice.used)
        order = [(b.mode, b.capacity) for b in blocks]
        session = SessionEntry(started=now_iso(), load_average_started=load_average(),
                               modes=[m.name for m in modes], order=order,
                               run_order={**choice.to_dict(), "sequence": sequence_of(blocks)},
                               workers=self.workers.facts if self.workers else None)
        self.state.sessions.append(session)
        self.state.run_order += order
        self.state.order = session.run_order  # the order actually used, last session
        self.writer.save(self.state)
        by_name = {m.name: m for m in modes}
        async with HarnessClient(max_connections=1) as client:
            if choice.used == "interleaved":
                for capacity in sorted({b.capacity for b in blocks}):
                    here = [by_name[b.mode] for b in blocks if b.capacity == capacity]
                    await self.measure_interleaved(here, capacity, client)
            else:
                for group in server_sessions(blocks):
                    mode, capacity = by_name[group[0].mode], group[0].capacity
                    await self.measure(mode, capacity, client,
                                       group if group[0].parts > 1 else None)
        session.stopped = now_iso()
        session.load_average_stopped = load_average()
        self.writer.save(self.state)


def drive(session: Session, modes: list[Mode]) -> None:
    """Start the session's load workers, if any, and run it; turn Ctrl-C, a dead server
    and a lost worker into RunInterrupted."""
    reason, status = "", 2
    try:
        if session.workers is not None:
            session.reporter.note("starting the load workers")
            session.workers.start(session.experiment.load.in_flight_cap())
        asyncio.run(session.run_modes(modes))
        return
    except KeyboardInterrupt:
        reason, status = "interrupted", 130
    except (ServerDied, WorkerError) as exc:
        reason = f"interrupted ({exc})"
    finally:
        session.close()  # workers ended, every record landed on the disk, state saved
    records = 0
    with suppress(OSError, ConfigError):
        records = len(RunDir(session.run.path).records)
    raise RunInterrupted(
        f"{reason}: {records} records kept in {session.run.path}; "
        f"resume with: kvlab run --resume {session.run.path}", exit_status=status
    )

