"""What one run contributes to the history, as plain rows (no database here).

A run directory gives its manifest's facts (experiment, commit, version, machine, load
averages, times), its experiment's modes, the servers it started, and its evaluation:
evaluation.json when it is current (written after the last record and gauge, in this
kvlab's layout), else the run evaluated now (:func:`~kvlab.store.evaluation.
evaluate_run_dir`, the one evaluation of a run directory). The evaluation's refused rows
(judged by :func:`~kvlab.analysis.valid_rows.judge`) give each record its verdict.
A peer's result file (GuideLLM, vLLM, AIPerf) is read as a run too; its records are
written to a scratch JSONL so one bulk reader takes every run's records.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from kvlab.analysis.evaluation_file import EvaluationFileError, StoredEvaluation
from kvlab.analysis.load import LoadSummary
from kvlab.analysis.summaries import Summary
from kvlab.history.schema import DISTRIBUTIONS, STATS, SUMMARY_FIGURES
from kvlab.store.evaluation import evaluate_run_dir
from kvlab.store.files import (
    EVALUATION_FILE,
    EXPERIMENT_FILE,
    GAUGES_FILE,
    MANIFEST_FILE,
    RECORDS_FILE,
)
from kvlab.store.rundir import RunDir
from kvlab.store.state import ServerFacts

# The files whose size and modification time make a run directory's fingerprint.
WATCHED = (RECORDS_FILE, MANIFEST_FILE, EVALUATION_FILE, GAUGES_FILE, EXPERIMENT_FILE)
STORED = EVALUATION_FILE  # the evaluation column when the run's own file was read
EVALUATED = "evaluated on add"  # ... when it was missing or older than the records

ViolationKey = tuple[str, int, str, int, str | None]  # (mode, capacity, query, rep, load)


def fingerprint(path: Path) -> str:
    """A digest of the size and modification time (ns) of a run's files (of the file
    itself for a peer's file): it changes when a resume appends or a report is redone."""
    files = [path] if path.is_file() else [path / name for name in WATCHED]
    parts = []
    for f in files:
        try:
            st = f.stat()
            parts.append(f"{f.name}:{st.st_size}:{st.st_mtime_ns}")
        except OSError:
            parts.append(f"{f.name}:-")
    return hashlib.sha256("|".join(parts).encode()).hexdigest()[:32]


def imported_run_id(path: Path) -> str:
    """The history's id of a peer's file: its name and a digest of its full path (peer
    files are often all called benchmarks.json)."""
    digest = hashlib.sha256(str(path).encode()).hexdigest()[:8]
    return f"{path.stem}@{digest}"


@dataclass
class RunFacts:
    """Everything one run adds, in the tables' column names."""

    run_id: str
    path: str  # absolute: the run directory, or the peer's file
    records_file: Path  # the JSONL the records table reads
    run: dict[str, Any]
    modes: list[dict[str, Any]] = field(default_factory=list)
    servers: list[dict[str, Any]] = field(default_factory=list)
    summaries: list[dict[str, Any]] = field(default_factory=list)
    load_points: list[dict[str, Any]] = field(default_factory=list)
    # each refused row's reasons, in the order judge() gave them
    refusals: dict[ViolationKey, list[str]] = field(default_factory=dict)


def _when(text: str | None) -> datetime | None:
    """An ISO 8601 time from the manifest, in UTC; None when absent or unreadable."""
    if not text:
        return None
    try:
        return datetime.fromisoformat(text).astimezone(UTC)
    except ValueError:
        return None


def stored_evaluation(run: RunDir) -> StoredEvaluation | None:
    """evaluation.json when it is current: written no earlier than records.jsonl and
    gauges.jsonl, in this kvlab's layout. None otherwise (or when it does not read)."""
    path = run.evaluation_path
    try:
        written = path.stat().st_mtime_ns
        inputs = [p.stat().st_mtime_ns for p in (run.records_path, run.gauges_path)
                  if p.exists()]
        if any(t > written for t in inputs):
            return None
        stored = StoredEvaluation.read(path)
    except (OSError, EvaluationFileError):
        return None
    return stored if stored.current else None


def _summary_row(run_id: str, s: Summary) -> dict[str, Any]:
    count = s.count
    row: dict[str, Any] = {"run_id": run_id, "mode": s.mode, "capacity": s.capacity,
                           "load": s.load, "valid": count.valid, "measured": count.measured,
                           "planned": count.planned, "finished": count.finished,
                           "refused": json.dumps(count.refused)}
    for metric in DISTRIBUTIONS:
        dist = s.metrics.get(metric, None)  # None: no row had it (n 0, as the file says)
        for stat in STATS:
            row[f"{metric}_{stat}"] = ((dist.count if dist else 0) if stat == "n"
                                       else getattr(dist, stat) if dist else None)
        interval = s.mean_intervals.get(metric, None)
        row[f"{metric}_low"] = interval.low if interval else None
        row[f"{metric}_high"] = interval.high if interval else None
    keyed = s.to_json()  # the figures under evaluation.json's own keys
    for figure in SUMMARY_FIGURES:
        row[figure] = keyed.get(figure, None)
    return row


