"""Report commands: ``kvlab report RUN_DIR``, ``kvlab compare RUN_A RUN_B`` and
``kvlab summary RESULTS``."""

from __future__ import annotations

from pathlib import Path

import typer

from kvlab.cli._app import BENCHMARK, app, console, print_json


@app.command(rich_help_panel=BENCHMARK)
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
    from kvlab.store.files import EVALUATION_FILE, REPORT_FILE
    from kvlab.store.rundir import load_run

    load_run(run_dir)  # one-line error for a folder that is not a run
    evaluation = evaluate_run(run_dir, strict=strict)
    written = [run_dir / EVALUATION_FILE, run_dir / REPORT_FILE]
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


@app.command(rich_help_panel=BENCHMARK)
def compare(
    run_a: str = typer.Argument(..., help="The baseline (A): a run directory, several "
                                "separated by commas (dir1,dir2,dir3), a peer's result file, "
                                "or history:EXPERIMENT@latest | @previous | @last:K | "
                                "@COMMIT (add :any for runs of any definition)."),
    run_b: str = typer.Argument(..., help="The candidate (B), given the same ways."),
    json_out: bool = typer.Option(False, "--json", help="Print the comparison as JSON."),
    requested_tokens: int | None = typer.Option(
        None, "--requested-tokens", min=1,
        help="Output tokens the peer requested, for files that do not say (vLLM)."),
    fail_on: list[str] = typer.Option(
        [], "--fail-on", metavar="slower[:METRIC[:MARGIN%]] | failures[:THRESHOLD%]",
        help="Gate B against A. slower: B/A of the mean METRIC (default e2e_ms; ttft_ms, "
             "itl_effective_ms, prefill_ms, decode_ms) by a hierarchical bootstrap (runs, "
             "then rows); regress (exit 1) when the whole interval is above 1 + MARGIN "
             "(default 4 %), pass when it is all below, else inconclusive (exit 3). "
             "failures[:THRESHOLD%]: exit 1 when B's share of valid rows (of the rows "
             "planned) falls below A's by more than THRESHOLD points; on (at 0) with any "
             "rule unless given. Every cell of A's plan must be measured and finished in "
             "B (exit 1, named). Repeat for several rules."),
    alpha: float = typer.Option(
        0.05, "--alpha", min=0.0001, max=0.5,
        help="Family-wise error rate over every slower check (Holm): of a false regress, "
             "and of a false pass."),
    allow_missing: bool = typer.Option(
        False, "--allow-missing",
        help="With --fail-on: a cell of A's plan that B lacks or did not finish does not "
             "fail the gate (it is still listed, with k of n planned)."),
    inconclusive_ok: bool = typer.Option(
        False, "--inconclusive-ok", help="With --fail-on: an inconclusive verdict exits 0, "
                                         "not 3."),
    accept_unjudged: bool = typer.Option(
        False, "--accept-unjudged",
        help="With --fail-on: cells the gate cannot judge do not exit 2 (each is still "
             "listed with its reason)."),
    strict: bool = typer.Option(
        False, "--strict", help="Refuse a point whose server counters (/metrics) disagree "
        "with its records, instead of flagging it."),
    db: Path | None = typer.Option(None, "--db", metavar="FILE",
                                   help="The run history history:... names a run of, and "
                                        "noise floors come from (default: KVLAB_HISTORY, "
                                        "else the user's data directory)."),
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
    experiment E's newest run of the same definition (experiment.toml) as the other
    side, never the other side's run; @previous the one before the newest; @last:K the
    K newest (a side of K runs); @COMMIT the newest at that commit.

    In CI, after kvlab run experiments/quickstart.toml (which adds the candidate to the
    history): kvlab compare history:quickstart@previous history:quickstart@latest
    --fail-on slower (A the run before, B the candidate) exits 0 (pass: B not slower
    than 4 %), 1 (regress, fewer valid rows, or a cell of A's plan missing or unfinished
    in B: named), 2 (not judged: bad input, a run compared with itself) or 3
    (inconclusive; --inconclusive-ok makes it 0). With one run per side, the between-run
    noise comes from kvlab floor's A/A noise floor; with several (history:E@last:5, or
    dir1,dir2,dir3) from the runs themselves. See docs/concepts/gate.md."""
    from kvlab.cli.gate_view import compare_and_gate

    compare_and_gate(run_a, run_b, json_out=json_out, requested_tokens=requested_tokens,
                     fail_on=fail_on, alpha=alpha, allow_missing=allow_missing,
                     inconclusive_ok=inconclusive_ok, accept_unjudged=accept_unjudged,
                     strict=strict, db=db, cell=_cell(peer_as) if peer_as else None,
                     definitions=definitions)


@app.command(rich_help_panel=BENCHMARK)
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
