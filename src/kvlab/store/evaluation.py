"""The one evaluation of a run directory: its records judged with its experiment and state.

``kvlab run``, ``kvlab evaluate``, ``kvlab report`` and a report rendered on its own all
call :func:`evaluate_run_dir`, so a run has one evaluation whichever path built it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from kvlab.analysis.capacity import Objectives, SearchPlan
from kvlab.analysis.client_error import DEFAULT_LIMIT, client_error_verdicts, client_errors
from kvlab.analysis.evaluate import Evaluation, evaluate
from kvlab.analysis.load import Slo
from kvlab.analysis.point_verdicts import point_verdicts
from kvlab.analysis.run_view import EvaluateOptions, Recorded, RunView, recorded_servers
from kvlab.analysis.saturation import Calibration, load_calibration
from kvlab.analysis.server_counters import point_counters
from kvlab.analysis.session_turns import PlannedTurn
from kvlab.analysis.summaries import modes_in_order
from kvlab.analysis.trace_hits import TraceBlocks
from kvlab.analysis.turns import TurnPlan
from kvlab.analysis.valid_rows import CellPlan, GroupKey, ValidRows, current_rows, judge
from kvlab.experiment import Experiment, SearchSettings, SloSettings
from kvlab.rundir import Prepared, RunDir
from kvlab.store.runs import known_experiment


def search_of(experiment: Experiment) -> tuple[Objectives, SearchPlan] | None:
    """The objectives and plan of the experiment's ``[search]`` (None: it has none)."""
    if experiment.search is None:
        return None
    return objectives_of(experiment.search, experiment.slo)


def objectives_of(search: SearchSettings, slo_table: SloSettings
                  ) -> tuple[Objectives, SearchPlan]:
    """The objectives and plan of a ``[search]`` table, with its ``[slo]`` for goodput."""
    slo = Slo(**slo_table.model_dump())
    objectives = Objectives.of(search.percentile, ttft_ms=search.ttft_ms,
                               itl_ms=search.itl_ms, e2e_ms=search.e2e_ms,
                               goodput=search.goodput, slo=None if slo.empty else slo)
    return objectives, SearchPlan(search.low, search.high, search.precision,
                                  search.max_rates, search.max_refused)


def turn_plans(prepared: Prepared | None) -> list[TurnPlan]:
    """The multi-turn rows of prepared.json (a conversation and a turn), per capacity."""
    return [TurnPlan(capacity, p.query_id, p.conversation, p.turn, p.tokens)
            for capacity, prompts in (prepared.prompts if prepared else {}).items()
            for p in prompts
            if p.conversation is not None and p.turn is not None and p.session is None]


def session_plans(prepared: Prepared | None) -> list[PlannedTurn]:
    """The session turns of prepared.json (a sessions dataset), per capacity."""
    return [PlannedTurn(capacity, p.query_id, t.session, t.chain, t.index, t.think_ms,
                        t.after, p.tokens, t.roles, t.hash_ids, t.hash_scope, t.block_tokens)
            for capacity, prompts in (prepared.prompts if prepared else {}).items()
            for p in prompts if (t := p.session) is not None]


def trace_blocks(prepared: Prepared | None) -> dict[tuple[int, str], TraceBlocks]:
    """(capacity, query id) -> its blocks, for every trace row of prepared.json."""
    return {(capacity, p.query_id): TraceBlocks(tuple(p.blocks), p.block_tokens, p.tokens)
            for capacity, prompts in (prepared.prompts if prepared else {}).items()
            for p in prompts if p.blocks and p.block_tokens}


def cell_plans(run: RunDir) -> dict[GroupKey, CellPlan]:
    """Each cell the run planned: its rows and whether it finished (empty when the run
    recorded no plan: an older run, a peer's file)."""
    sent: dict[GroupKey, int] = {}
    for r in current_rows(run.records):
        sent[(r.mode, r.capacity, r.load)] = sent.get((r.mode, r.capacity, r.load), 0) + 1
    return {k: CellPlan(rows, finished)
            for k, (rows, finished) in run.state.cell_plans(sent).items()}


