"""The questions users ask of the run history, each one query.

- :func:`list_runs`: runs, newest first, filtered by experiment, mode, server kind,
  commit or machine.
- :func:`trend`: one metric of one mode over time, with its 95 % interval where the
  summaries carry one (the bootstrap interval of the mean).
- :func:`run_sql`: any query, on a read-only connection that reads no other file.
- :func:`resolve_runs`: ``history:E@latest``, ``@previous``, ``@last:K`` or
  ``@<commit>`` as the run directories recorded (what ``kvlab compare`` then reads),
  never a run of the other side, and (but for ``:any``) only runs of one experiment
  definition (the stored experiment hash).
- :func:`pareto_points` and :func:`overlay_points`: load points across selected runs.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kvlab.errors import ConfigError
from kvlab.history.schema import DISTRIBUTIONS, SUMMARY_FIGURES, connect
from kvlab.report.across_runs import ParetoPoint

if TYPE_CHECKING:
    import duckdb

PREFIX = "history:"
_SPEC = re.compile(r"history:(?P<experiment>[^@]+)@(?P<which>latest|previous|last:(?P<k>[0-9]+)"
                   r"|[0-9a-fA-F]{1,40})(?P<any>:any)?")
SPEC_HELP = ("history:EXPERIMENT@latest | @previous | @last:K | @COMMIT (add :any to match "
             "runs of any definition of EXPERIMENT)")

# Metrics of `trend` and `overlay`: name -> (table, value column, low, high)
TrendColumns = tuple[str, str, str | None, str | None]


def metric_columns() -> dict[str, TrendColumns]:
    """Every metric a trend can follow: the mean of each distribution (with its
    interval) and its percentiles, each summary figure, and each load point figure."""
    out: dict[str, TrendColumns] = {}
    for m in DISTRIBUTIONS:
        out[m] = ("summaries", f"{m}_mean", f"{m}_low", f"{m}_high")
        for stat in ("p50", "p95", "p99", "max"):
            out[f"{m}_{stat}"] = ("summaries", f"{m}_{stat}", None, None)
    for figure in SUMMARY_FIGURES:
        out[figure] = ("summaries", figure, None, None)
    for figure in ("output_tokens_per_s", "request_throughput", "goodput", "achieved_rate",
                   "send_lag_p95_ms"):
        out[figure] = ("load_points", figure, None, None)
    return out


def columns_of(metric: str) -> TrendColumns:
    """The columns of ``metric``; ConfigError (one line, the names) for an unknown one."""
    known = metric_columns()
    if metric not in known:
        raise ConfigError(f"unknown metric {metric!r}; one of: {', '.join(known)}")
    return known[metric]


@dataclass(frozen=True)
class RunFilter:
    """Which runs: each field None matches every run. ``commit`` is a prefix of the
    git commit; ``machine`` a part of the CPU model or host name (any case)."""

    experiment: str | None = None
    mode: str | None = None
    server: str | None = None
    commit: str | None = None
    machine: str | None = None
    experiment_hash: str | None = None  # one definition (sha256 of experiment.toml)

    def where(self) -> tuple[str, list[Any]]:
        """The SQL condition on ``runs r`` and its parameters."""
        parts, args = ["TRUE"], []
        if self.experiment is not None:
            parts.append("r.experiment = ?")
            args.append(self.experiment)
        if self.mode is not None:
            parts.append("EXISTS (SELECT 1 FROM modes m WHERE m.run_id = r.run_id "
                         "AND m.mode = ?)")
            args.append(self.mode)
        if self.server is not None:
            parts.append("(EXISTS (SELECT 1 FROM modes m WHERE m.run_id = r.run_id AND "
                         "m.server = ?) OR EXISTS (SELECT 1 FROM servers s WHERE "
                         "s.run_id = r.run_id AND s.kind = ?))")
            args += [self.server, self.server]
        if self.commit is not None:
            parts.append("starts_with(r.git_commit, ?)")
            args.append(self.commit)
        if self.experiment_hash is not None:
            parts.append("r.experiment_hash = ?")
            args.append(self.experiment_hash)
        if self.machine is not None:
            parts.append("(r.cpu ILIKE ? OR r.hostname ILIKE ?)")
            args += [f"%{self.machine}%", f"%{self.machine}%"]
        return " AND ".join(parts), args


def list_runs(conn: duckdb.DuckDBPyConnection, selected: RunFilter = RunFilter(),
              limit: int | None = None) -> list[dict[str, Any]]:
    """The runs ``selected``, newest first: id, experiment, start, commit, version,
    machine, modes and server kinds, rows valid of measured, path."""
    where, args = selected.where()
    sql = f"""
        SELECT r.run_id, r.experiment, r.started, r.git_commit, r.kvlab_version, r.cpu,
               r.cores, r.hostname,
               (SELECT list(m.mode ORDER BY m.mode) FROM modes m WHERE m.run_id = r.run_id)
                 AS modes,
               (SELECT list(DISTINCT m.server ORDER BY m.server) FROM modes m
                 WHERE m.run_id = r.run_id AND m.server IS NOT NULL) AS servers,
               r.valid, r.measured, r.planned, r.path, r.experiment_hash
        FROM runs r WHERE {where}
        ORDER BY r.started DESC NULLS LAST, r.run_id
        {"LIMIT " + str(int(limit)) if limit else ""}"""
    cursor = conn.execute(sql, args)
    names = [d[0] for d in cursor.description]
    return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


@dataclass(frozen=True)
class TrendPoint:
    """One run's value of the metric in one (capacity, load) cell of the mode."""

    run_id: str
    started: datetime | None
    commit: str | None
    capacity: int
    load: str | None
    value: float | None
    low: float | None
    high: float | None
    valid: int | None
    measured: int | None  # the rows planned where the run recorded its plan


