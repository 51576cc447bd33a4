"""Run an experiment: every mode, every capacity, into one run directory.

For each mode and each of its capacities the runner starts the mode's server
(embedded: ``kvlab serve --ctx-size CAPACITY``; llamacpp: ``llama-server -c
CAPACITY``; external: checks ``/v1/models``), makes sure the capacity's prompts are
prepared (once, counted on the first server by the method :mod:`kvlab.bench.plan.sizing`
picks, kept in ``prepared.json``),
sends the warm-up request(s), then every query × repetition one after another. Each
Record is appended and flushed as it completes. The server is stopped on every exit
path. A Ctrl-C or a dead server raises :class:`~kvlab.errors.RunInterrupted`; the
records written are kept and ``resume`` skips them.

``kvlab run --queries N`` (a quick run of a long protocol) and ``--no-launch
--endpoint MODE[@CAPACITY]=URL`` (servers the user started) are arguments of
:func:`run_experiment`.

This module holds the public entry points; the walk over servers and rows is
:mod:`kvlab.bench.run.sessions`, the servers and endpoints :mod:`kvlab.bench.run.targets`.

Public API::

    result = run_experiment(Path("experiments/quickstart.toml"), out=Path("runs"))
    result = run_experiment(None, resume=Path("runs/quickstart-20250101-120000"))
    run = prepare_run(Path("experiments/x.toml"), out=Path("runs"))
    run = measure_mode(Path("experiments/x.toml"), "kv-cache", run_dir=None)
    evaluation = evaluate_run(Path("runs/..."))   # evaluation.json + report.md
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kvlab.bench.analysis.evaluate import Evaluation, write_evaluation
from kvlab.bench.plan.workload import BUILTIN_QUERIES
from kvlab.bench.run.reporter import Reporter, SilentReporter
from kvlab.bench.run.rundir import create_run
from kvlab.bench.run.sessions import Session, drive, queries_of
from kvlab.bench.run.targets import Attach, attach_plan, endpoint_for, make_server
from kvlab.bench.run.workers import worker_settings
from kvlab.bench.store.evaluation import evaluate_run_dir
from kvlab.bench.store.rundir import PREPARED_FILE, RunDir
from kvlab.bench.store.state import NoLaunch, WorkerChoice
from kvlab.bench.workers.ray_pool import RaySettings
from kvlab.errors import ConfigError, EndpointError
from kvlab.experiment import Experiment, load_experiment

__all__ = [
    "Reporter", "RunResult", "SilentReporter", "endpoint_for", "evaluate_run",
    "make_server", "measure_mode", "prepare_run", "queries_of",
    "run_experiment",
]


@dataclass
class RunResult:
    """What a finished run produced."""

    run_dir: RunDir
    evaluation: Evaluation
    records_written: int



def check_queries(experiment: Experiment, queries: int) -> None:
    """``--queries N`` must pick 1..available built-in queries (ConfigError otherwise)."""
    kind = experiment.workload.dataset.kind
    if kind != "builtin":
        raise ConfigError(f"--queries limits the built-in queries; {experiment.name} reads "
                          f"its rows from the {kind!r} dataset kind: set its rows (or "
                          "shorten its file) instead")
    if experiment.workload.queries_file is not None:
        raise ConfigError(f"--queries limits the built-in queries; {experiment.name} reads "
                          f"its queries from {experiment.workload.queries_file}: shorten that "
                          "file instead")
    if not 1 <= queries <= len(BUILTIN_QUERIES):
        raise ConfigError(f"--queries must be within 1..{len(BUILTIN_QUERIES)} (the built-in "
                          f"queries), got {queries}")


def _attach(experiment: Experiment, endpoints: list[str], aa: str | None) -> Attach:
    """The --no-launch plan of the experiment as measured; an A/A copy (``<mode>-again``)
    is measured against its mode's server unless given its own --endpoint."""
    if aa is not None:
        given = {spec.split("=", 1)[0].split("@", 1)[0] for spec in endpoints}
        if f"{aa}-again" not in given:
            endpoints = endpoints + [f"{aa}-again{spec[len(aa):]}" for spec in endpoints
                                     if spec.split("=", 1)[0].split("@", 1)[0] == aa]
    return attach_plan(experiment, endpoints)


