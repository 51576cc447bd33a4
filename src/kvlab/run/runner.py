"""Run an experiment: plan it, execute the plan into a run directory, evaluate it.

A run is two steps kept apart: the planner (:mod:`kvlab.run.planner`) turns the
experiment file and the command line into a typed plan, checking everything first; the
executor (:mod:`kvlab.run.executor`) walks the plan's steps through a load driver
(:mod:`kvlab.bench.drivers`): for each (mode, capacity) in run order it starts the
server (or checks the endpoint), prepares the capacity's prompts (once, kept in
``prepared.json``), warms up, sends the rows or load points, and stops the server on
every exit path. Each Record is written as it completes. A Ctrl-C, a dead server or a
lost load worker raises :class:`~kvlab.errors.RunInterrupted`; the records written are
kept and a resume skips them.

Public API::

    result = run_experiment(RunRequest(Path("experiments/quickstart.toml")))
    result = run_experiment(RunRequest(resume=Path("runs/quickstart-20250101-120000")),
                            RunOutput(html=False))
    run = prepare_run(Path("experiments/x.toml"), out=Path("runs"))
    run = measure_mode(Path("experiments/x.toml"), "kv-cache", run_dir=None)
    evaluation = evaluate_run(Path("runs/..."))   # evaluation.json + report.md
"""

from __future__ import annotations

import dataclasses
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path

from kvlab.analysis.evaluate import Evaluation, write_evaluation
from kvlab.bench.drivers.driver import LoadDriver
from kvlab.bench.drivers.inprocess import InProcessSettings
from kvlab.errors import ConfigError, EndpointError, RunInterrupted, WorkerError
from kvlab.run.executor import Executor, ServerDied, TargetFactory
from kvlab.run.interrupt import run_interruptibly
from kvlab.run.journal import Journal
from kvlab.run.planner import RunRequest, check_endpoints, plan_new, plan_resume
from kvlab.run.reporter import Reporter, SilentReporter
from kvlab.run.rundir import create_run
from kvlab.run.runplan import Launch, RunPlan, Stop
from kvlab.store.evaluation import evaluate_run_dir
from kvlab.store.rundir import RunDir
from kvlab.store.state import NoLaunch

__all__ = [
    "Reporter", "RunOutput", "RunRequest", "RunResult", "SilentReporter", "evaluate_run",
    "measure_mode", "prepare_run", "run_experiment",
]


@dataclass
class RunResult:
    """What a finished run produced."""

    run_dir: RunDir
    evaluation: Evaluation
    records_written: int


@dataclass(frozen=True)
class RunOutput:
    """Where a run goes and what it writes besides its records: the parent of new run
    dirs (``out``), progress (``reporter``), the self-contained report.html (``html``:
    a few seconds of bootstrap and plotting; report.md and evaluation.json are always
    written), and ``strict``: the evaluation refuses a point whose server counters
    disagree with its records (else it flags it)."""

    out: Path = Path("runs")
    reporter: Reporter = field(default_factory=SilentReporter)
    html: bool = True
    strict: bool = False


def discard_if_empty(run: RunDir) -> None:
    """Remove a new run's directory when no request was recorded in it (a refusal at a
    later check, e.g. prompt sizing): an empty run dir is not a run. Server logs are
    kept (a dir with a ``logs/`` folder stays)."""
    import shutil

    recorded = run.records_path.exists() and run.records_path.stat().st_size > 0
    if not recorded and not (run.path / "logs").exists():
        shutil.rmtree(run.path, ignore_errors=True)


def drive(plan: RunPlan, journal: Journal, driver: LoadDriver,
          targets: TargetFactory | None = None, walk: bool = False) -> None:
    """Start the driver, execute the plan (``walk``: its steps only, no invocation entered), close
    everything; turn Ctrl-C, a dead server and a lost worker into RunInterrupted."""
    from kvlab.analysis.saturation import load_calibration

    reason, status = "", 2
    executor = Executor(plan, journal, driver, targets)
    try:
        if not isinstance(plan.driver, InProcessSettings):
            journal.reporter.note(f"starting the load driver: {plan.driver.describe()}")
        driver.start()
        if driver.workers is not None:
            limit = load_calibration(workers=driver.workers)  # later reports judge by it
            if limit is not None:
                journal.state.worker_calibration = limit.to_dict()
            if plan.in_flight_cap is not None and plan.in_flight_cap < driver.workers:
                raise ConfigError(f"max_concurrency {plan.in_flight_cap} is split over the "
                                  f"{driver.workers} load workers: give each at least one "
                                  "(lower --workers)")
        run_interruptibly(executor.walk(plan.steps) if walk else executor.run())
        return
    except KeyboardInterrupt:
        reason, status = "interrupted", 130
    except (ServerDied, WorkerError) as exc:
        reason = f"interrupted ({exc})"
    finally:
        try:
            driver.close()  # workers ended
        finally:
            journal.close()  # every record landed on the disk, state saved
    records = 0
    with suppress(OSError, ConfigError):
        records = len(RunDir(journal.run.path).records)
    raise RunInterrupted(
        f"{reason}: {records} records kept in {journal.run.path}; "
        f"resume with: kvlab run --resume {journal.run.path}", exit_status=status
    )