def trend(conn: duckdb.DuckDBPyConnection, metric: str, experiment: str, mode: str,
          capacity: int | None = None, load: str | None = None) -> list[TrendPoint]:
    """``metric`` of ``mode`` in every run of ``experiment``, oldest first (a run
    without a start time last); ``capacity``/``load`` keep one cell (else every cell)."""
    table, value, low, high = columns_of(metric)
    sql = f"""
        SELECT t.run_id, r.started, r.git_commit, t.capacity, t.load, t."{value}",
               {f't."{low}"' if low else "NULL"}, {f't."{high}"' if high else "NULL"},
               t.valid, {"coalesce(t.planned, t.measured)" if table == "summaries"
                         else "t.measured"}
        FROM "{table}" t JOIN runs r USING (run_id)
        WHERE r.experiment = ? AND t.mode = ?
          AND (? IS NULL OR t.capacity = ?) AND (? IS NULL OR t.load = ?)
        ORDER BY r.started NULLS LAST, t.run_id, t.capacity, t.load NULLS FIRST"""
    rows = conn.execute(sql, [experiment, mode, capacity, capacity, load, load]).fetchall()
    return [TrendPoint(*row) for row in rows]


def read_only(db: Path) -> duckdb.DuckDBPyConnection:
    """``db`` opened read-only, reading no other file and attaching nothing (settings
    locked): a query can only read the history."""
    conn = connect(db, read_only=True)
    conn.execute("SET enable_external_access = false")
    conn.execute("SET lock_configuration = true")
    return conn


def run_sql(db: Path, query: str) -> tuple[list[str], list[tuple[Any, ...]]]:
    """Column names and rows of ``query`` on the read-only history; ConfigError (one
    line) for a write or an error of the query."""
    import duckdb

    conn = read_only(db)
    try:
        cursor = conn.execute(query)
        if cursor.description is None:
            return [], []
        return [d[0] for d in cursor.description], cursor.fetchall()
    except duckdb.Error as exc:
        first = " ".join(str(exc).split())
        if "read-only" in first or "read_only" in first or "external access" in first:
            raise ConfigError(f"kvlab history sql only reads: {first}") from None
        raise ConfigError(f"history sql: {first}") from None
    finally:
        conn.close()


def is_spec(text: str) -> bool:
    """True for ``history:...`` (a run named by the history, not a path)."""
    return text.startswith(PREFIX)