def _workers(choice: WorkerChoice | None, experiment: Experiment) -> RaySettings | None:
    """The load workers of a run (None: one process); ConfigError before a run dir."""
    load = experiment.load
    return worker_settings(choice, load.workers, load.one_by_one)


def tokenizer_path(path: Path | str | None) -> str | None:
    """A named tokenizer file as an absolute path; ConfigError if there is no such file."""
    if path is None:
        return None
    resolved = Path(path).expanduser().resolve()
    if not resolved.is_file():
        raise ConfigError(f"tokenizer {path}: no such file; give a tokenizer.json or a .gguf")
    return str(resolved)


def check_external(experiment: Experiment) -> None:
    """The checks of each external mode that need no run: its settings resolve (URL,
    key variable) and ``GET /v1/models`` lists its model. Raises ConfigError or
    EndpointError (unreachable, 401/403, 404, model not served)."""
    from kvlab.bench.client.models import check_models

    for mode in experiment.modes:
        if not mode.settings.launched:
            check_models(endpoint_for(experiment, mode, None))


def discard_if_empty(run: RunDir) -> None:
    """Remove a new run's directory when no request was recorded in it (a refusal at a
    later check, e.g. prompt sizing): an empty run dir is not a run. Server logs are
    kept (a dir with a ``logs/`` folder stays)."""
    import shutil

    recorded = run.records_path.exists() and run.records_path.stat().st_size > 0
    if not recorded and not (run.path / "logs").exists():
        shutil.rmtree(run.path, ignore_errors=True)


def run_experiment(experiment_file: Path | None, out: Path = Path("runs"),
                   resume: Path | None = None, reporter: Reporter | None = None,
                   repeat_aa: str | None = None, queries: int | None = None,
                   no_launch: bool = False, endpoints: list[str] | None = None,
                   html: bool = True, tokenizer: Path | None = None,
                   workers: WorkerChoice | None = None, strict: bool = False) -> RunResult:
    """Run every mode of an experiment (or resume a run dir), then evaluate it.

    ``repeat_aa``: measure only that mode, twice (as ``<mode>`` and ``<mode>-again``,
    in the experiment's order), and compare the two: the run's noise floor.
    ``queries``: measure the first N built-in queries instead of the file's count; the
    run dir's experiment.toml says N and the manifest records ``overrides``.
    ``no_launch`` + ``endpoints`` (``["MODE=URL", "MODE@CAPACITY=URL"]``): measure the
    embedded/llamacpp modes against servers the user started (see bench.run.targets); a
    resume of such a run reuses the recorded endpoints unless given new ones.
    ``html``: also write the self-contained report.html (a few seconds of bootstrap
    and plotting); report.md and evaluation.json are always written.
    ``tokenizer``: a tokenizer.json or GGUF that counts prompt tokens where a server has
    no /tokenize (instead of the experiment's ``[workload] tokenizer``; see
    bench.plan.sizing); kept in the manifest, so a resume uses it too.
    ``workers``: send each load point through load workers (Ray actors; count, cluster
    address, workers per node; the count defaults to the experiment's ``[load]
    workers``), see bench.run.workers; kept in the manifest, so a resume uses them
    again unless given others.
    ``strict``: the evaluation refuses a point whose server counters disagree with its
    records (else it flags it).
    """
    named = tokenizer_path(tokenizer)
    endpoints = list(endpoints or [])
    if endpoints and not no_launch:
        raise ConfigError("--endpoint MODE=URL goes with --no-launch (kvlab launches the "
                          "servers otherwise)")
    attach: Attach | None = None
    if resume is not None:
        if queries is not None:
            raise ConfigError("--queries applies to a new run; a resumed run keeps the "
                              "query count it started with")
        run = RunDir.open(resume)
        experiment = run.experiment()
        ray = _workers(workers or run.state.workers, experiment)
        if named is not None:
            run.state.tokenizer = named
        recorded = run.state.no_launch
        if recorded is not None or no_launch:
            # endpoints given now replace the recorded ones of the same MODE[@CAPACITY]
            given = {spec.split("=", 1)[0] for spec in endpoints}
            specs = [f"{k}={v}" for k, v in (recorded.endpoints if recorded else {}).items()
                     if k not in given]
            attach = attach_plan(experiment, specs + endpoints)
    else:
        if experiment_file is None:
            raise ConfigError("give an experiment file, or --resume RUN_DIR")
        experiment = load_experiment(experiment_file)
        overrides: dict[str, Any] = {}
        if named is not None:
            overrides["tokenizer"] = named
        named = named or tokenizer_path(experiment.workload.tokenizer)
        if queries is not None:
            check_queries(experiment, queries)
            overrides["queries"] = queries
            experiment.workload.queries = queries
        measured = experiment
        if repeat_aa is not None:
            measured = experiment.repeat_aa(repeat_aa)  # ExperimentError before a run dir
        if no_launch:
            attach = _attach(measured, endpoints, repeat_aa)
        ray = _workers(workers, measured)
        check_external(measured)  # before the run dir exists: a refusal leaves nothing
        run = create_run(out, experiment_file, experiment, overrides)
        run.state.tokenizer = named
        run.state.repeat_aa = repeat_aa
        experiment = measured
    if attach is not None:
        attach.run_path = run.path
        run.state.no_launch = NoLaunch(endpoints=attach.to_manifest())
    if workers is not None:
        run.state.workers = workers
    session = Session(run, experiment, reporter or SilentReporter(), attach, ray)
    try:
        drive(session, list(experiment.modes))
    except (ConfigError, EndpointError):
        if resume is None:
            discard_if_empty(run)
        raise
    evaluation = evaluate_run(run.path, strict=strict)
    if html:
        from kvlab.report.html import write_html

        write_html(run.path, evaluation=evaluation)
    return RunResult(run, evaluation, session.written)


