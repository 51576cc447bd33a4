"""The one place an experiment becomes a run plan, with every check a run needs first.

:func:`plan_new` (a new run) and :func:`plan_resume` (a run directory to finish) take
what the user asked (:class:`RunRequest`) and return a
:class:`~kvlab.run.runplan.RunPlan`, or raise one line saying what to fix
(ExperimentError, ConfigError) before any run directory exists: the experiment file's
own validation (with ``--set``'s settings written in), ``--queries`` against the
dataset, ``--repeat-aa``'s mode,
``--no-launch``'s endpoints against the modes and capacities, the tokenizer file, the
load driver against the load (and Ray being installed), each dataset row. The one
check that needs the network, an external endpoint's ``/v1/models``, is
:func:`check_endpoints`, which a new run calls before it creates its directory and a
dry run never does.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kvlab.bench.drivers.driver import DriverSettings
from kvlab.bench.drivers.inprocess import InProcessSettings
from kvlab.bench.drivers.kinds import saved_driver, workers_driver
from kvlab.bench.plan.dataset import Dataset
from kvlab.bench.plan.order import (
    Block,
    interleave,
    plan_blocks,
    resolve_order,
    server_launches,
    split,
)
from kvlab.bench.plan.workload import BUILTIN_QUERIES
from kvlab.errors import ConfigError
from kvlab.experiment import Experiment, Mode, load_experiment, read_experiment
from kvlab.records import Outcome
from kvlab.run.overrides import Setting, overridden_text
from kvlab.run.runplan import (
    Launch,
    MeasurePoint,
    MeasureRows,
    ModePlan,
    Row,
    RunPlan,
    Search,
    Step,
    Stop,
    WarmUp,
    WorkloadPlan,
)
from kvlab.run.search import SEARCH_DONE
from kvlab.run.targets import Attach, attach_plan, endpoint_for
from kvlab.store.rundir import RunDir


@dataclass(frozen=True)
class RunRequest:
    """What the user asked to run (``kvlab run``): an experiment file for a new run, or
    ``resume``, a run directory to finish.

    ``queries``: the first N built-in queries instead of the file's count. ``settings``:
    keys of the file given other values (``--set KEY=VALUE``, run.overrides).
    ``repeat_aa``: measure only that mode, twice (``<mode>`` and ``<mode>-again``), the
    run's noise floor. ``no_launch`` + ``endpoints`` (``MODE=URL``,
    ``MODE@CAPACITY=URL``): measure the launched kinds' modes against servers the user
    started (a resume reuses the recorded ones unless given new ones). ``tokenizer``: a
    tokenizer.json or GGUF counting prompt tokens where a server has no /tokenize.
    ``driver``: the load driver's settings (bench.drivers; default: in this process, or
    the experiment's ``[load] workers`` Ray workers; a resume uses the recorded one)."""

    experiment: Path | None = None
    resume: Path | None = None
    queries: int | None = None
    settings: tuple[Setting, ...] = ()
    repeat_aa: str | None = None
    no_launch: bool = False
    endpoints: tuple[str, ...] = ()
    tokenizer: Path | None = None
    driver: DriverSettings | None = None


@dataclass
class Done:
    """What a run directory already holds: ok rows (their keys) and completed points."""

    rows: set[tuple[str, int, str, int, bool, str | None]] = field(default_factory=set)
    points: set[tuple[str, int, str]] = field(default_factory=set)


def tokenizer_path(path: Path | str | None) -> str | None:
    """A named tokenizer file as an absolute path; ConfigError if there is no such file."""
    if path is None:
        return None
    resolved = Path(path).expanduser().resolve()
    if not resolved.is_file():
        raise ConfigError(f"tokenizer {path}: no such file; give a tokenizer.json or a .gguf")
    return str(resolved)


def check_queries(experiment: Experiment, queries: int) -> None:
    """``--queries N`` must pick 1..available built-in queries (ConfigError otherwise)."""
    dataset = experiment.workload.dataset
    if dataset.kind != "builtin":
        raise ConfigError(f"--queries limits the built-in queries; {experiment.name} reads "
                          f"its rows from the {dataset.kind!r} dataset kind: set its rows (or "
                          "shorten its file) instead")
    if experiment.workload.queries_file is not None:
        raise ConfigError(f"--queries limits the built-in queries; {experiment.name} reads "
                          f"its queries from {experiment.workload.queries_file}: shorten that "
                          "file instead")
    if not 1 <= queries <= len(BUILTIN_QUERIES):
        raise ConfigError(f"--queries must be within 1..{len(BUILTIN_QUERIES)} (the built-in "
                          f"queries), got {queries}")


