"""Run an experiment: every mode, every capacity, into one run directory.

For each mode and each of its capacities the runner starts the mode's server
(embedded: ``kvlab serve --ctx-size CAPACITY``; llamacpp: ``llama-server -c
CAPACITY``; external: checks ``/v1/models``), makes sure the capacity's prompts are
prepared (once, with the first server's ``/tokenize``, kept in ``prepared.json``),
sends the warm-up request(s), then every query × repetition one after another. Each
Record is appended and flushed as it completes. The server is stopped on every exit
path. A Ctrl-C or a dead server raises :class:`~kvlab.errors.RunInterrupted`; the
records written are kept and ``resume`` skips them.

Public API::

    result = run_experiment(Path("experiments/quickstart.toml"), out=Path("runs"))
    result = run_experiment(None, resume=Path("runs/quickstart-20250101-120000"))
    run = prepare_run(Path("experiments/x.toml"), out=Path("runs"))
    run = measure_mode(Path("experiments/x.toml"), "kv-cache", run_dir=None)
    evaluation = evaluate_run(Path("runs/..."))   # evaluation.json + report.md
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from kvlab.bench.endpoints import Endpoint, HarnessClient, RequestSpec
from kvlab.bench.evaluate import Evaluation, evaluate, write_evaluation
from kvlab.bench.order import (
    Block,
    interleave,
    plan_blocks,
    resolve_order,
    sequence_of,
    server_sessions,
    split,
)
from kvlab.bench.records import Outcome, Record, RecordStore, RunClock, read_records
from kvlab.bench.rundir import RunDir, now_iso
from kvlab.bench.workload import (
    Prepared,
    PreparedPrompt,
    builtin_queries,
    http_tokenizer,
    load_queries,
    prepare_capacity,
)
from kvlab.errors import ConfigError, RunInterrupted
from kvlab.experiment import Experiment, Mode, load_experiment


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


@dataclass
class RunResult:
    """What a finished run produced."""

    run_dir: RunDir
    evaluation: Evaluation
    records_written: int


def queries_of(experiment: Experiment) -> list[Any]:
    """The experiment's queries: a JSONL file, or the first N built-in ones."""
    if experiment.workload.queries_file:
        return load_queries(Path(experiment.workload.queries_file))
    return builtin_queries(experiment.workload.queries)


def make_server(experiment: Experiment, mode: Mode, capacity: int) -> Any | None:
    """The managed server of ``mode`` at ``capacity``; None for an external endpoint."""
    if mode.server == "embedded":
        from kvlab.servers.embedded import EmbeddedServer

        settings = mode.embedded
        assert settings is not None
        return EmbeddedServer(capacity, settings.preset, settings.no_cache, settings.threads)
    if mode.server == "llamacpp":
        from kvlab.servers.llamacpp import LlamaServer

        return LlamaServer(mode.llamacpp_settings(), capacity)
    return None


def endpoint_for(experiment: Experiment, mode: Mode, server: Any | None) -> Endpoint:
    """Where this mode's requests go. API keys come from the environment, never files."""
    timeout = experiment.protocol.request_timeout_s
    if server is not None:
        model = mode.embedded.preset if mode.embedded else "default"
        return Endpoint(server.base_url, mode.api, model=model, name=mode.name, timeout_s=timeout)
    external = mode.external
    assert external is not None
    if external.endpoint is not None:
        from kvlab.bench.endpoint_config import load_endpoints, select_endpoint

        resolved = select_endpoint(load_endpoints(), external.endpoint)
        return Endpoint(
            resolved.base_url, mode.api, model=resolved.model, api_key=resolved.api_key,
            name=mode.name, timeout_s=timeout,
        )
    api_key = None
    if external.api_key_env:
        api_key = os.environ.get(external.api_key_env)
        if not api_key:
            raise ConfigError(
                f"mode {mode.name}: environment variable {external.api_key_env} is not set"
            )
    assert external.base_url is not None
    return Endpoint(external.base_url, mode.api, model=external.model, api_key=api_key,
                    name=mode.name, timeout_s=timeout)