def prepare_run(experiment_file: Path, out: Path = Path("runs"),
                reporter: Reporter | None = None, tokenizer: Path | None = None) -> RunDir:
    """Create a run dir and write prepared.json, sizing prompts with each capacity's
    first server (started only to count tokens, then stopped); ``tokenizer`` as in
    :func:`run_experiment`."""
    experiment = load_experiment(experiment_file)
    named = tokenizer_path(tokenizer) or tokenizer_path(experiment.workload.tokenizer)
    check_external(experiment)
    run = create_run(out, experiment_file, experiment)
    run.state.tokenizer = named
    session = Session(run, experiment, reporter or SilentReporter())

    async def _prepare() -> None:
        for capacity in experiment.all_capacities():
            mode = next(m for m in experiment.modes if capacity in experiment.capacities(m))
            server = make_server(experiment, mode, capacity)
            try:
                if server is not None:
                    server.start(run.log_path(mode.name, capacity),
                                 experiment.protocol.ready_timeout_s)
                await session.prompts(capacity, endpoint_for(experiment, mode, server),
                                      experiment.request_params(mode))
            finally:
                if server is not None:
                    server.stop()

    try:
        asyncio.run(_prepare())
    except (ConfigError, EndpointError):
        session.close()
        discard_if_empty(run)
        raise
    except BaseException:
        session.close()
        raise
    session.writer.save_text(PREPARED_FILE, session.prepared.dumps())
    session.close()
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
        run = create_run(out, experiment_file, experiment)
    mode = experiment.mode(mode_name)
    drive(Session(run, experiment, reporter or SilentReporter()), [mode])
    return run


def evaluate_run(run_dir: Path, definitions: tuple[str, ...] = (), *,
                 strict: bool = False) -> Evaluation:
    """Recompute evaluation.json and report.md of a run dir from its records.

    ``definitions``: other tools' definition sets (bench.analysis.definitions) that
    evaluation.json keeps beside kvlab's; report.md always shows every set. ``strict``:
    a point whose server counters disagree with its records is refused, not flagged."""
    from kvlab.report.document import write_document

    run = RunDir.open(run_dir)
    experiment = run.experiment()  # a damaged experiment.toml is refused here
    evaluation = evaluate_run_dir(run, definitions, strict=strict)
    write_evaluation(evaluation, run.evaluation_path)
    write_document(run, experiment, evaluation)
    return evaluation
