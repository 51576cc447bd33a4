"""A/A noise floors: how much identical runs of one experiment differ on one machine.

A comparison of one run per side cannot see what changes between runs (the machine's
load, caches, the order): ``kvlab floor`` measures it from K identical runs (K >= 3),
per (mode, capacity, load) cell and metric, as the sd of log(run mean) beyond what the
rows' own sampling explains (:func:`~kvlab.analysis.gate_stats.between_run_sd`), with
its one-sided 80 % upper confidence bound, which the gate draws (a floor from few runs
errs wide, never narrow).
A floor is keyed by the experiment's name and definition (the sha256 of its
experiment.toml as measured) and the machine (CPU model); it is kept in the history's
``noise_floors`` table and in the sidecar ``FILE.floors`` (JSON lines), which the
table is rebuilt from, so no rebuild or schema change loses a floor.

:func:`floors_for` is what the gate reads: the newest floor of each cell and metric,
else one computed now from the history's runs of the same definition and machine
(at least ``MIN_RUNS`` of them), else nothing ("no noise floor known").
"""

from __future__ import annotations

import json
from collections.abc import Collection, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kvlab.analysis.gate import NoiseFloor
from kvlab.analysis.gate_stats import FLOOR_CONFIDENCE, between_run_sd
from kvlab.analysis.summary_metrics import COMPARED_METRICS
from kvlab.errors import ConfigError
from kvlab.history.facts import experiment_hash
from kvlab.rundir import RunDir
from kvlab.store.evaluation import valid_rows_of

if TYPE_CHECKING:
    import duckdb

MIN_RUNS = 3  # identical runs a floor stands on, at least
FLOORS_SUFFIX = ".floors"
FloorKey = tuple[str, int, str | None, str]  # (mode, capacity, load, metric)


@dataclass(frozen=True)
class FloorRow:
    """One stored floor: a cell's metric for an experiment definition on a machine."""

    experiment: str
    experiment_hash: str
    cpu: str
    mode: str
    capacity: int
    load: str | None
    metric: str
    between: float  # the estimate
    between_upper: float  # its one-sided upper bound at FLOOR_CONFIDENCE: what the gate uses
    runs: int
    run_ids: list[str]
    measured_at: str  # ISO 8601, UTC

    def describe(self) -> str:
        return (f"{self.mode} @ {self.capacity} {self.load or 'sequential'} {self.metric}: "
                f"{self.between:.2%} between runs, {FLOOR_CONFIDENCE:.0%} upper bound "
                f"{self.between_upper:.2%} ({self.runs} runs)")

    def floor(self, source: str) -> NoiseFloor:
        """The floor the gate draws: the upper bound, saying so."""
        return NoiseFloor(self.between_upper, self.runs,
                          f"{source}; estimate {self.between:.2%}, "
                          f"{FLOOR_CONFIDENCE:.0%} upper bound used")


def floors_path(db: Path) -> Path:
    """The sidecar of floors beside ``db`` (``history.duckdb.floors``)."""
    return db.with_name(db.name + FLOORS_SUFFIX)


def machine_of(run: RunDir) -> str:
    """The machine a floor belongs to: the run's CPU model ("" when unknown)."""
    return run.state.machine.cpu or ""


def measure(runs: Sequence[RunDir], *, strict: bool = False) -> list[FloorRow]:
    """The floors of identical ``runs``: every cell all of them measured, every compared
    metric. ConfigError (one line) for fewer than MIN_RUNS runs, the same run twice, or
    runs of different experiment definitions or machines."""
    if len(runs) < MIN_RUNS:
        raise ConfigError(f"a noise floor needs at least {MIN_RUNS} identical runs "
                          f"(given {len(runs)})")
    ids = [r.run_id or str(r.path.resolve()) for r in runs]
    if len(set(ids)) < len(ids):
        raise ConfigError("a noise floor needs distinct runs: a run is given twice")
    hashes = {experiment_hash(r) for r in runs}
    if len(hashes) != 1 or None in hashes:
        raise ConfigError("a noise floor needs runs of one experiment definition (the "
                          "same experiment.toml); these differ")
    machines = {machine_of(r) for r in runs}
    if len(machines) != 1:
        raise ConfigError(f"a noise floor belongs to one machine; these runs ran on "
                          f"{', '.join(sorted(machines))}")
    sha, machine = str(hashes.pop()), machines.pop()
    groups = [valid_rows_of(r, strict=strict).groups() for r in runs]
    cells = [k for k in groups[0] if all(k in g for g in groups)]
    at = datetime.now(UTC).isoformat()
    out = []
    for mode, capacity, load in cells:
        for metric in COMPARED_METRICS:
            values = [[v for row in g[(mode, capacity, load)].rows
                       if (v := metric.of(row)) is not None] for g in groups]
            between = between_run_sd(values)
            upper = between_run_sd(values, upper=FLOOR_CONFIDENCE)
            if between is not None and upper is not None:
                out.append(FloorRow(runs[0].state.experiment_name or "", sha, machine, mode,
                                    capacity, load, metric.name, between, upper, len(runs),
                                    ids, at))
    return out


