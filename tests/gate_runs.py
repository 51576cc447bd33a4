"""Run directories for the gate's tests (analysis, cli, history): hand-made records of
two modes ("slow", "fast") at capacity 256 and load point c=4, with a manifest that
records the plan (rows per cell) and the points done, as ``kvlab run`` writes them.

Each run's times are scaled by its own factor (the between-run noise) and each row
jitters (the within-run noise), from a seed, so runs differ as real ones do.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

from kvlab.rundir import Record, RecordStore
from tests.report.synthetic_runs import EXPERIMENT_TOML, make_row

EXPERIMENT = EXPERIMENT_TOML.replace("capacities = [256, 1024]", "capacities = [256]")
ROWS = 40  # rows per (mode, load point)
LOAD = "c=4"


def gate_rows(run_id: str, *, seed: int, slowdown: float = 1.0, rows: int = ROWS,
              modes: tuple[str, ...] = ("slow", "fast"), sent: int | None = None,
              between: float = 0.02, within: float = 0.05) -> list[Record]:
    """The rows of one run: each mode's ``rows`` queries at c=4 (only the first ``sent``
    of the last mode: a run killed mid-point). ``slowdown``: fast's decode is that
    many times longer. ``between``/``within``: sd of the run's and a row's factor."""
    rng = random.Random(seed)
    run_factor = 1.0 + rng.gauss(0.0, between)
    out: list[Record] = []
    t = 0.0
    for m, mode in enumerate(modes):
        n = sent if sent is not None and m == len(modes) - 1 else rows
        for q in range(n):
            f = run_factor * (1.0 + rng.gauss(0.0, within))
            decode = (40.0 if mode == "slow" else 20.0 * slowdown) + 2.0 * (q % 5)
            out.append(make_row(mode, 256, q, prefill=(20.0 + q % 7) * f, decode=decode * f,
                                start_ms=t, load=LOAD))
            t += 30.0
    return [r.model_copy(update={"run_id": run_id, "position": i}) for i, r in enumerate(out)]


def write_gate_run(path: Path, run_id: str, *, seed: int, slowdown: float = 1.0,
                   rows: int = ROWS, modes: tuple[str, ...] = ("slow", "fast"),
                   sent: int | None = None, experiment: str = EXPERIMENT,
                   cpu: str = "Test CPU 9000", started: str = "2026-01-01T10:00:00+00:00",
                   **noise: float) -> Path:
    """A run directory as kvlab run leaves it: records, experiment.toml, and a manifest
    with the plan (every mode's c=4 point of ``rows``) and the points done (the last
    mode's is not when ``sent`` is given)."""
    path.mkdir(parents=True, exist_ok=True)
    (path / "experiment.toml").write_text(experiment, encoding="utf-8")
    with RecordStore(path / "records.jsonl") as store:
        for row in gate_rows(run_id, seed=seed, slowdown=slowdown, rows=rows, modes=modes,
                             sent=sent, **noise):
            store.append(row)
    done = [[m, 256, LOAD] for m in modes]
    if sent is not None:
        done = done[:-1]
    manifest: dict[str, Any] = {
        "run_id": run_id, "kvlab_version": "0.1.0", "git_commit": "abc123",
        "experiment_name": "synthetic", "experiment_file": experiment,
        "host": {"cpu": cpu, "cores": 2, "hostname": "testhost", "recorded_at": started},
        "sessions": [{"started": started, "stopped": started.replace("T10", "T11")}],
        "rows_planned": [[m, 256, LOAD, rows] for m in modes],
        "points_done": done,
    }
    (path / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    return path