def plan_new(request: RunRequest, only: str | None = None) -> tuple[RunPlan, Experiment]:
    """The plan of a new run, and the experiment file as read (its run directory keeps
    a copy); every check but the network's (:func:`check_endpoints`). ``only``: measure
    that mode alone (``kvlab measure``)."""
    if request.resume is not None or request.experiment is None:
        raise ConfigError("give an experiment file, or --resume RUN_DIR")
    named = tokenizer_path(request.tokenizer)
    _endpoints_need_no_launch(request)
    overrides: dict[str, Any] = {"tokenizer": named} if named is not None else {}
    experiment = load_experiment(request.experiment)  # the file's own errors first
    if request.settings:
        keys = [s.key for s in request.settings]
        if "workload.queries" in keys and request.queries is not None:
            raise ConfigError("give --queries N or --set workload.queries=N, not both")
        if len(set(keys)) < len(keys):
            raise ConfigError(f"--set gives {max(keys, key=keys.count)} twice; give it once")
        overrides["set"] = {s.key: s.value for s in request.settings}
        experiment = _overridden(request.experiment, overrides)
    if request.queries is not None:
        check_queries(experiment, request.queries)
        overrides["queries"] = request.queries
        experiment = _overridden(request.experiment, overrides)
    measured = experiment
    aa = request.repeat_aa
    if aa is not None:
        measured = experiment.repeat_aa(aa)  # ExperimentError for a wrong mode
    attach = None
    if request.no_launch:
        specs = list(request.endpoints)
        given = {spec.split("=", 1)[0].split("@", 1)[0] for spec in specs}
        if aa is not None and f"{aa}-again" not in given:  # the copy shares its server
            specs += [f"{aa}-again{spec[len(aa):]}" for spec in specs
                      if spec.split("=", 1)[0].split("@", 1)[0] == aa]
        attach = attach_plan(measured, specs)
    tokenizer = named or tokenizer_path(measured.workload.tokenizer)
    plan = build_plan(measured, measured.workload.source(), Done(), tokenizer=tokenizer,
                      attach=attach, asked=request.driver, overrides=overrides,
                      repeat_aa=aa, only=only)
    return plan, experiment


def plan_resume(request: RunRequest, run: RunDir, only: str | None = None) -> RunPlan:
    """The plan that finishes ``run``: the experiment as measured, its rows and points
    not done yet, the recorded endpoints, tokenizer and driver unless given others
    (``only``: that mode alone)."""
    if request.queries is not None or request.settings:
        raise ConfigError("--queries and --set apply to a new run; a resumed run keeps the "
                          "experiment it started with (its experiment.toml)")
    named = tokenizer_path(request.tokenizer)
    _endpoints_need_no_launch(request)
    experiment = run.experiment()
    state = run.state
    recorded = state.no_launch
    attach = None
    if recorded is not None or request.no_launch:
        # endpoints given now replace the recorded ones of the same MODE[@CAPACITY]
        given = {spec.split("=", 1)[0] for spec in request.endpoints}
        specs = [f"{k}={v}" for k, v in (recorded.endpoints if recorded else {}).items()
                 if k not in given]
        attach = attach_plan(experiment, specs + list(request.endpoints))
    done = Done({r.key for r in run.records if r.outcome == Outcome.OK},
                set(state.points_done or []))
    tokenizer = named or state.tokenizer or experiment.workload.tokenizer
    asked = request.driver or saved_driver(state.workers)
    dataset = experiment.workload.source(state.dataset_file)
    return build_plan(experiment, dataset, done, tokenizer=tokenizer, attach=attach,
                      asked=asked, overrides={}, repeat_aa=state.repeat_aa, only=only)


def _overridden(path: Path, overrides: dict[str, Any]) -> Experiment:
    """The experiment file with the run's overrides written in, validated as a file (the
    run directory keeps this text as experiment.toml)."""
    return load_experiment(path, overridden_text(read_experiment(path), overrides, str(path)))


def _endpoints_need_no_launch(request: RunRequest) -> None:
    if request.endpoints and not request.no_launch:
        raise ConfigError("--endpoint MODE=URL goes with --no-launch (kvlab launches the "
                          "servers otherwise)")


def mode_plan(experiment: Experiment, mode: Mode) -> ModePlan:
    """How ``mode`` of ``experiment`` is reached and asked."""
    return ModePlan(mode.name, mode.settings, mode.api, mode.stream,
                    experiment.protocol.params(),
                    dict(mode.body), experiment.protocol.cache_salt,
                    tuple(experiment.capacities(mode)),
                    mode.inputs_batch, mode.history == "server")