def resolve_runs(conn: duckdb.DuckDBPyConnection, spec: str, *,
                 avoid: Collection[str] = (), definition: str | None = None) -> list[Path]:
    """The run directories (or peer files) ``spec`` names, never one whose run id or path
    is in ``avoid`` (the other side of a comparison):

    - ``history:E@latest``: E's newest run;
    - ``history:E@previous``: E's second newest run (the one before the newest);
    - ``history:E@last:K``: E's K newest runs;
    - ``history:E@COMMIT``: E's newest run at a commit starting with COMMIT.

    Only runs of one definition count: ``definition`` (the other side's experiment
    hash), else that of E's newest run; ``:any`` after the spec matches every
    definition of E. ConfigError (one line) when too few runs are recorded, a path is
    gone, or ``@previous`` is the other side."""
    match = _SPEC.fullmatch(spec)
    if match is None:
        raise ConfigError(f"{spec!r}: expected {SPEC_HELP}")
    experiment, which = match["experiment"], match["which"]
    commit = None if which in ("latest", "previous") or match["k"] else which
    sha = None
    if match["any"] is None and commit is None:
        newest = list_runs(conn, RunFilter(experiment=experiment), limit=1)
        sha = definition or (newest[0]["experiment_hash"] if newest else None)
    found = list_runs(conn, RunFilter(experiment=experiment, commit=commit,
                                      experiment_hash=sha))
    mine = [r for r in found if r["run_id"] not in avoid and r["path"] not in avoid]
    want = int(match["k"]) if match["k"] else 1
    if which == "previous":
        if len(found) >= 2 and found[1] not in mine:
            raise ConfigError(f"{spec}: the run before the newest, {found[1]['run_id']}, "
                              "is the other side of this comparison; give "
                              f"history:{experiment}@latest")
        chosen = found[1:2]
    else:
        chosen = mine[:want]
    if len(chosen) < want or want < 1:
        at = "" if commit is None else f" at a commit starting {commit}"
        same = "" if sha is None else " of the same experiment definition (add :any for any)"
        other = " besides the other side's" if len(mine) < len(found) else ""
        have = len(found) if which == "previous" else len(mine)
        need = 2 if which == "previous" else max(1, want)
        raise ConfigError(f"{spec}: the history has {have} run{'s' if have != 1 else ''} of "
                          f"{experiment!r}{at}{same}{other}; {need} needed (kvlab history "
                          "runs lists them)")
    paths = [Path(r["path"]) for r in chosen]
    for r, path in zip(chosen, paths, strict=True):
        if not path.exists():
            raise ConfigError(f"{spec}: run {r['run_id']} was at {path}, which is gone; "
                              "`kvlab history rebuild` forgets runs whose directory is gone")
    return paths


def resolve(conn: duckdb.DuckDBPyConnection, spec: str) -> Path:
    """The one run directory ``spec`` names (see :func:`resolve_runs`)."""
    found = resolve_runs(conn, spec)
    if len(found) != 1:
        raise ConfigError(f"{spec}: names {len(found)} runs where one is needed")
    return found[0]


def selected_runs(conn: duckdb.DuckDBPyConnection, selected: RunFilter,
                  query: str | None = None) -> list[str]:
    """Run ids, oldest first: of ``selected``, or of ``query`` (SQL whose first column
    is a run id, e.g. ``SELECT run_id FROM runs WHERE ...``)."""
    if query is not None:
        return [str(row[0]) for row in conn.execute(query).fetchall()]
    where, args = selected.where()
    return [rid for (rid,) in conn.execute(
        f"SELECT run_id FROM runs r WHERE {where} ORDER BY r.started NULLS LAST, r.run_id",
        args).fetchall()]


def pareto_points(conn: duckdb.DuckDBPyConnection, run_ids: list[str],
                  mode: str | None = None) -> list[ParetoPoint]:
    """The load points of ``run_ids`` (one line per run and mode when several runs are
    selected, per mode for one run)."""
    rows = conn.execute("""
        SELECT lp.run_id, lp.mode, lp.capacity, lp.load, lp.output_tokens_per_s,
               s.itl_effective_ms_p95, s.ttft_ms_p95
        FROM load_points lp JOIN summaries s USING (run_id, mode, capacity, load)
        WHERE lp.load IS NOT NULL AND list_contains(?, lp.run_id)
          AND (? IS NULL OR lp.mode = ?)
        ORDER BY lp.run_id, lp.mode, lp.capacity""", [run_ids, mode, mode]).fetchall()
    several = len({r[0] for r in rows}) > 1
    capacities = len({r[2] for r in rows}) > 1
    return [ParetoPoint((f"{rid} · {m}" if several else m)
                        + (f" @ {cap}" if capacities else ""), load, tps, itl, ttft)
            for rid, m, cap, load, tps, itl, ttft in rows]


def overlay_points(conn: duckdb.DuckDBPyConnection, metric: str, run_ids: list[str],
                   mode: str | None = None) -> list[tuple[str, str, float | None]]:
    """(line, load, value) of ``metric`` at every load point of ``run_ids``, one line per
    run and mode."""
    table, value, _, _ = columns_of(metric)
    rows = conn.execute(f"""
        SELECT t.run_id, t.mode, t.capacity, t.load, t."{value}" FROM "{table}" t
        WHERE t.load IS NOT NULL AND list_contains(?, t.run_id) AND (? IS NULL OR t.mode = ?)
        ORDER BY t.run_id, t.mode""", [run_ids, mode, mode]).fetchall()
    capacities = len({r[2] for r in rows}) > 1
    return [(f"{rid} · {m}" + (f" @ {cap}" if capacities else ""), load, v)
            for rid, m, cap, load, v in rows]