def recorded_of(run: RunDir) -> Recorded:
    """What each launched server's kind recorded in the manifest (KV budget, weights,
    counters' names), read once (:func:`kvlab.analysis.run_view.recorded_servers`)."""
    return recorded_servers(((e.mode, e.capacity), e.known) for e in run.state.servers)


def view_of(run: RunDir, definitions: Sequence[str] = ()) -> RunView:
    """``run`` as its evaluation reads it: its experiment's pairs, mode order, SLOs and
    slip threshold (defaults for a run without one, e.g. a peer's file), the client
    limits it began with (else this machine's, from ``kvlab calibrate``; those of its
    number of load workers for a run with ``--workers``), its server's ``/metrics``
    readings (gauges.jsonl), process memory, each launched server's KV budget, weights
    and kind (the manifest), prepared.json's plans, its run order and A/A mode.
    ``definitions``: other tools' definition sets evaluation.json keeps beside kvlab's
    (analysis.definitions)."""
    experiment = known_experiment(run)
    records = run.records
    recorded = recorded_of(run)
    servers = {(e.mode, e.capacity): known.kind or "" for e in run.state.servers
               if (known := e.known) is not None and known.launched is not False}
    workers, calibration = _client_limits(run)
    common = RunView(records, run_id=run.run_id, calibration=calibration,
                     definition_sets=tuple(definitions), order=run.state.order,
                     repeat_aa=run.state.repeat_aa, workers=workers, gauges=run.gauges,
                     budgets=recorded.budgets, weights=recorded.weights,
                     metric_names=recorded.metric_names, unreadable=recorded.unreadable,
                     memory=run.process_memory, trace=trace_blocks(run.prepared),
                     servers=servers,
                     plan=cell_plans(run))
    if experiment is None:
        return replace(common, mode_order=modes_in_order(records))
    return replace(
        common, compare_pairs=experiment.compare, experiment=experiment.name,
        mode_order=[m.name for m in experiment.modes],
        slo=Slo(**experiment.slo.model_dump()),
        slip_threshold_ms=experiment.load.slip_threshold_ms,
        client_error_limit=experiment.load.client_error_limit,
        turns=turn_plans(run.prepared), sessions=session_plans(run.prepared),
        search=search_of(experiment))


def evaluate_run_dir(run: RunDir, definitions: Sequence[str] = (), *,
                     resamples: int = 2000, strict: bool = False) -> Evaluation:
    """The complete evaluation of ``run`` (:func:`view_of`; ``definitions`` as there).
    ``strict``: a point whose server counters disagree with its records is refused, not
    only flagged (``--strict``)."""
    return evaluate(view_of(run, definitions),
                    options=EvaluateOptions(resamples=resamples, strict=strict))


def _client_limits(run: RunDir
                   ) -> tuple[int | None, Calibration | Mapping[str, object] | None]:
    """The run's load workers and the client limits it began with (else this machine's,
    from ``kvlab calibrate``, of as many load workers)."""
    workers = run.state.load_workers()
    if workers is None:
        return workers, run.state.calibration or load_calibration()
    return workers, run.state.worker_calibration or load_calibration(workers=workers)


def valid_rows_of(run: RunDir, *, strict: bool = False) -> ValidRows:
    """The validated rows of ``run``, as its evaluation judges them: row checks and the
    point verdicts of its server counters (``strict`` as in :func:`evaluate_run_dir`)."""
    counters = point_counters(run.records, run.gauges, recorded_of(run).metric_names)
    verdicts = point_verdicts(counters, strict=strict)
    workers, calibration = _client_limits(run)
    experiment = known_experiment(run)
    limit = DEFAULT_LIMIT if experiment is None else experiment.load.client_error_limit
    plan = cell_plans(run)
    errors = client_errors(judge(run.records, verdicts, plan), calibration, limit, workers)
    return judge(run.records, verdicts + client_error_verdicts(errors, strict=strict), plan)
