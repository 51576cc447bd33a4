"""Report commands: ``kvlab report RUN_DIR``, ``kvlab compare RUN_A RUN_B`` and
``kvlab summary RESULTS``."""

from __future__ import annotations

from pathlib import Path

import typer

from kvlab.cli._app import app, console, print_json


@app.command()
def report(
    run_dir: Path = typer.Argument(..., help="A run directory (holds records.jsonl)."),
    html: bool = typer.Option(False, "--html", help="Also write report.html (self-contained)."),
    csv: bool = typer.Option(False, "--csv", help="Also write records.csv and summaries.csv."),
    json_out: bool = typer.Option(False, "--json", help="Print the written paths as JSON."),
    strict: bool = typer.Option(
        False, "--strict", help="Refuse a point whose server counters (/metrics) disagree "
        "with its records, instead of flagging it."),
) -> None:
    """Rebuild report.md (and evaluation.json) from the records; optionally HTML and CSV."""
    from kvlab.run.runner import evaluate_run
    from kvlab.store.rundir import load_run

    load_run(run_dir)  # one-line error for a folder that is not a run
    evaluation = evaluate_run(run_dir, strict=strict)
    written = [run_dir / "evaluation.json", run_dir / "report.md"]
    if html:
        from kvlab.report.html import write_html

        written.append(write_html(run_dir, evaluation=evaluation))
    if csv:
        from kvlab.report.csv_export import write_csvs

        written.extend(write_csvs(run_dir, evaluation=evaluation))
    if json_out:
        print_json({"run_dir": str(run_dir), "written": [str(p) for p in written]})
        return
    for path in written:
        console.print(str(path), highlight=False, markup=False, soft_wrap=True)