class _Session:
    """One invocation of the runner over a run directory (a run or a resume)."""

    def __init__(self, run: RunDir, experiment: Experiment, reporter: Reporter) -> None:
        self.run = run
        self.experiment = experiment
        self.reporter = reporter
        self.queries = queries_of(experiment)
        existing = read_records(run.records_path) if run.records_path.exists() else []
        # A key counts as done once it has an ok record; failed rows are retried.
        self.done = {r.key for r in existing if r.outcome == Outcome.OK}
        self.position = max((r.position for r in existing), default=-1) + 1
        self.written = 0
        self.clock = RunClock()
        self.prepared = (
            Prepared.load(run.prepared_path) if run.prepared_path.exists() else self._empty()
        )

    def _empty(self) -> Prepared:
        w = self.experiment.workload
        return Prepared(
            queries_per_mode=len(self.queries) * w.repetitions,
            modes=[m.name for m in self.experiment.modes],
            capacities=self.experiment.all_capacities(),
            output_tokens=w.output_tokens,
            prompt_fraction=w.prompt_fraction,
        )

    async def prompts(self, capacity: int, base_url: str) -> list[PreparedPrompt]:
        """This capacity's prompts, prepared with ``base_url``'s tokenizer on first use."""
        if capacity not in self.prepared.prompts:
            import httpx

            w = self.experiment.workload
            async with httpx.AsyncClient() as client:
                padding, prompts = await prepare_capacity(
                    http_tokenizer(client, base_url), self.queries, capacity,
                    w.prompt_fraction, w.output_tokens,
                )
            self.prepared.padding_tokens[capacity] = padding
            self.prepared.prompts[capacity] = prompts
            self.prepared.save(self.run.prepared_path)
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
        if self.experiment.load.kind != "sequential":
            return self.points_todo(mode, capacity)
        return [
            (rep, qid) for rep, qid in rows
            if (mode.name, capacity, qid, rep, False, None) not in self.done
        ]

    @asynccontextmanager
    async def server_up(self, mode: Mode, capacity: int, store: RecordStore,
                        client: HarnessClient
                        ) -> AsyncIterator[tuple[Endpoint, dict[str, PreparedPrompt], Any]]:
        """Start the mode's server, check it, prepare prompts and warm up; stop it and
        record it in the manifest on the way out."""
        server = make_server(self.experiment, mode, capacity)
        log = self.run.log_path(mode.name, capacity)
        entry: dict[str, Any] = {"mode": mode.name, "capacity": capacity, "started": now_iso()}
        try:
            if server is not None:
                self.reporter.note(f"{mode.name} @ {capacity}: starting {mode.server} server")
                server.start(log, self.experiment.protocol.ready_timeout_s)
            endpoint = endpoint_for(self.experiment, mode, server)
            if server is None:
                from kvlab.bench.endpoints import check_models

                await asyncio.to_thread(check_models, endpoint)
            prompts = {p.query_id: p for p in await self.prompts(capacity, endpoint.base_url)}
            first = next(iter(prompts.values()))
            for i in range(self.experiment.workload.warmup):
                await self.send(client, endpoint, mode, capacity, first, i, store, server,
                                warmup=True)
            yield endpoint, prompts, server
        finally:
            if server is not None:
                server.stop()
                entry["facts"] = server.facts()
            entry["stopped"] = now_iso()
            manifest = self.run.manifest()
            manifest.setdefault("servers", []).append(entry)
            self.run.write_manifest(manifest)

    async def measure(self, mode: Mode, capacity: int, store: RecordStore,
                      client: HarnessClient, blocks: list[Block] | None = None) -> None:
        """Start the server, warm up, send every row not done yet, stop the server."""
        todo = self.todo(mode, capacity, blocks)
        if not todo:
            return
        async with self.server_up(mode, capacity, store, client) as (endpoint, prompts, server):
            if self.experiment.load.kind != "sequential":
                await self.measure_points(mode, capacity, store, endpoint, prompts, server)
                return
            self.reporter.begin(mode.name, capacity, len(todo))
            for rep, qid in todo:
                await self.send(client, endpoint, mode, capacity, prompts[qid], rep, store,
                                server)
            self.reporter.end(mode.name, capacity)

    async def measure_interleaved(self, modes: list[Mode], capacity: int, store: RecordStore,
                                  client: HarnessClient) -> None:
        """Every mode's server up at once; rows alternate request by request."""
        todo = {m.name: self.todo(m, capacity) for m in modes}
        modes = [m for m in modes if todo[m.name]]
        if not modes:
            return
        async with AsyncExitStack() as stack:
            up = {m.name: (m, *await stack.enter_async_context(
                self.server_up(m, capacity, store, client))) for m in modes}
            self.reporter.begin("+".join(up), capacity, sum(len(t) for t in todo.values()))
            for name, (rep, qid) in interleave({m.name: todo[m.name] for m in modes}):
                mode, endpoint, prompts, server = up[name]
                await self.send(client, endpoint, mode, capacity, prompts[qid], rep, store,
                                server)
            self.reporter.end("+".join(up), capacity)

    def points_todo(self, mode: Mode, capacity: int) -> list[tuple[int, str]]:
        """Load points of this mode and capacity not completed yet, as (index, label)."""
        done = {tuple(p) for p in self.run.manifest().get("points_done", [])}
        return [(i, point.label) for i, point in enumerate(self.points())
                if (mode.name, capacity, point.label) not in done]

    def points(self) -> list[Any]:
        w = self.experiment.workload
        return self.experiment.load.points(len(self.queries) * w.repetitions)

    async def measure_points(self, mode: Mode, capacity: int, store: RecordStore,
                             endpoint: Endpoint, prompts: dict[str, PreparedPrompt],
                             server: Any | None) -> None:
        """Each load point not completed yet, whole (a partial point reruns entirely;
        its new rows supersede the earlier attempt's)."""
        from kvlab.bench.schedule import run_point

        pending = {label for _, label in self.points_todo(mode, capacity)}
        for point in self.points():
            if point.label not in pending:
                continue
            n = point.planned_requests(5000 if point.duration_s else 0)
            specs = [self.spec(mode, capacity, prompts[self.queries[i % len(self.queries)].id],
                               i // len(self.queries), position=self.position + i)
                     for i in range(n)]
            self.position += n
            self.reporter.begin(f"{mode.name} {point.label}", capacity, len(specs)
                                if not point.duration_s else point.planned_requests(len(specs)))

            def landed(record: Record) -> None:
                store.append(record)
                self.written += 1
                if not record.warmup:
                    self.reporter.advance(record)

            async with HarnessClient(max_connections=point.max_in_flight(n)) as pool:
                async def send(spec: RequestSpec) -> Record:
                    return await pool.send(endpoint, spec, self.clock)

                records = await run_point(point, specs, send, self.clock, landed)
            self.reporter.end(f"{mode.name} {point.label}", capacity)
            if any(r.outcome != Outcome.OK for r in records) and server is not None \
                    and hasattr(server, "is_alive") and not server.is_alive():
                raise _ServerDied(f"{mode.name} @ {capacity}: the server exited mid-run "
                                  f"(log {self.run.log_path(mode.name, capacity)})")
            manifest = self.run.manifest()
            manifest.setdefault("points_done", []).append([mode.name, capacity, point.label])
            self.run.write_manifest(manifest)

    def spec(self, mode: Mode, capacity: int, prompt: PreparedPrompt, repetition: int,
             position: int, warmup: bool = False) -> RequestSpec:
        """The request of one row (identity included)."""
        return RequestSpec(
            prompt=prompt.prompt,
            max_tokens=self.experiment.workload.output_tokens,
            stream=mode.stream,
            params=self.experiment.request_params(mode),
            run_id=self.run.run_id,
            mode=mode.name,
            capacity=capacity,
            query_id=prompt.query_id,
            repetition=repetition,
            position=position,
            warmup=warmup,
        )

    async def send(self, client: HarnessClient, endpoint: Endpoint, mode: Mode, capacity: int,
                   prompt: PreparedPrompt, repetition: int, store: RecordStore,
                   server: Any | None, warmup: bool = False) -> None:
        spec = self.spec(mode, capacity, prompt, repetition, self.position, warmup)
        record = await client.send(endpoint, spec, self.clock)
        store.append(record)
        self.position += 1
        self.written += 1
        if not warmup:
            self.reporter.advance(record)
        if (record.outcome != Outcome.OK and server is not None
                and hasattr(server, "is_alive") and not server.is_alive()):
            raise _ServerDied(f"{mode.name} @ {capacity}: the server exited mid-run "
                              f"(log {self.run.log_path(mode.name, capacity)})")

    async def run_modes(self, modes: list[Mode]) -> None:
        choice = resolve_order(self.experiment.order, {m.name: m.server for m in modes})
        blocks = plan_blocks([m.name for m in modes],
                             {m.name: self.experiment.capacities(m) for m in modes}, choice.used)
        order = [(b.mode, b.capacity) for b in blocks]
        session = {"started": now_iso(), "modes": [m.name for m in modes], "order": order,
                   "run_order": {**choice.to_dict(), "sequence": sequence_of(blocks)}}
        manifest = self.run.manifest()
        manifest.setdefault("sessions", []).append(session)
        manifest["run_order"] = manifest.get("run_order", []) + [list(o) for o in order]
        manifest["order"] = session["run_order"]  # the order actually used, last session
        self.run.write_manifest(manifest)
        by_name = {m.name: m for m in modes}
        with RecordStore(self.run.records_path) as store:
            async with HarnessClient(max_connections=1) as client:
                if choice.used == "interleaved":
                    for capacity in sorted({b.capacity for b in blocks}):
                        here = [by_name[b.mode] for b in blocks if b.capacity == capacity]
                        await self.measure_interleaved(here, capacity, store, client)
                else:
                    for group in server_sessions(blocks):
                        mode, capacity = by_name[group[0].mode], group[0].capacity
                        await self.measure(mode, capacity, store, client,
                                           group if group[0].parts > 1 else None)
        manifest = self.run.manifest()
        manifest["sessions"][-1]["stopped"] = now_iso()
        self.run.write_manifest(manifest)


class _ServerDied(Exception):
    pass


def _drive(session: _Session, modes: list[Mode]) -> None:
    """Run the session; turn Ctrl-C and a dead server into RunInterrupted."""
    reason = ""
    try:
        asyncio.run(session.run_modes(modes))
        return
    except KeyboardInterrupt:
        reason = "interrupted"
    except _ServerDied as exc:
        reason = f"interrupted ({exc})"
    records = 0
    with suppress(OSError):
        records = len(read_records(session.run.records_path))
    raise RunInterrupted(
        f"{reason}: {records} records kept in {session.run.path}; "
        f"resume with: kvlab run --resume {session.run.path}"
    )


def experiment_of(run: RunDir) -> Experiment:
    """The run's experiment as measured: an A/A run (manifest ``repeat_aa``) is the
    file's mode measured twice."""
    experiment = run.experiment()
    aa = run.manifest().get("repeat_aa")
    return experiment.repeat_aa(aa) if aa else experiment


def run_experiment(experiment_file: Path | None, out: Path = Path("runs"),
                   resume: Path | None = None, reporter: Reporter | None = None,
                   repeat_aa: str | None = None) -> RunResult:
    """Run every mode of an experiment (or resume a run dir), then evaluate it.

    ``repeat_aa``: measure only that mode, twice (as ``<mode>`` and ``<mode>-again``,
    in the experiment's order), and compare the two: the run's noise floor.
    """
    if resume is not None:
        run = RunDir.open(resume)
        experiment = experiment_of(run)
    else:
        if experiment_file is None:
            raise ConfigError("give an experiment file, or --resume RUN_DIR")
        experiment = load_experiment(experiment_file)
        if repeat_aa is not None:
            experiment.mode(repeat_aa)  # ExperimentError before a run dir is made
        run = RunDir.create(out, experiment_file, experiment)
        if repeat_aa is not None:
            run.update_manifest(repeat_aa=repeat_aa)
            experiment = experiment.repeat_aa(repeat_aa)
    session = _Session(run, experiment, reporter or SilentReporter())
    _drive(session, list(experiment.modes))
    evaluation = evaluate_run(run.path)
    return RunResult(run, evaluation, session.written)


def prepare_run(experiment_file: Path, out: Path = Path("runs"),
                reporter: Reporter | None = None) -> RunDir:
    """Create a run dir and write prepared.json, sizing prompts with each capacity's
    first server (started only for /tokenize, then stopped)."""
    experiment = load_experiment(experiment_file)
    run = RunDir.create(out, experiment_file, experiment)
    session = _Session(run, experiment, reporter or SilentReporter())

    async def _prepare() -> None:
        for capacity in experiment.all_capacities():
            mode = next(m for m in experiment.modes if capacity in experiment.capacities(m))
            server = make_server(experiment, mode, capacity)
            try:
                if server is not None:
                    server.start(run.log_path(mode.name, capacity),
                                 experiment.protocol.ready_timeout_s)
                await session.prompts(capacity, endpoint_for(experiment, mode, server).base_url)
            finally:
                if server is not None:
                    server.stop()

    asyncio.run(_prepare())
    session.prepared.save(run.prepared_path)
    return run


def measure_mode(experiment_file: Path | None, mode_name: str, run_dir: Path | None = None,
                 out: Path = Path("runs"), reporter: Reporter | None = None) -> RunDir:
    """Measure one mode into a run dir (new, or an existing one such as prepare's)."""
    if run_dir is not None and Path(run_dir).exists():
        run = RunDir.open(run_dir)
        experiment = run.experiment()
    else:
        if experiment_file is None:
            raise ConfigError("give an experiment file or an existing --run RUN_DIR")
        experiment = load_experiment(experiment_file)
        run = RunDir.create(out, experiment_file, experiment)
    mode = experiment.mode(mode_name)
    _drive(_Session(run, experiment, reporter or SilentReporter()), [mode])
    return run


def evaluate_run(run_dir: Path) -> Evaluation:
    """Recompute evaluation.json and report.md of a run dir from its records."""
    from kvlab.bench.load import Slo, load_summaries
    from kvlab.report.markdown import aa_markdown, load_markdown, order_markdown, render_report
    from kvlab.report.verdicts import intervals_markdown

    run = RunDir.open(run_dir)
    experiment = experiment_of(run)
    records = read_records(run.records_path) if run.records_path.exists() else []
    evaluation = evaluate(
        records, experiment.compare, run_id=run.run_id, experiment=experiment.name,
        mode_order=[m.name for m in experiment.modes],
    )
    summaries = load_summaries(records, Slo(**experiment.slo.model_dump()),
                               experiment.load.slip_threshold_ms)
    manifest = run.manifest()
    evaluation.extra["load"] = [s.to_dict() for s in summaries]
    evaluation.extra["order"] = manifest.get("order")
    if manifest.get("repeat_aa"):
        evaluation.extra["repeat_aa"] = manifest["repeat_aa"]
    write_evaluation(evaluation, run.evaluation_path)
    report = render_report(evaluation, experiment, manifest,
                           intervals=intervals_markdown(records, experiment.compare))
    report += order_markdown(manifest.get("order"))
    report += load_markdown(summaries)
    if manifest.get("repeat_aa"):
        report += aa_markdown(evaluation, manifest["repeat_aa"])
    run.report_path.write_text(report, encoding="utf-8")
    return evaluation
