"""Run directories for the history tests: hand-made records, evaluated by kvlab.

Two modes ("slow", "fast") at capacity 256, at load points c=1 and c=2, with warm-ups,
a failed row, a row short of its tokens, and a row retried by a resume (the failed
first attempt superseded), so every verdict appears.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kvlab.run.runner import evaluate_run
from kvlab.rundir import Outcome, Record, RecordStore
from tests.report.synthetic_runs import EXPERIMENT_TOML, make_row

EXPERIMENT = EXPERIMENT_TOML.replace("capacities = [256, 1024]", "capacities = [256]")


def load_rows(run_id: str, slowdown: float = 1.0) -> list[Record]:
    """The rows of one run (``slowdown``: fast's decode is that many times longer)."""
    rows: list[Record] = []
    t = 0.0
    for load in ("c=1", "c=2"):
        for mode, decode in (("slow", 40.0), ("fast", 20.0 * slowdown)):
            rows.append(make_row(mode, 256, 0, prefill=30, decode=decode, warmup=True,
                                 start_ms=t, load=load))
            for q in range(8):
                over: dict[str, Any] = {}
                if (mode, load, q) == ("slow", "c=2", 7):
                    over = {"outcome": Outcome.HTTP_ERROR, "http_status": 500,
                            "error": "boom", "output_tokens": None}
                if (mode, load, q) == ("fast", "c=2", 5):
                    over = {"output_tokens": 7}
                if (mode, load, q) == ("fast", "c=1", 3):  # the attempt a resume retried
                    rows.append(make_row(mode, 256, q, prefill=20, decode=decode, load=load,
                                         start_ms=t, outcome=Outcome.TIMEOUT,
                                         output_tokens=None))
                rows.append(make_row(mode, 256, q, prefill=20.0 + q, decode=decode + q % 3,
                                     start_ms=t, load=load, **over))
                t += 60 if load == "c=2" and q % 2 else 120
    return [r.model_copy(update={"run_id": run_id, "position": i}) for i, r in enumerate(rows)]


def write_load_run(path: Path, run_id: str, *, commit: str = "abc123", slowdown: float = 1.0,
                   started: str = "2026-01-01T10:00:00+00:00",
                   evaluate: bool = True) -> Path:
    """A run directory with a manifest (commit, machine, session times) and, unless
    ``evaluate`` is False, evaluation.json and report.md as kvlab writes them."""
    path.mkdir(parents=True, exist_ok=True)
    (path / "experiment.toml").write_text(EXPERIMENT, encoding="utf-8")
    with RecordStore(path / "records.jsonl") as store:
        for row in load_rows(run_id, slowdown):
            store.append(row)
    manifest = {
        "run_id": run_id, "kvlab_version": "0.1.0", "git_commit": commit,
        "experiment_name": "synthetic", "experiment_file": EXPERIMENT,
        "host": {"cpu": "Test CPU 9000", "cpu_flags": ["avx2", "fma"], "cores": 2,
                 "hostname": "testhost", "recorded_at": started},
        "sessions": [{"started": started, "stopped": started.replace("T10", "T11"),
                      "load_average_started": [1.0, 0.5, 0.2],
                      "load_average_stopped": [1.5, 0.7, 0.3]}],
        "servers": [{"mode": "slow", "capacity": 256, "started": started,
                     "facts": {"kind": "embedded", "argv": ["kvlab", "serve"],
                               "version": "kvlab 0.1.0"}}],
    }
    (path / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    if evaluate:
        evaluate_run(path)
    return path