@app.command()
def compare(
    run_a: str = typer.Argument(..., help="First run directory, a peer's result file, or "
                                "history:EXPERIMENT@latest | history:EXPERIMENT@COMMIT (A)."),
    run_b: str = typer.Argument(..., help="Second run (B), given the same ways."),
    json_out: bool = typer.Option(False, "--json", help="Print the comparison as JSON."),
    requested_tokens: int | None = typer.Option(
        None, "--requested-tokens", min=1,
        help="Output tokens the peer requested, for files that do not say (vLLM)."),
    fail_on: list[str] = typer.Option(
        [], "--fail-on", metavar="slower[:METRIC[:THRESHOLD%]] | failures[:THRESHOLD%]",
        help="Exit 1 when B is slower than A beyond doubt: its mean METRIC (default "
             "e2e_ms; ttft_ms, itl_effective_ms, prefill_ms, decode_ms) above A's by more "
             "than THRESHOLD % (default 0) over the whole 95 % interval, in some mode, "
             "capacity and load. A difference the interval cannot separate from the "
             "threshold passes (an A/A run exits 0). failures[:THRESHOLD%]: exit 1 when "
             "B's share of valid rows falls below A's by more than THRESHOLD points; on "
             "(at 0) with any rule unless given. Exit 2 when a cell cannot be judged (no "
             "valid rows, no interval). Repeat for several rules."),
    accept_unjudged: bool = typer.Option(
        False, "--accept-unjudged",
        help="With --fail-on: cells the gate cannot judge do not exit 2 (each is still "
             "listed with its reason)."),
    strict: bool = typer.Option(
        False, "--strict", help="Refuse a point whose server counters (/metrics) disagree "
        "with its records, instead of flagging it."),
    db: Path | None = typer.Option(None, "--db", metavar="FILE",
                                   help="The run history history:... names a run of "
                                        "(default: KVLAB_HISTORY, else the user's data "
                                        "directory)."),
    peer_as: str | None = typer.Option(
        None, "--peer-as", metavar="MODE@CAPACITY",
        help="Read a peer's file as this mode and capacity of the other run (a file has "
             "the tool's name and capacity 0), so kvlab's run and the peer's meet."),
    definitions: str | None = typer.Option(
        None, "--definitions", metavar="SET",
        help="Compare TTFT, ITL, TPOT and e2e as this tool defines them, on both sides: "
             "kvlab, vllm, guidellm or aiperf (default: kvlab's own metrics)."),
) -> None:
    """Compare two runs: ratio A/B per metric with a 95 % interval and a verdict on B.

    A run may also be a GuideLLM benchmarks.json, a vLLM bench serve JSON saved with
    --save-detailed or an AIPerf profile_export.jsonl: its requests are read as kvlab
    records (imported; what the file lacks stays empty), refused if any request's
    output tokens differ from the requested count.

    Beside a peer, read both sides the peer's way: kvlab compare runs/mine
    benchmarks.json --peer-as kvlab@1024 --definitions guidellm (the file's rows become
    mode kvlab at capacity 1024; TTFT, ITL, TPOT and e2e as GuideLLM defines them).

    A run may also be named by the run history (kvlab history): history:E@latest is
    experiment E's newest run, history:E@COMMIT its newest at that commit, e.g.
    kvlab compare history:quickstart@latest runs/candidate --fail-on slower.

    In CI: kvlab compare runs/baseline runs/candidate --fail-on slower:e2e_ms:5%
    exits 0 (every cell checked and passed), 1 (B slower beyond 5 %, or fewer valid
    rows than A: named) or 2 (a cell or the runs cannot be judged)."""
    from rich import box
    from rich.table import Table

    from kvlab.analysis.comparisons import COMPARED_METRICS
    from kvlab.analysis.definition_metrics import compared_under
    from kvlab.analysis.gate import FailOn, gate
    from kvlab.cli.history_cmds import resolve_run
    from kvlab.report.compare_runs import compare_runs
    from kvlab.report.verdicts import comparison_rows, load_label
    from kvlab.store.rundir import load_run_or_import

    rules = [FailOn.parse(text) for text in fail_on]  # a bad rule: one line, exit 2
    cell = _cell(peer_as) if peer_as is not None else None
    metrics = COMPARED_METRICS if definitions is None else compared_under(definitions)
    result = compare_runs(load_run_or_import(resolve_run(run_a, db), requested_tokens, cell),
                          load_run_or_import(resolve_run(run_b, db), requested_tokens, cell),
                          strict=strict, metrics=metrics)
    verdict = gate(result.comparisons, rules, accept_unjudged=accept_unjudged) \
        if rules else None
    if json_out:
        print_json(result.to_dict() | ({"gate": verdict.to_dict()} if verdict else {}))
        if verdict is not None and verdict.exit_code:
            raise typer.Exit(verdict.exit_code)
        return
    console.print(f"A = {result.run_a} ({result.path_a})\nB = {result.run_b} ({result.path_b})",
                  highlight=False, markup=False)
    for mode, c in result.comparisons:
        title = (f"{mode} @ {c.capacity}, {load_label(c.load)}: B against A (A "
                 f"{c.count_a.describe()}; B {c.count_b.describe()})")
        if c.refused:
            console.print(f"{title}: refused: {c.refused}", highlight=False, markup=False)
            continue
        table = Table(title=title, title_justify="left", box=box.SIMPLE, pad_edge=False)
        for name in ("metric", "A ms", "B ms", "A/B", "95 % CI", "verdict", "n"):
            left = name in ("metric", "verdict")
            table.add_column(name, justify="left" if left else "right",
                             no_wrap=name not in ("verdict", "95 % CI"))
        for r in comparison_rows(c):
            table.add_row(r["metric"].removesuffix("_ms"), r["mean_a"], r["mean_b"], r["ratio"],
                          r["interval"], r["verdict"], r["n"].replace(" paired", "p"))
        console.print(table)
    console.print("A/B > 1: B took less time; n: rows (p = paired on queries); the verdict "
                  "is read from the interval alone; --json adds reductions (1 − B/A)."
                  + (f" Times as {definitions} defines them, on both sides."
                     if definitions else ""), highlight=False, markup=False)
    if verdict is None:
        return
    for rule in verdict.rules:
        console.print(f"gate: fail when {rule.describe()}", highlight=False, markup=False)
    for line in verdict.checks:
        console.print(f"  {line.describe()}", highlight=False, markup=False)
    console.print(verdict.summary(), highlight=False, markup=False)
    if verdict.exit_code:
        raise typer.Exit(verdict.exit_code)


@app.command()
def summary(
    results: Path = typer.Argument(Path("results"), help="The folder make run wrote."),
    html: bool = typer.Option(True, "--html/--no-html", help="Also write RESULTS/index.html."),
    json_out: bool = typer.Option(False, "--json", help="Print the page as JSON."),
) -> None:
    """One page of results: each step's headline figure, read from its files, and the
    machine (CPU, cores, load average during the steps); writes a self-contained
    index.html linking every report.

    Example: kvlab summary results/   (the last step of make run)
    """
    from kvlab.report.results_page import page_text, results_page

    page = results_page(results)
    written = None
    if html:
        from kvlab.report.results_html import write_index

        written = write_index(page)
    if json_out:
        print_json(page.to_dict() | {"index_html": str(written) if written else None})
        return
    console.print(page_text(page), highlight=False, markup=False)
    if written is not None:
        console.print(f"Wrote {written} (self-contained; links every report)",
                      highlight=False, markup=False, soft_wrap=True)


def _cell(text: str) -> tuple[str, int]:
    """``MODE@CAPACITY`` of --peer-as."""
    from kvlab.errors import ConfigError

    mode, sep, capacity = text.rpartition("@")
    if not sep or not mode or not capacity.isdigit():
        raise ConfigError(f"--peer-as {text!r}: give MODE@CAPACITY, e.g. kvlab@1024")
    return mode, int(capacity)