def _load_row(run_id: str, p: LoadSummary) -> dict[str, Any]:
    keep = ("mode", "capacity", "load", "kind", "requests", "ok", "target_rate",
            "scheduled_rate", "achieved_rate", "late", "slipped", "max_in_flight", "span_s",
            "request_throughput", "output_tokens_per_s", "goodput", "slo_met")
    lag = p.send_lag_ms
    return {"run_id": run_id, **{k: getattr(p, k) for k in keep},
            "valid": p.count.valid, "measured": p.count.measured,
            **{f"send_lag_{q}_ms": lag.get(q, None) for q in ("p50", "p95", "p99")}}


def _refusals(evaluation: StoredEvaluation) -> dict[ViolationKey, list[str]]:
    """Each refused row's reasons (pair refusals left out: they are no row's verdict)."""
    out: dict[ViolationKey, list[str]] = {}
    for v in evaluation.violations:
        if v.other_mode is None:
            out.setdefault(v.row_key, []).append(str(v.reason))
    return out


def _modes(run: RunDir) -> list[dict[str, Any]]:
    experiment = run.known_experiment
    if experiment is None:  # an imported file: its modes are the tools named in its rows
        names = dict.fromkeys(r.mode for r in run.records)
        return [{"mode": n, "server": None, "api": None, "stream": None, "capacities": None,
                 "settings": None} for n in names]
    return [{"mode": m.name, "server": m.server, "api": str(m.api), "stream": m.stream,
             "capacities": experiment.capacities(m),
             "settings": json.dumps(m.settings.model_dump(mode="json"))}
            for m in experiment.modes]


def _servers(run: RunDir) -> list[dict[str, Any]]:
    rows = []
    for entry in run.state.servers:
        facts, known = entry.facts or {}, entry.known or ServerFacts()
        version = known.version if "version" in facts else None
        rows.append({"mode": entry.mode, "capacity": entry.capacity, "kind": known.kind,
                     "argv": known.argv, "version": None if version is None else str(version),
                     "started": _when(entry.started), "stopped": _when(entry.stopped),
                     "facts": json.dumps(facts, default=str) if entry.facts else None})
    return rows


def experiment_hash(run: RunDir) -> str | None:
    """sha256 of the experiment as measured (the run's experiment.toml; else the
    manifest's verbatim copy); None for an imported file."""
    if run.experiment_path.is_file():
        data = run.experiment_path.read_bytes()
    elif run.state.experiment_file is not None:
        data = run.state.experiment_file.encode()
    else:
        return None
    return hashlib.sha256(data).hexdigest()


def _run_row(run: RunDir, run_id: str, path: str, evaluation: StoredEvaluation,
             how: str) -> dict[str, Any]:
    state, host = run.state, run.state.machine
    invocations = state.invocations
    records, valid = evaluation.counts["records"], evaluation.valid
    return {
        "run_id": run_id, "path": path, "fingerprint": fingerprint(Path(path)),
        "imported_from": state.imported_from,
        "experiment": state.experiment_name or evaluation.experiment or None,
        "experiment_hash": experiment_hash(run), "git_commit": state.git_commit,
        "kvlab_version": state.kvlab_version, "cpu": host.cpu, "cpu_flags": host.cpu_flags,
        "cores": host.cores, "hostname": host.hostname, "platform": host.platform,
        "started": _when(invocations[0].started if invocations else host.recorded_at),
        "stopped": _when(invocations[-1].stopped if invocations else None),
        "load_average_started": invocations[0].load_average_started if invocations else None,
        "load_average_stopped": invocations[-1].load_average_stopped if invocations else None,
        "records": records, "measured": valid.measured,
        "valid": valid.valid, "planned": valid.planned, "evaluation": how,
        "added_at": datetime.now(UTC),
    }


def run_facts(run: RunDir, scratch: Path) -> RunFacts:
    """The rows of one run (a run directory, or a peer's file read as one by
    :func:`~kvlab.store.rundir.load_run_or_import`). ``scratch``: a folder for the
    JSONL of an imported file's records."""
    path = run.path.resolve()
    if path.is_file():
        run_id = imported_run_id(path)
        records_file = scratch / f"{hashlib.sha256(str(path).encode()).hexdigest()[:16]}.jsonl"
        records_file.write_text("".join(r.model_dump_json() + "\n" for r in run.records),
                                encoding="utf-8")
    else:
        run_id, records_file = run.run_id, run.records_path
    evaluation = stored_evaluation(run) if path.is_dir() else None
    how = STORED
    if evaluation is None:  # the live evaluation, as its evaluation.json would read
        evaluation = StoredEvaluation.from_dict(evaluate_run_dir(run).to_json())
        how = EVALUATED
    modes = [{"run_id": run_id, **m} for m in _modes(run)]
    servers = [{"run_id": run_id, **s} for s in _servers(run)]
    return RunFacts(
        run_id, str(path), records_file, _run_row(run, run_id, str(path), evaluation, how),
        modes, servers, [_summary_row(run_id, s) for s in evaluation.summaries],
        [_load_row(run_id, p) for p in evaluation.load], _refusals(evaluation))
