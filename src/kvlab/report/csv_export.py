"""CSV export of a run: records.csv (one row per record, with derived metrics) and
summaries.csv (one row per (mode, capacity, load)).

Derived columns are the declared metrics
(:mod:`kvlab.analysis.summary_metrics`): in records.csv each row metric, in
summaries.csv every statistic of each distributed metric, each group figure and the
intervals; an empty cell means the metric is unknown there (no stream, no timings...).
Every record is exported, warm-ups and refused rows included, with ``valid`` and
``refused_reasons`` saying whether a summary counted it: the evaluation's verdicts
(:class:`~kvlab.analysis.valid_rows.ValidRows`), point verdicts of the server's
counters included.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kvlab.analysis.evaluate import Evaluation
from kvlab.analysis.metric import STATS, Metric
from kvlab.analysis.summaries import Summary, report_order
from kvlab.analysis.summary_metrics import INTERVAL_METRICS, ROW_METRICS, SUMMARY_METRICS
from kvlab.analysis.validate import Violation
from kvlab.rundir import Record, load_run
from kvlab.store.evaluation import evaluate_run_dir

RECORD_COLUMNS: tuple[str, ...] = (
    "run_id", "mode", "capacity", "load", "query_id", "repetition", "session", "turn",
    "position", "warmup", "superseded", "valid", "refused_reasons", "api", "stream",
    "outcome", "http_status",
    "prompt_sha256", "requested_tokens", "prompt_tokens", "output_tokens", "cached_tokens",
    "stop_type", "truncated", "t_scheduled_ns", "t_sent_ns", "t_end_ns",
    *(m.name for m in ROW_METRICS),
)


def _columns(metric: Metric) -> tuple[str, ...]:
    """summaries.csv's columns of one metric: every statistic, or the one figure."""
    if metric.distributed:
        return tuple(f"{metric.name}_{stat}" for stat in STATS)
    return (metric.csv_name or metric.name,)


SUMMARY_COLUMNS: tuple[str, ...] = (
    "mode", "capacity", "load", "rows", "valid", "refused", "refused_by_reason", "flags",
    *(c for m in SUMMARY_METRICS for c in _columns(m)),
    *(f"{m.name}_mean_ci_{end}" for m in INTERVAL_METRICS for end in ("low", "high")),
)


def _cell(value: Any) -> Any:
    """CSV cell: '' for None, lower-case booleans, floats at full precision."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return value


def record_row(row: Record, *, superseded: bool = False,
               problems: Sequence[Violation] = ()) -> dict[str, Any]:
    """One record as a dict over RECORD_COLUMNS; ``problems``: why the evaluation refused
    it (none: valid, unless a warm-up or superseded)."""
    data: dict[str, Any] = {
        "run_id": row.run_id, "mode": row.mode, "capacity": row.capacity, "load": row.load,
        "query_id": row.query_id, "repetition": row.repetition, "session": row.session,
        "turn": row.turn, "position": row.position,
        "warmup": row.warmup, "superseded": superseded,
        "valid": not row.warmup and not superseded and not problems,
        "refused_reasons": ";".join(str(v.reason) for v in problems),
        "api": str(row.api), "stream": row.stream, "outcome": str(row.outcome),
        "http_status": row.http_status, "prompt_sha256": row.prompt_sha256,
        "requested_tokens": row.requested_tokens, "prompt_tokens": row.prompt_tokens,
        "output_tokens": row.output_tokens, "cached_tokens": row.cached_tokens,
        "stop_type": row.stop_type, "truncated": row.truncated,
        "t_scheduled_ns": row.t_scheduled, "t_sent_ns": row.t_sent, "t_end_ns": row.t_end,
    }
    for metric in ROW_METRICS:
        data[metric.name] = metric.of(row)
    return {k: _cell(data[k]) for k in RECORD_COLUMNS}


def summary_row(s: Summary) -> dict[str, Any]:
    """One group summary as a dict over SUMMARY_COLUMNS."""
    data: dict[str, Any] = {
        "mode": s.mode, "capacity": s.capacity, "load": s.load, "rows": s.rows,
        "valid": s.queries, "refused": s.refused,
        "refused_by_reason": ";".join(f"{k}={n}" for k, n in s.count.refused.items()),
        "flags": " | ".join(s.count.flags),
    }
    for m in SUMMARY_METRICS:
        if not m.distributed:
            data[_columns(m)[0]] = s.figure(m.name)
            continue
        dist = s.metrics.get(m.name)
        for stat in STATS:
            data[f"{m.name}_{stat}"] = getattr(dist, stat) if dist else None
    for m in INTERVAL_METRICS:
        ci = s.mean_intervals.get(m.name)
        data[f"{m.name}_mean_ci_low"] = ci.low if ci else None
        data[f"{m.name}_mean_ci_high"] = ci.high if ci else None
    return {k: _cell(data[k]) for k in SUMMARY_COLUMNS}


def write_csvs(run_dir: Path | str, *, resamples: int = 2000,
               evaluation: Evaluation | None = None) -> list[Path]:
    """Write records.csv and summaries.csv into the run directory; return their paths.
    ``evaluation``: the run's, when the caller has it (else the run is evaluated, by
    :func:`~kvlab.store.evaluation.evaluate_run_dir`)."""
    run = load_run(run_dir)
    if evaluation is None:
        evaluation = evaluate_run_dir(run, resamples=resamples)
    current = {(r.key, r.position) for r in evaluation.valid.sent}
    refused: dict[tuple[Any, ...], list[Violation]] = {}
    for v in evaluation.valid.violations:
        refused.setdefault(v.row_key, []).append(v)
    records = []
    for r in run.records:
        superseded = not r.warmup and (r.key, r.position) not in current
        problems = [] if r.warmup or superseded else refused.get(
            (r.mode, r.capacity, r.query_id, r.repetition, r.load), [])
        records.append(record_row(r, superseded=superseded, problems=problems))
    summaries = [summary_row(s) for s in report_order(evaluation.summaries)]
    return run.write_csvs((RECORD_COLUMNS, records), (SUMMARY_COLUMNS, summaries))
