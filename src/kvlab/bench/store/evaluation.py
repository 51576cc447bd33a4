"""The one evaluation of a run directory: its records judged with its experiment and state.

``kvlab run``, ``kvlab evaluate``, ``kvlab report`` and a report rendered on its own all
call :func:`evaluate_run_dir`, so a run has one evaluation whichever path built it.
"""

from __future__ import annotations

from collections.abc import Sequence

from kvlab.bench.analysis.evaluate import Evaluation, evaluate
from kvlab.bench.analysis.load import DEFAULT_SLIP_THRESHOLD_MS, Slo
from kvlab.bench.analysis.saturation import load_calibration
from kvlab.bench.analysis.summaries import modes_in_order
from kvlab.bench.store.rundir import RunDir


def evaluate_run_dir(run: RunDir, definitions: Sequence[str] = (), *,
                     resamples: int = 2000) -> Evaluation:
    """The complete evaluation of ``run``: its experiment's pairs, mode order, SLOs and
    slip threshold (defaults for a run without one, e.g. a peer's file), the client
    limits it began with (else this machine's, from ``kvlab calibrate``; those of its
    number of load workers for a run with ``--workers``), its server's ``/metrics``
    readings (gauges.jsonl), its run order and A/A mode. ``definitions``: other tools'
    definition sets evaluation.json keeps beside kvlab's (bench.analysis.definitions)."""
    experiment = run.known_experiment
    records = run.records
    workers = run.state.load_workers()
    if workers is None:
        calibration = run.state.calibration or load_calibration()
    else:  # the limit of as many load workers (kvlab calibrate --workers N)
        calibration = run.state.worker_calibration or load_calibration(workers=workers)
    if experiment is None:
        return evaluate(records, [], run_id=run.run_id, mode_order=modes_in_order(records),
                        resamples=resamples, slip_threshold_ms=DEFAULT_SLIP_THRESHOLD_MS,
                        calibration=calibration, definition_sets=definitions,
                        order=run.state.order, repeat_aa=run.state.repeat_aa,
                        workers=workers, gauges=run.gauges)
    return evaluate(
        records, experiment.compare, run_id=run.run_id, experiment=experiment.name,
        mode_order=[m.name for m in experiment.modes], resamples=resamples,
        slo=Slo(**experiment.slo.model_dump()),
        slip_threshold_ms=experiment.load.slip_threshold_ms, calibration=calibration,
        definition_sets=definitions, order=run.state.order, repeat_aa=run.state.repeat_aa,
        workers=workers, gauges=run.gauges,
    )