def run_experiment(request: RunRequest, output: RunOutput | None = None) -> RunResult:
    """Run every mode of an experiment (or finish a run dir: ``request.resume``), then
    evaluate it; see :class:`~kvlab.run.planner.RunRequest` for what may be asked.
    A new run refused at its checks leaves no run directory."""
    output = output or RunOutput()
    if request.resume is not None:
        run = RunDir.open(request.resume)
        plan = plan_resume(request, run)
        if request.tokenizer is not None:
            run.state.tokenizer = plan.workload.tokenizer
    else:
        plan, experiment = plan_new(request)
        check_endpoints(plan)  # before the run dir exists: a refusal leaves nothing
        assert request.experiment is not None
        run = create_run(output.out, request.experiment, experiment, plan.overrides)
        run.state.tokenizer = plan.workload.tokenizer
        run.state.repeat_aa = plan.repeat_aa
    if plan.no_launch is not None:
        run.state.no_launch = NoLaunch(endpoints=plan.no_launch)
    if request.driver is not None:
        run.state.workers = request.driver.model_dump(mode="json")
    journal = Journal(run, output.reporter)
    try:
        drive(plan, journal, plan.driver.build())
    except (ConfigError, EndpointError):
        if request.resume is None:
            discard_if_empty(run)
        raise
    evaluation = evaluate_run(run.path, strict=output.strict)
    if output.html:
        from kvlab.report.html import write_html

        write_html(run.path, evaluation=evaluation)
    return RunResult(run, evaluation, journal.written)


def prepare_run(experiment_file: Path, out: Path = Path("runs"),
                reporter: Reporter | None = None, tokenizer: Path | None = None) -> RunDir:
    """Create a run dir and write prepared.json, sizing each capacity's prompts with the
    first server of that capacity (started only to count tokens, then stopped)."""
    plan, experiment = plan_new(RunRequest(experiment_file, tokenizer=tokenizer,
                                            driver=InProcessSettings()))
    check_endpoints(plan)
    run = create_run(out, experiment_file, experiment)
    run.state.tokenizer = plan.workload.tokenizer
    steps: list[Launch | Stop] = []
    for capacity in plan.workload.capacities:
        mode = next(m for m in plan.modes if capacity in m.capacities)
        steps += [Launch(mode.name, capacity), Stop(mode.name, capacity)]
    sizing = dataclasses.replace(plan, steps=tuple(steps), driver=InProcessSettings())
    try:
        drive(sizing, Journal(run, reporter or SilentReporter()), sizing.driver.build(),
              walk=True)
    except (ConfigError, EndpointError):
        discard_if_empty(run)
        raise
    return run


def measure_mode(experiment_file: Path | None, mode_name: str, run_dir: Path | None = None,
                 out: Path = Path("runs"), reporter: Reporter | None = None) -> RunDir:
    """Measure one mode into a run dir (new, or an existing one such as prepare's)."""
    if run_dir is not None and Path(run_dir).exists():
        run = RunDir.open(run_dir)
        plan = plan_resume(RunRequest(resume=run.path, driver=InProcessSettings()), run,
                           only=mode_name)
    else:
        if experiment_file is None:
            raise ConfigError("give an experiment file or an existing --run RUN_DIR")
        plan, experiment = plan_new(RunRequest(experiment_file, driver=InProcessSettings()),
                                    only=mode_name)
        run = create_run(out, experiment_file, experiment)
    drive(plan, Journal(run, reporter or SilentReporter()), plan.driver.build())
    return run


def evaluate_run(run_dir: Path, definitions: tuple[str, ...] = (), *,
                 strict: bool = False) -> Evaluation:
    """Recompute evaluation.json and report.md of a run dir from its records.

    ``definitions``: other tools' definition sets (analysis.definitions) that
    evaluation.json keeps beside kvlab's; report.md always shows every set. ``strict``:
    a point whose server counters disagree with its records is refused, not flagged."""
    from kvlab.report.document import write_document

    run = RunDir.open(run_dir)
    experiment = run.experiment()  # a damaged experiment.toml is refused here
    evaluation = evaluate_run_dir(run, definitions, strict=strict)
    write_evaluation(evaluation, run.evaluation_path)
    write_document(run, experiment, evaluation)
    return evaluation
