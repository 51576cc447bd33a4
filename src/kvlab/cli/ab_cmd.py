"""``kvlab ab``: a baseline against a candidate on one machine, stopped once decided."""

from __future__ import annotations

from pathlib import Path

import typer

from kvlab.cli._app import BENCHMARK, app, console, err_console, print_json
from kvlab.records import Outcome, Record


class _Notes:
    """Progress as plain lines on stderr: the servers' start and each look, not each
    row (``quiet``: nothing)."""

    def __init__(self, quiet: bool) -> None:
        self.quiet = quiet

    def begin(self, mode: str, capacity: int, total: int) -> None:
        pass

    def advance(self, record: Record) -> None:
        if record.outcome != Outcome.OK and not self.quiet:
            err_console.print(f"  {record.mode} {record.query_id}: {record.outcome}",
                              highlight=False, markup=False)

    def end(self, mode: str, capacity: int) -> None:
        pass

    def note(self, message: str) -> None:
        if not self.quiet:
            err_console.print(message, highlight=False, markup=False, soft_wrap=True)


def _fraction(text: str, flag: str) -> float:
    """``5%`` or ``0.05`` as 0.05."""
    from kvlab.errors import ConfigError

    raw = text.strip()
    try:
        return float(raw[:-1]) / 100.0 if raw.endswith("%") else float(raw)
    except ValueError:
        raise ConfigError(f"{flag} {text!r}: give a fraction (0.05) or a percentage "
                          "(5%)") from None


@app.command(rich_help_panel=BENCHMARK)
def ab(
    baseline: Path = typer.Argument(..., help="The baseline's experiment file (A)."),
    candidate: Path | None = typer.Argument(
        None, help="The candidate's experiment file (B); none: B is another mode of the "
        "baseline's file (--b)."),
    mode_a: str | None = typer.Option(None, "--a", metavar="MODE",
                                      help="A's mode (needed where its file has several)."),
    mode_b: str | None = typer.Option(None, "--b", metavar="MODE",
                                      help="B's mode (the same as --a for an A/A check)."),
    metric: str = typer.Option("e2e_ms", "--metric",
                               help="The time compared, per row: e2e_ms, itl_effective_ms, "
                               "ttft_ms, ..."),
    margin: str | None = typer.Option(None, "--margin", metavar="PERCENT",
                                      help="B/A above 1 + margin is a regression, e.g. 5% "
                                      "(default: kvlab compare's default margin)."),
    alpha: float = typer.Option(0.05, "--alpha",
                                help="Largest chance of 'regress' when B is within the "
                                "margin."),
    beta: float = typer.Option(0.05, "--beta",
                               help="Largest chance of 'pass' when B is beyond the margin."),
    block: int = typer.Option(4, "--block", metavar="N",
                              help="Rows per side in one ABBA block (even)."),
    max_rows: int = typer.Option(320, "--max-rows", metavar="N",
                                 help="Budget: rows of both sides together."),
    max_time: float | None = typer.Option(None, "--max-time", metavar="SECONDS",
                                          help="Budget of time for the blocks."),
    capacity: int | None = typer.Option(None, "--capacity", metavar="N",
                                        help="The capacity measured (default: the "
                                        "smallest)."),
    settings: list[str] | None = typer.Option(
        None, "--set", metavar="KEY=VALUE",
        help="As kvlab run --set, on each file (a modes.<name> key on the file with it)."),
    out: Path = typer.Option(Path("runs"), "--out", help="Parent directory of run dirs."),
    no_report: bool = typer.Option(False, "--no-report",
                                   help="Skip evaluation.json and report.md."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress output."),
    json_out: bool = typer.Option(False, "--json", help="Print the result as JSON."),
) -> None:
    """Run a baseline (A) and a candidate (B) side by side in ABBA blocks until a
    sequential test decides: exit 0 pass (B not slower than the margin), 1 regress,
    2 not judged, 3 inconclusive (the budget ran out first).

    Examples: kvlab ab experiments/engine-serving.toml --a kvlab-float32 --b kvlab-int8;
    kvlab ab base.toml candidate.toml --metric itl_effective_ms --margin 5%
    """
    from kvlab.analysis.gate import DEFAULT_MARGIN
    from kvlab.run.ab import AbRequest, run_ab
    from kvlab.run.overrides import parse_setting

    request = AbRequest(
        baseline, candidate, mode_a, mode_b, capacity,
        tuple(parse_setting(s) for s in settings or ()), metric,
        DEFAULT_MARGIN if margin is None else _fraction(margin, "--margin"), alpha, beta,
        block, max_rows,
        max_time_s=max_time, report=not no_report)
    result = run_ab(request, out, _Notes(quiet))
    if json_out:
        print_json(result.to_json())
    else:
        for line in result.lines():
            console.print(line, highlight=False, markup=False, soft_wrap=True)
        console.print(f"run dir: {result.run_dir}", highlight=False, markup=False)
    raise typer.Exit(result.exit_code)
