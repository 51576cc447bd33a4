"""``kvlab history add|rebuild|runs|trend|sql|pareto|overlay`` and ``kvlab export``:
the run history (kvlab.history), and the hook ``kvlab run`` calls when a run ends."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

import typer
from rich.table import Table

from kvlab.cli._app import HISTORY, app, console, err_console, print_json

history_app = typer.Typer(
    help="The run history: every run kvlab wrote, in one DuckDB file you can query "
         "(KVLAB_HISTORY or --db picks the file; KVLAB_HISTORY=off stops kvlab run adding).",
    no_args_is_help=True,
)
app.add_typer(history_app, name="history", rich_help_panel=HISTORY)

DB = typer.Option(None, "--db", metavar="FILE",
                  help="The history database (default: KVLAB_HISTORY, else "
                       "$XDG_DATA_HOME/kvlab/history.duckdb or ~/.local/share/kvlab/...).")
JSON = typer.Option(False, "--json", help="Print the result as one JSON document.")


def _db(given: Path | None) -> Path:
    from kvlab.history.location import db_path

    return db_path(given)


def _say(text: str) -> None:
    console.print(text, highlight=False, markup=False, soft_wrap=True)


def _cell(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:.4g}" if abs(value) < 1e4 else f"{value:,.0f}"
    if isinstance(value, datetime):
        return value.strftime("%Y-%m-%d %H:%M")
    if isinstance(value, list):
        return ",".join(str(v) for v in value)
    return str(value)


def _table(title: str, header: list[str], rows: list[list[Any]]) -> None:
    """A table; a cell too long for a terminal folds onto a second line, never cut
    (off a terminal lines are as long as they need, see kvlab.cli._app)."""
    table = Table(title=title, title_justify="left")
    for name in header:
        table.add_column(name, overflow="fold")
    for row in rows:
        table.add_row(*[_cell(v) for v in row])
    console.print(table)


def remember_run(run_dir: Path, enabled: bool = True) -> None:
    """``kvlab run``'s last step: add the run to the history. Never fails the run: a
    history error is one line on stderr (the run's files are complete either way)."""
    if not enabled:
        return
    try:
        from kvlab.history.ingest import remember

        result = remember(run_dir)
    except Exception as exc:  # the run succeeded; the history is only an index of it
        first = (str(exc).splitlines() or [type(exc).__name__])[0]
        err_console.print(f"history: {run_dir} not added ({first}); add it later with "
                          f"`kvlab history add {run_dir}`", markup=False, highlight=False,
                          soft_wrap=True)
        return
    if result is not None:
        for line in result.refused:
            err_console.print(f"history: {line}", markup=False, highlight=False,
                              soft_wrap=True)


def _added(result: Any, db: Path, json_out: bool) -> None:
    if json_out:
        print_json(result.to_dict() | {"db": str(db)})
        return
    for line in [*result.refused, *result.warnings]:
        _say(f"  {line}")
    _say(f"{result.line()} ({db})")


@history_app.command("add")
def add(
    paths: list[Path] = typer.Argument(..., help="Run directories, folders of runs, or "
                                       "peer result files (GuideLLM, vLLM, AIPerf)."),
    db: Path | None = DB,
    json_out: bool = JSON,
) -> None:
    """Add runs to the history (idempotent: an unchanged run is skipped, a resumed one
    replaced). Example: kvlab history add runs/ results/"""
    from kvlab.history.ingest import add_to_history

    where = _db(db)
    result = add_to_history(paths, where)
    _added(result, where, json_out)
    if result.refused and not result.added and not result.unchanged:
        raise typer.Exit(2)


@history_app.command("rebuild")
def rebuild(db: Path | None = DB, json_out: bool = JSON) -> None:
    """Make the database again from the run directories it had read (listed in it and
    in its sidecar, FILE.runs); a directory gone since is named and left out."""
    from kvlab.history.ingest import rebuild_history

    where = _db(db)
    _added(rebuild_history(where), where, json_out)


@history_app.command("runs")
def runs(
    experiment: str | None = typer.Option(None, "--experiment", "-e"),
    mode: str | None = typer.Option(None, "--mode", "-m", help="Runs that measured MODE."),
    server: str | None = typer.Option(None, "--server",
                                      help="Runs with a server of this kind (vllm, ...)."),
    commit: str | None = typer.Option(None, "--commit", help="A prefix of the git commit."),
    machine: str | None = typer.Option(None, "--machine",
                                       help="Part of the CPU model or host name."),
    limit: int | None = typer.Option(None, "--limit", "-n", min=1),
    db: Path | None = DB,
    json_out: bool = JSON,
) -> None:
    """The runs recorded, newest first."""
    from kvlab.history.queries import RunFilter, list_runs, read_only

    conn = read_only(_db(db))
    try:
        found = list_runs(conn, RunFilter(experiment, mode, server, commit, machine), limit)
    finally:
        conn.close()
    if json_out:
        print_json({"runs": found})
        return
    _table(f"{len(found)} runs", ["run", "experiment", "started", "commit", "modes",
                                  "servers", "valid", "cpu", "path"],
           [[r["run_id"], r["experiment"], r["started"], (r["git_commit"] or "")[:12] or None,
             r["modes"], r["servers"], f"{r['valid']} of {r['planned'] or r['measured']}",
             r["cpu"],
             r["path"]] for r in found])


def _write_figure(png: bytes | None, out: Path, title: str, caption: str) -> None:
    from kvlab.errors import ConfigError
    from kvlab.report.figure_page import figure_page

    if png is None:
        raise ConfigError(f"nothing to draw for {out}: no run selected has such points")
    if out.suffix == ".png":
        out.write_bytes(png)
    elif out.suffix in (".html", ".htm"):
        out.write_text(figure_page(png, title, caption), encoding="utf-8")
    else:
        raise ConfigError(f"{out}: give a .png or .html file")
    _say(f"wrote {out}")


@history_app.command("trend")
def trend(
    metric: str = typer.Argument(..., help="e2e_ms, ttft_ms, itl_effective_ms (the mean, "
                                 "with its 95 % interval), their _p50/_p95/_p99/_max, "
                                 "tokens_per_second, output_tokens_per_s, goodput, ..."),
    experiment: str = typer.Option(..., "--experiment", "-e"),
    mode: str = typer.Option(..., "--mode", "-m"),
    capacity: int | None = typer.Option(None, "--capacity"),
    load: str | None = typer.Option(None, "--load", help="One load point, e.g. c=8."),
    plot: Path | None = typer.Option(None, "--plot", metavar="FILE.png|FILE.html",
                                     help="Also draw it (one line per capacity and load)."),
    db: Path | None = DB,
    json_out: bool = JSON,
) -> None:
    """A metric of one mode across the runs of an experiment, oldest first, with its
    interval. Example: kvlab history trend itl_effective_ms_p95 -e serving-engines -m vllm"""
    from dataclasses import asdict

    from kvlab.history.queries import read_only
    from kvlab.history.queries import trend as trend_of
    from kvlab.report.across_runs import Series, overlay

    conn = read_only(_db(db))
    try:
        points = trend_of(conn, metric, experiment, mode, capacity, load)
    finally:
        conn.close()
    if plot is not None:
        lines: dict[str, list[Any]] = {}
        for p in points:
            if p.started is not None:
                lines.setdefault(f"{mode} @ {p.capacity} {p.load or 'sequential'}",
                                 []).append(p)
        series = [Series(k, [p.started for p in v], [p.value for p in v],
                         [p.low for p in v], [p.high for p in v]) for k, v in lines.items()]
        _write_figure(overlay(series, metric, "run start",
                              f"{experiment}: {metric} of {mode} over time"), plot,
                      f"{experiment}: {metric} of {mode}",
                      "one point per run; bars: the 95 % bootstrap interval of the mean")
    if json_out:
        print_json({"metric": metric, "points": [asdict(p) for p in points]})
        return
    _table(f"{experiment} · {mode} · {metric} ({len(points)} points)",
           ["started", "run", "commit", "capacity", "load", metric, "95 % interval",
            "valid"],
           [[p.started, p.run_id, (p.commit or "")[:12] or None, p.capacity,
             p.load or "sequential", p.value,
             f"{p.low:.4g}–{p.high:.4g}" if p.low is not None and p.high is not None
             else None, f"{p.valid} of {p.measured}"] for p in points])


@history_app.command("sql")
def sql(
    query: str = typer.Argument(..., help="Any query; the database is opened read-only."),
    db: Path | None = DB,
    json_out: bool = JSON,
) -> None:
    """Run a query on the history, read-only. Tables: runs, modes, servers, records,
    summaries, load_points. Example: kvlab history sql "SELECT verdict, count(*) FROM
    records GROUP BY ALL" """
    from kvlab.history.queries import run_sql

    names, rows = run_sql(_db(db), query)
    if json_out:
        print_json({"columns": names, "rows": [list(r) for r in rows]})
        return
    _table(f"{len(rows)} rows", names, [list(r) for r in rows])


@history_app.command("pareto")
def pareto(
    out: Path = typer.Option(..., "--out", "-o", metavar="FILE.png|FILE.html"),
    experiment: str | None = typer.Option(None, "--experiment", "-e"),
    latest: bool = typer.Option(False, "--latest", help="Only the newest run selected."),
    mode: str | None = typer.Option(None, "--mode", "-m"),
    query: str | None = typer.Option(None, "--query", metavar="SQL",
                                     help="The runs: a query whose first column is run_id."),
    latency: str = typer.Option("itl", "--latency", help="itl (p95 effective ITL) or ttft."),
    db: Path | None = DB,
) -> None:
    """Output tokens/s against p95 latency at each load point, one line per run and
    mode, across the runs selected."""
    from kvlab.errors import ConfigError
    from kvlab.history.queries import RunFilter, pareto_points, read_only, selected_runs
    from kvlab.report.across_runs import Latency
    from kvlab.report.across_runs import pareto as draw

    if latency not in ("itl", "ttft"):
        raise ConfigError(f"--latency {latency!r}: give itl or ttft")
    conn = read_only(_db(db))
    try:
        ids = selected_runs(conn, RunFilter(experiment=experiment), query)
        ids = ids[-1:] if latest else ids
        points = pareto_points(conn, ids, mode)
    finally:
        conn.close()
    which: Latency = "itl" if latency == "itl" else "ttft"
    _write_figure(draw(points, which), out, f"Pareto: {experiment or 'selected runs'}",
                  f"runs: {', '.join(ids)}")


@history_app.command("overlay")
def overlay_cmd(
    metric: str = typer.Argument(..., help="A summary or load point metric (see trend)."),
    out: Path = typer.Option(..., "--out", "-o", metavar="FILE.png|FILE.html"),
    experiment: str | None = typer.Option(None, "--experiment", "-e"),
    mode: str | None = typer.Option(None, "--mode", "-m"),
    query: str | None = typer.Option(None, "--query", metavar="SQL",
                                     help="The runs: a query whose first column is run_id."),
    db: Path | None = DB,
) -> None:
    """A metric against the load, one line per run and mode, across the runs selected."""
    from kvlab.history.queries import (
        RunFilter,
        overlay_points,
        read_only,
        selected_runs,
    )
    from kvlab.report.across_runs import load_series, overlay

    conn = read_only(_db(db))
    try:
        ids = selected_runs(conn, RunFilter(experiment=experiment), query)
        points = overlay_points(conn, metric, ids, mode)
    finally:
        conn.close()
    _write_figure(overlay(load_series(points), metric, "load (concurrency or rate)"), out,
                  f"{metric} across runs", f"runs: {', '.join(ids)}")


@app.command("export", rich_help_panel=HISTORY)
def export(
    source: str | None = typer.Argument(
        None, help="A run directory, a peer's result file, or history:EXPERIMENT@latest "
                   "| history:EXPERIMENT@COMMIT."),
    parquet: Path = typer.Option(..., "--parquet", metavar="DIR",
                                 help="Write records, summaries, load_points and runs "
                                      "as DIR/<table>.parquet."),
    query: str | None = typer.Option(None, "--query", metavar="SQL",
                                     help="Instead of SOURCE: the history's runs this "
                                          "query selects (first column: run_id)."),
    db: Path | None = DB,
    json_out: bool = JSON,
) -> None:
    """Write a run's (or a history query's) rows as Parquet files, readable by pandas,
    polars, DuckDB and pyarrow. Example: kvlab export runs/x-20250101-120000 --parquet out/"""
    from kvlab.errors import ConfigError
    from kvlab.history.export import export_history, export_run

    if (source is None) == (query is None):
        raise ConfigError("give a run (directory, peer file or history:E@latest) or "
                          "--query SQL, not both")
    if query is not None:
        written = export_history(_db(db), query, parquet)
    else:
        written = export_run(resolve_run(source or "", db), parquet)
    if json_out:
        print_json({"written": [str(p) for p in written]})
        return
    for path in written:
        _say(str(path))


def resolve_run(text: str, db: Path | None = None) -> Path:
    """A path as given, or the run directory a ``history:E@latest`` /
    ``history:E@COMMIT`` names in the history."""
    from kvlab.history.queries import is_spec, read_only, resolve

    if not is_spec(text):
        return Path(text)
    conn = read_only(_db(db))
    try:
        return resolve(conn, text)
    finally:
        conn.close()
