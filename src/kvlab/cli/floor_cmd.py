"""``kvlab floor``: measure the A/A noise floor of an experiment on this machine and keep
it in the run history, where ``kvlab compare --fail-on`` finds it (kvlab.history.floors)."""

from __future__ import annotations

from pathlib import Path

import typer

from kvlab.cli._app import BENCHMARK, app, console, print_json


@app.command("floor", rich_help_panel=BENCHMARK)
def floor(
    runs: list[str] = typer.Argument(
        None, help="Identical runs (at least 3): run directories, several separated by "
                   "commas, or history:EXPERIMENT@last:K."),
    experiment: Path | None = typer.Option(
        None, "--experiment", "-e", metavar="FILE",
        help="Instead of RUNS: run this experiment file --times times now, back to back "
             "(each run is added to the history), and measure the floor from them."),
    times: int = typer.Option(5, "--times", "-k", min=3, help="Runs of --experiment."),
    out: Path = typer.Option(Path("runs"), "--out", help="Where --experiment's runs go."),
    strict: bool = typer.Option(False, "--strict", help="As kvlab report --strict."),
    db: Path | None = typer.Option(None, "--db", metavar="FILE",
                                   help="The history the floor is kept in (default: "
                                        "KVLAB_HISTORY, else the user's data directory)."),
    json_out: bool = typer.Option(False, "--json", help="Print the floors as JSON."),
) -> None:
    """Measure how much identical runs differ (per mode, capacity, load and metric: the
    sd of log(run mean) between runs, beyond the rows' own sampling) and keep it in the
    history for this experiment definition and machine. kvlab compare --fail-on uses it
    when a side has one run. Examples: kvlab floor history:quickstart@last:5;
    kvlab floor --experiment experiments/quickstart.toml --times 5"""
    from dataclasses import asdict

    from kvlab.errors import ConfigError
    from kvlab.history.floors import measure
    from kvlab.history.ingest import add_floors
    from kvlab.history.location import db_path
    from kvlab.history.queries import is_spec, read_only, resolve_runs
    from kvlab.store.rundir import RunDir

    where = db_path(db)
    if (experiment is None) == (not runs):
        raise ConfigError("give the runs (or history:E@last:K), or --experiment FILE, not "
                          "both")
    paths: list[Path] = []
    if experiment is not None:
        from kvlab.cli.history_cmds import remember_run
        from kvlab.run.runner import RunOutput, RunRequest, run_experiment

        for _ in range(times):
            done = run_experiment(RunRequest(experiment), RunOutput(out, html=False))
            paths.append(done.run_dir.path)
            remember_run(done.run_dir.path)
    for text in runs or []:
        if is_spec(text):
            conn = read_only(where)
            try:
                paths += resolve_runs(conn, text)
            finally:
                conn.close()
        else:
            paths += [Path(p) for p in text.split(",") if p.strip()]
    rows = measure([RunDir(p) for p in paths], strict=strict)
    add_floors(where, rows)
    if json_out:
        print_json({"db": str(where), "floors": [asdict(r) for r in rows]})
        return
    for row in rows:
        console.print(f"  {row.describe()}", highlight=False, markup=False)
    console.print(f"noise floor of {len(rows)} cell metrics from {len(paths)} runs kept in "
                  f"{where}", highlight=False, markup=False, soft_wrap=True)