def build_plan(experiment: Experiment, dataset: Dataset, done: Done, *, tokenizer: str | None,
               attach: Attach | None, asked: DriverSettings | None,
               overrides: dict[str, Any], repeat_aa: str | None,
               only: str | None = None) -> RunPlan:
    """The steps of ``experiment`` in run order (of mode ``only``, if given), without
    what ``done`` holds."""
    w, load = experiment.workload, experiment.load
    queries = tuple(dataset.queries())  # a bad dataset row: one line, here
    modes = tuple(mode_plan(experiment, m) for m in experiment.modes)
    measured = [experiment.mode(only)] if only is not None else experiment.modes
    choice = resolve_order(experiment.order, {m.name: m.server for m in measured},
                           alone={m.server: m.settings.program for m in measured
                                  if not m.settings.interleaves})
    blocks = plan_blocks([m.name for m in measured],
                         {m.name: experiment.capacities(m) for m in measured}, choice.used)
    rows = len(queries) * w.repetitions
    every = [(rep, q.id) for rep in range(w.repetitions) for q in queries]

    def url(mode: str, capacity: int) -> str | None:
        launched = experiment.mode(mode).settings.launched
        return attach.url(mode, capacity) if attach is not None and launched else None

    def rows_todo(mode: str, capacity: int, shares: list[Block] | None) -> list[Row]:
        mine = [r for b in shares for r in split(every, b.part, b.parts)] if shares else every
        return [Row(mode, rep, qid) for rep, qid in mine
                if (mode, capacity, qid, rep, False, None) not in done.rows]

    def measures(mode: str, capacity: int, shares: list[Block] | None) -> list[Step]:
        if experiment.search is not None:
            if (mode, capacity, SEARCH_DONE) in done.points:
                return []
            return [Search(mode, capacity, experiment.search, experiment.slo, load, rows)]
        if not load.one_by_one:
            return [MeasurePoint(mode, capacity, p) for p in load.points(rows)
                    if (mode, capacity, p.label or "") not in done.points]
        todo = rows_todo(mode, capacity, shares)
        return [MeasureRows(capacity, tuple(todo), mode)] if todo else []

    def up(mode: str, capacity: int) -> list[Step]:
        warm = [WarmUp(mode, capacity, w.warmup)] if w.warmup else []
        return [Launch(mode, capacity, url(mode, capacity)), *warm]

    steps: list[Step] = []
    if choice.used == "interleaved":
        for capacity in sorted({b.capacity for b in blocks}):
            todo = {b.mode: rows_todo(b.mode, capacity, None) for b in blocks
                    if b.capacity == capacity}
            here = [m for m, t in todo.items() if t]
            if not here:
                continue
            for mode in here:
                steps += up(mode, capacity)
            alternating = interleave({m: todo[m] for m in here})
            steps.append(MeasureRows(capacity, tuple(r for _, r in alternating), "+".join(here),
                                     interleaved=True))
            steps += [Stop(m, capacity) for m in reversed(here)]
    else:
        for group in server_launches(blocks):
            mode, capacity = group[0].mode, group[0].capacity
            work = measures(mode, capacity, group if group[0].parts > 1 else None)
            if work:
                steps += [*up(mode, capacity), *work, Stop(mode, capacity)]
    driver = choose_driver(asked, load.workers)
    plan = RunPlan(
        name=experiment.name, modes=modes,
        workload=WorkloadPlan(dataset, queries, w.repetitions, w.warmup, w.output_tokens,
                              w.prompt_fraction, tokenizer, experiment.protocol.cache_prompt,
                              tuple(experiment.all_capacities())),
        order=choice, blocks=tuple(blocks), steps=tuple(steps), driver=driver,
        slip_threshold_ms=load.slip_threshold_ms, in_flight_cap=load.in_flight_cap(),
        ready_timeout_s=experiment.protocol.ready_timeout_s,
        request_timeout_s=experiment.protocol.request_timeout_s, overrides=overrides,
        repeat_aa=repeat_aa, no_launch=attach.to_manifest() if attach is not None else None)
    driver.check(not load.one_by_one)
    return plan


def choose_driver(asked: DriverSettings | None, file_workers: int | None) -> DriverSettings:
    """The driver a run uses: the one asked (its worker count defaulting to the file's
    ``[load] workers``), else the file's workers, else this process."""
    if asked is not None:
        return asked.with_workers(file_workers)
    return workers_driver(file_workers) if file_workers else InProcessSettings()


def check_endpoints(plan: RunPlan) -> None:
    """Each external mode's settings resolve (URL, key variable) and ``GET /v1/models``
    lists its model. Raises ConfigError or EndpointError (unreachable, 401/403, 404,
    model not served)."""
    from kvlab.bench.client.models import check_models

    for mode in plan.modes:
        if not mode.settings.launched:
            check_models(endpoint_for(mode, None, plan.request_timeout_s))