def _row(row: FloorRow) -> dict[str, Any]:
    return asdict(row) | {"measured_at": datetime.fromisoformat(row.measured_at)}


def insert(conn: duckdb.DuckDBPyConnection, rows: Sequence[FloorRow]) -> None:
    """Add ``rows`` to the noise_floors table."""
    import pyarrow as pa

    from kvlab.history.schema import FLOOR_COLUMNS

    if not rows:
        return
    table = pa.Table.from_pylist([_row(r) for r in rows])
    conn.execute("BEGIN TRANSACTION")  # also ends any result still open on conn
    try:
        conn.register("floor_rows", table)
        names = ", ".join(f'"{c}"' for c in FLOOR_COLUMNS)
        conn.execute(f"INSERT INTO noise_floors ({names}) SELECT {names} FROM floor_rows")
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    finally:
        conn.unregister("floor_rows")


def keep(db: Path, rows: Sequence[FloorRow]) -> None:
    """Append ``rows`` to the sidecar (the table is rebuilt from it)."""
    path = floors_path(db)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as out:
        out.write("".join(json.dumps(asdict(r)) + "\n" for r in rows))


def read_kept(db: Path) -> list[FloorRow]:
    """Every floor the sidecar holds (a line that does not read is skipped)."""
    path = floors_path(db)
    if not path.is_file():
        return []
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            out.append(FloorRow(**json.loads(line)))
        except (ValueError, TypeError):
            continue
    return out


def stored(conn: duckdb.DuckDBPyConnection, experiment_sha: str, cpu: str
           ) -> dict[FloorKey, NoiseFloor]:
    """The newest stored floor of each cell and metric of a definition on a machine."""
    rows = conn.execute("""
        SELECT mode, capacity, load, metric, between, between_upper, runs, measured_at
        FROM noise_floors WHERE experiment_hash = ? AND cpu = ?
        QUALIFY row_number() OVER (PARTITION BY mode, capacity, load, metric
                                   ORDER BY measured_at DESC) = 1""",
                        [experiment_sha, cpu]).fetchall()
    return {(m, c, lo, metric): NoiseFloor(float(u), int(n),
                                           f"kvlab floor {at:%Y-%m-%d %H:%M}; estimate "
                                           f"{float(b):.2%}, {FLOOR_CONFIDENCE:.0%} upper "
                                           "bound used")
            for m, c, lo, metric, b, u, n, at in rows}


def floors_for(conn: duckdb.DuckDBPyConnection, run: RunDir, avoid: Collection[str] = (),
               *, strict: bool = False) -> tuple[dict[FloorKey, NoiseFloor], str]:
    """The floors for comparing ``run`` (its definition and machine) and one line saying
    where they came from: stored floors; else the history's runs of the same definition
    on the same machine (at least MIN_RUNS, newest ten, ``avoid``'s run ids left out);
    else none ("no noise floor known")."""
    sha, cpu = experiment_hash(run), machine_of(run)
    if sha is None:
        return {}, "no noise floor known (the run has no experiment definition)"
    found = stored(conn, sha, cpu)
    if found:
        return found, "noise floor from kvlab floor"
    rows = conn.execute("""
        SELECT run_id, path FROM runs WHERE experiment_hash = ? AND coalesce(cpu, '') = ?
        ORDER BY started DESC NULLS LAST LIMIT 12""", [sha, cpu]).fetchall()
    paths = [Path(p) for rid, p in rows if rid not in avoid and Path(p).is_dir()][:10]
    if len(paths) < MIN_RUNS:
        return {}, (f"no noise floor known ({len(paths)} runs of this definition on this "
                    f"machine in the history; `kvlab floor` measures one)")
    computed = measure([RunDir(p) for p in paths], strict=strict)
    return ({(r.mode, r.capacity, r.load, r.metric):
             r.floor(f"{r.runs} history runs of this definition")
             for r in computed}, f"noise floor from {len(paths)} history runs")
