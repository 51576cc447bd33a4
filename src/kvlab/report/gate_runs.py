"""The gate's input from run directories: each side's runs, A's plan cell by cell.

``kvlab compare A B --fail-on ...`` names one or more runs per side. This module reads
them (validated as their evaluations validate them, with the rows each cell planned),
refuses a side compared with itself (the same run id or path on both sides: one line,
exit 2), checks the runs did the same work (:func:`~kvlab.report.compare_runs.
check_comparable`) and lays out every (mode, capacity, load) cell any run of A measured,
with B's runs of that cell and the noise floor of each metric where one is known, for
:func:`kvlab.analysis.gate.gate`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence

from kvlab.analysis.gate import CellKey, CellRuns, NoiseFloor
from kvlab.analysis.valid_rows import ValidRows
from kvlab.errors import ConfigError
from kvlab.report.compare_runs import check_comparable
from kvlab.rundir import RunDir
from kvlab.store.evaluation import valid_rows_of

FloorKey = tuple[str, int, str | None, str]  # (mode, capacity, load, metric)


def _records_digest(run: RunDir) -> str:
    """sha256 of a run's records.jsonl ("" without one)."""
    data = run.records_bytes()
    return hashlib.sha256(data).hexdigest() if data is not None else ""


def refuse_self(a: Sequence[RunDir], b: Sequence[RunDir]) -> None:
    """ConfigError (one line, exit 2) when a run is on both sides: the same path, or the
    same run id (its manifest's: a peer's file has none) with the same records (a copy
    of the run; two runs started in the same second share an id, not their records)."""
    for run_a in a:
        for run_b in b:
            same_path = run_a.path.resolve() == run_b.path.resolve()
            same_id = (bool(run_a.state.run_id) and run_a.state.run_id == run_b.state.run_id
                       and _records_digest(run_a) == _records_digest(run_b))
            if same_path or same_id:
                what = f"path {run_a.path.resolve()}" if same_path else f"run id {run_a.run_id}"
                raise ConfigError(f"A and B are the same run ({what}): a run compared with "
                                  "itself proves nothing; give B the candidate and A the "
                                  "baseline (history:E@previous names the run before)")


def plan_cells(a: Sequence[RunDir], b: Sequence[RunDir], *, strict: bool = False,
               floors: Mapping[FloorKey, NoiseFloor] | None = None) -> list[CellRuns]:
    """Every cell of A's plan (each cell any run of A measured, in A's order) with the
    valid rows of each side's runs that measured it and its metrics' noise floors.
    Raises ConfigError for a run on both sides, ValidationFailure for runs that did
    different work."""
    if not a or not b:
        raise ConfigError("each side of a comparison needs at least one run")
    refuse_self(a, b)
    valid_a = [valid_rows_of(r, strict=strict) for r in a]
    valid_b = [valid_rows_of(r, strict=strict) for r in b]
    check_comparable(list(valid_a[0].sent), list(valid_b[0].sent))
    groups_a = [v.groups() for v in valid_a]
    groups_b = [v.groups() for v in valid_b]
    keys: dict[CellKey, None] = {}
    for groups in groups_a:
        keys.update(dict.fromkeys(groups))
    out = []
    for key in keys:
        side_a = tuple(g[key] for g in groups_a if key in g)
        side_b: tuple[ValidRows, ...] = tuple(g[key] for g in groups_b if key in g)
        mode, capacity, load = key
        cell_floors = {metric: f for (m, c, lo, metric), f in (floors or {}).items()
                       if (m, c, lo) == key}
        out.append(CellRuns(mode, capacity, load, side_a, side_b, cell_floors,
                            b_lacking=len(b) - len(side_b)))
    return out
