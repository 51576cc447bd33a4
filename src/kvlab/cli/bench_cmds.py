"""Benchmark commands: run, prepare, measure, evaluate, explain."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

from kvlab.analysis.checks import REASONING, SERVER_HISTOGRAMS
from kvlab.cli._app import BENCHMARK, app, console, err_console, print_json

if TYPE_CHECKING:
    from kvlab.analysis.evaluate import Evaluation
    from kvlab.run.reporter import Reporter


def _reporter(quiet: bool) -> Reporter:
    from kvlab.cli.progress import make_reporter

    return make_reporter(quiet, err_console)


def _print_load(evaluation: Evaluation) -> None:
    """Per load point: achieved rate, send lag, throughput, goodput, slip flag."""
    from rich.table import Table

    from kvlab.report.markdown import fmt, valid_text

    points = [p for p in evaluation.load if p.load is not None]  # not sequential rows
    if not points:
        return
    table = Table(title="load: rates in req/s (drawn: the arrivals' own rate); "
                  "lag = sent - scheduled (ms); req/s, tok/s, goodput: valid rows only")
    for k in ["mode", "cap", "load", "valid", "target", "drawn", "achieved", "lag p50",
              "lag p99", "req/s", "tok/s", "goodput", "schedule"]:
        table.add_column(k, justify="left" if k in ("mode", "load", "schedule") else "right",
                         no_wrap=True)
    rows = [[p.mode, str(p.capacity), p.load or "", valid_text(p.count),
             fmt(p.target_rate),
             fmt(p.scheduled_rate) if p.target_rate is not None else "—", fmt(p.achieved_rate),
             fmt(p.send_lag_ms["p50"], 3), fmt(p.send_lag_ms["p99"], 3),
             fmt(p.request_throughput), fmt(p.output_tokens_per_s, 1),
             fmt(p.goodput), "SLIPPED" if p.slipped else "kept"] for p in points]
    for column, values in zip(table.columns, zip(*rows, strict=True), strict=False):
        column.min_width = max(len(v) for v in [str(column.header), *values])
    for row in rows:
        table.add_row(*row)
    width = sum(c.min_width or 0 for c in table.columns) + 3 * len(table.columns) + 1
    console.print(table, width=max(console.width, width), crop=False)


def _print_evaluation(evaluation: Evaluation, run_dir: Path) -> None:
    from rich.table import Table

    from kvlab.report.comparisons import comparison_header, comparison_rows
    from kvlab.report.summary_table import summary_header, summary_rows
    from kvlab.store.files import HTML_FILE, REPORT_FILE

    # Short headers so the table fits 100 columns; report.md has every column. The load
    # column only when the run has load points.
    header = summary_header(evaluation)
    keep = {"mode": "mode", "capacity": "cap", "load": "load", "valid": "valid",
            "prompt tok": "prompt",
            "e2e mean ms": "e2e", "tok/s": "tok/s", "prefill ms": "prefill",
            "decode ms/tok": "dec/tok", "TTFT mean ms": "TTFT", "ITL mean ms": "ITL"}
    keep = {k: v for k, v in keep.items() if k in header}
    index = [header.index(k) for k in keep]
    table = Table(title=f"{evaluation.experiment}: means in ms (tok/s = Σ tokens / Σ e2e)")
    for short in keep.values():
        table.add_column(short, justify="left" if short in ("mode", "load") else "right",
                         no_wrap=True, min_width=len(short))
    rows = [[row[i] for i in index] for row in summary_rows(evaluation)]
    for column, values in zip(table.columns, zip(*rows, strict=True), strict=False):
        column.min_width = max(len(v) for v in [str(column.header), *values])
    for row in rows:
        table.add_row(*row)
    console.print(table, width=max(console.width, 120), crop=False)
    if evaluation.comparisons:
        ctable = Table(title="comparisons: ratio = mean A / mean B (> 1: B faster)")
        for k in comparison_header(evaluation):
            ctable.add_column(k, justify="left" if k in ("A / B", "load", "metric")
                              else "right", no_wrap=True)
        crows = comparison_rows(evaluation)
        for column, values in zip(ctable.columns, zip(*crows, strict=True), strict=False):
            column.min_width = max(len(v) for v in [str(column.header), *values])
        for row in crows:
            ctable.add_row(*row)
        console.print(ctable, width=max(console.width, 120), crop=False)
    pairs = sum(1 for v in evaluation.violations if v.other_mode is not None)
    _print_load(evaluation)
    from kvlab.report.workloads import capacity_lines

    for line in capacity_lines(evaluation.capacity):
        console.print(line, highlight=False, markup=False)
    for group in evaluation.summaries:
        if group.refused:
            console.print(f"refused: {group.mode} @ {group.capacity} "
                          f"{group.load or 'sequential'}: {group.count.describe()}",
                          highlight=False, markup=False)
    for verdict in evaluation.verdicts:
        by = ("the client's error budget" if str(verdict.reason) == "client_error"
              else "the server's counters")
        console.print(f"{'refused' if verdict.refuses else 'FLAGGED'} by {by}: "
                      f"{verdict.describe()}", highlight=False, markup=False,
                      style=None if verdict.refuses else "bold yellow")
    for e in evaluation.client_errors:
        if e.closes_each_answer:
            console.print(f"connection set-up: {e.mode} @ {e.capacity} {e.load}: the server "
                          "closed its connection after each answer, so every request paid "
                          f"the set-up (median {e.setup_paid_p50_ms or 0:.3f} ms, apart from "
                          "TTFT)", highlight=False, markup=False)
    console.print(f"validation: {evaluation.valid.count.describe(flags=False)}, {pairs} pair "
                  f"refusals (details in {run_dir / REPORT_FILE})", highlight=False,
                  markup=False)
    client = evaluation.client
    if client is not None:
        style = "bold yellow" if client.status == "saturated" else None
        console.print(("warning: " if style else "") + client.text, style=style,
                      highlight=False, markup=False)
    reasoned = sum(c.reasoning_rows for c in evaluation.found(REASONING))
    if reasoned:
        console.print(f"reasoning: {reasoned} rows streamed reasoning first; TTFT is to "
                      "their first token of any kind, the first answer token apart "
                      "(report.md, Reasoning streams)", highlight=False, markup=False)
    for flag in (f for p in evaluation.found(SERVER_HISTOGRAMS) for f in p.flags):
        console.print(f"warning: {flag}", style="bold yellow", highlight=False, markup=False)
    console.print(f"run directory: {run_dir}", highlight=False, markup=False)
    html = run_dir / HTML_FILE
    console.print(f"report: {run_dir / REPORT_FILE}"
                  + (f" and {html} (opens offline)" if html.exists() else ""),
                  highlight=False, markup=False)


@app.command(rich_help_panel=BENCHMARK)
def run(
    experiment: Path | None = typer.Argument(None, help="Experiment TOML file."),
    out: Path = typer.Option(Path("runs"), "--out", help="Parent directory of run dirs."),
    resume: Path | None = typer.Option(None, "--resume", help="Finish an interrupted run."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress output."),
    json_out: bool = typer.Option(False, "--json", help="Print evaluation.json at the end."),
    dry_run: bool = typer.Option(
        False, "--dry-run", help="Print the run plan (its steps and every argv); run nothing."),
    repeat_aa: str | None = typer.Option(
        None, "--repeat-aa", metavar="MODE",
        help="Measure MODE twice (A/A) and report the difference: the noise floor."),
    queries: int | None = typer.Option(
        None, "--queries", metavar="N",
        help="Measure the first N built-in queries instead of the file's count (a quick "
             "run of a long protocol); recorded in manifest.json (overrides) and in the "
             "run dir's experiment.toml."),
    settings: list[str] | None = typer.Option(
        None, "--set", metavar="KEY=VALUE",
        help="Give a key of the experiment file another value for this run (repeatable; "
             "VALUE in TOML): --set workload.capacities=[256,2048], --set "
             "load.values=[1,4,8], --set modes.vllm.vllm.enforce_eager=true (modes.<mode "
             "name>.<key>). Validated as the file is; recorded in manifest.json "
             "(overrides) and in the run dir's experiment.toml."),
    goodput: str | None = typer.Option(
        None, "--goodput", metavar="'NAME:MS ...'",
        help="Per-request objectives goodput counts against (the \\[slo] table), spelt "
             "as kvlab, vLLM or AIPerf spell them: --goodput 'ttft:200 tpot:50 e2el:1000' "
             "or --goodput 'time_to_first_token:200 inter_token_latency:50'; tpot and "
             "inter_token_latency mean kvlab's itl_ms, e2el and request_latency its "
             "e2e_ms (docs: Metric definitions, one vocabulary). Recorded as --set slo.*."),
    no_launch: bool = typer.Option(
        False, "--no-launch",
        help="Start no server: measure every embedded/llamacpp mode against the server "
             "you started, given with --endpoint."),
    endpoint: list[str] | None = typer.Option(
        None, "--endpoint", metavar="MODE[@CAPACITY]=URL",
        help="With --no-launch (repeatable): the URL of MODE's server, e.g. "
             "mono=http://127.0.0.1:8080. kvlab cannot restart a server it does not own, "
             "so each capacity needs a server started with that context size: give "
             "MODE@CAPACITY=URL per capacity (the more specific wins). /health is checked "
             "when the (mode, capacity) comes up; a /props context size other than the "
             "capacity is refused. See experiments/compose.yaml."),
    tokenizer: Path | None = typer.Option(
        None, "--tokenizer", metavar="FILE",
        help="tokenizer.json or .gguf counting prompt tokens where a server has no "
             "/tokenize (else: calibration on its usage.prompt_tokens); overrides "
             "\\[workload] tokenizer; kept for --resume."),
    workers: int | None = typer.Option(
        None, "--workers", metavar="N",
        help="Send each load point through N load workers (Ray actors, each its own "
             "process with kvlab's own client; \\[load] workers = N in the file): the "
             "schedule is computed once and shared out, records come back into one "
             "records.jsonl. A local Ray is started and stopped unless --ray-address. "
             "Needs the ray extra: pip install 'kvlab\\[ray]'. Kept for --resume."),
    ray_address: str | None = typer.Option(
        None, "--ray-address", metavar="HOST:PORT",
        help="Run the load workers on this existing Ray cluster (kvlab installed on every "
             "node) instead of a local Ray; the cluster keeps running."),
    workers_per_node: int | None = typer.Option(
        None, "--workers-per-node", metavar="K",
        help="With --ray-address: K workers on each alive node (with --workers N: the "
             "first N places); default: Ray spreads them."),
    strict: bool = typer.Option(
        False, "--strict", help="Refuse a point whose server counters (/metrics) disagree "
        "with its records, instead of flagging it."),
    no_history: bool = typer.Option(
        False, "--no-history", help="Do not add the run to the run history (kvlab history; "
        "KVLAB_HISTORY=off does the same for every run)."),
) -> None:
    """Run every mode of an experiment; write records, manifest, evaluation and report.

    Examples: kvlab run experiments/llamacpp-cpu.toml --queries 8;
    kvlab run experiments/continuous-batching.toml --set load.values=[1,4,8];
    kvlab run experiments/load-sweep.toml --workers 2;
    kvlab run experiments/load-sweep.toml --ray-address 10.0.0.5:6379 --workers-per-node 4;
    kvlab run experiments/llamacpp-gpu-mono-vs-dual.toml --no-launch
    --endpoint mono@512=http://127.0.0.1:8081 --endpoint dual@512=http://127.0.0.1:8084 ...
    """
    from kvlab.run.overrides import parse_setting
    from kvlab.run.planner import RunRequest, plan_new
    from kvlab.run.runner import RunOutput, run_experiment

    driver = None
    if workers is not None or ray_address is not None or workers_per_node is not None:
        from kvlab.bench.drivers.ray import RayDriverSettings

        driver = RayDriverSettings(count=workers, address=ray_address, per_node=workers_per_node)
    slo = []
    if goodput is not None:
        from kvlab.analysis.vocabulary import parse_goodput
        from kvlab.run.overrides import Setting

        slo = [Setting(("slo", field), ms) for field, ms in parse_goodput(goodput).items()]
    request = RunRequest(experiment, resume, queries=queries,
                         settings=(*(parse_setting(s) for s in settings or ()), *slo),
                         repeat_aa=repeat_aa,
                         no_launch=no_launch, endpoints=tuple(endpoint or ()),
                         tokenizer=tokenizer, driver=driver)
    if dry_run:
        from kvlab.errors import ConfigError

        if experiment is None or resume is not None:
            raise ConfigError("--dry-run plans a new run: give the experiment file (and no "
                              "--resume)")
        plan, _ = plan_new(request)  # every check a run makes first, none on the network
        if json_out:
            print_json({"plan": plan.to_json()})
        else:
            for line in plan.lines():
                console.print(line, highlight=False, markup=False, soft_wrap=True)
        return

    result = run_experiment(request, RunOutput(out, _reporter(quiet), strict=strict))
    if json_out:
        print_json(result.evaluation.to_json())
    else:
        _print_evaluation(result.evaluation, result.run_dir.path)
    from kvlab.cli.history_cmds import remember_run

    remember_run(result.run_dir.path, enabled=not no_history)


@app.command(rich_help_panel=BENCHMARK)
def prepare(
    experiment: Path = typer.Argument(..., help="Experiment TOML file."),
    out: Path = typer.Option(Path("runs"), "--out", help="Parent directory of run dirs."),
    tokenizer: Path | None = typer.Option(
        None, "--tokenizer", metavar="FILE",
        help="tokenizer.json or .gguf for servers without /tokenize (as kvlab run)."),
) -> None:
    """Size the prompts per capacity and write prepared.json (tokens counted by the
    server's /tokenize, the experiment's tokenizer, or calibration on usage)."""
    from kvlab.bench.plan.workload import Prepared
    from kvlab.run.runner import prepare_run

    run_dir = prepare_run(experiment, out=out, tokenizer=tokenizer)
    prepared = Prepared.load(run_dir.prepared_path)
    for capacity, prompts in sorted(prepared.prompts.items()):
        mean = sum(p.tokens for p in prompts) / len(prompts)
        how = prepared.sizing.get(capacity, {}).get("method", "?")
        console.print(f"capacity {capacity}: {len(prompts)} prompts, padding "
                      f"{prepared.padding_tokens[capacity]} tokens, mean prompt {mean:.0f} tokens "
                      f"(counted by {how})", highlight=False, markup=False)
    console.print(f"wrote {run_dir.prepared_path}", highlight=False, markup=False)


@app.command(rich_help_panel=BENCHMARK)
def measure(
    experiment: Path | None = typer.Argument(None, help="Experiment TOML file."),
    mode: str = typer.Option(..., "--mode", help="The mode to measure."),
    run_dir: Path | None = typer.Option(None, "--run", help="Run dir to add the mode to."),
    out: Path = typer.Option(Path("runs"), "--out", help="Parent of a new run dir."),
    quiet: bool = typer.Option(False, "--quiet", "-q"),
) -> None:
    """Measure one mode (all its capacities) into a run directory."""
    from kvlab.errors import RunInterrupted
    from kvlab.run.runner import measure_mode

    try:
        run_path = measure_mode(experiment, mode, run_dir=run_dir, out=out,
                                reporter=_reporter(quiet))
    except RunInterrupted as exc:
        err_console.print(str(exc), markup=False, highlight=False, soft_wrap=True)
        raise typer.Exit(1) from None
    console.print(f"records in {run_path.records_path}; evaluate with: kvlab evaluate "
                  f"{run_path.path}", highlight=False, markup=False)


@app.command(rich_help_panel=BENCHMARK)
def evaluate(
    run_dir: Path = typer.Argument(..., help="Run directory."),
    json_out: bool = typer.Option(False, "--json", help="Print evaluation.json."),
    definitions: list[str] = typer.Option(
        [], "--definitions", "-d",
        help="Add another tool's metric definitions to evaluation.json: kvlab, vllm, "
             "guidellm, aiperf or all (repeatable; report.md always shows every set)."),
    strict: bool = typer.Option(
        False, "--strict", help="Refuse a point whose server counters (/metrics) disagree "
        "with its records, instead of flagging it."),
) -> None:
    """Recompute evaluation.json and report.md from records.jsonl and print the table."""
    from kvlab.analysis.definitions import resolve
    from kvlab.run.runner import evaluate_run

    names = resolve(n for value in definitions for n in value.split(","))
    evaluation = evaluate_run(run_dir, tuple(names), strict=strict)
    if json_out:
        print_json(evaluation.to_json())
    else:
        _print_evaluation(evaluation, run_dir)


@app.command(rich_help_panel=BENCHMARK)
def explain(
    ratio: float | None = typer.Argument(None, help="A ratio A/B to read."),
) -> None:
    """How to read a ratio A/B (mean time of A over mean time of B at equal capacity)."""
    from kvlab.analysis.evaluate import explain_ratio

    if ratio is None:
        console.print(
            "A ratio compares the mean time of mode A with mode B at the same capacity:\n"
            "  ratio = mean_A / mean_B;  reduction = 1 - 1/ratio = 1 - B/A.\n"
            "Above 1, B took less time; below 1, B took more. The reduction is the share "
            "of A's time that B saves.\nExamples:",
            highlight=False, markup=False,
        )
        for example in (0.8, 1.2):
            console.print("  " + explain_ratio(example), highlight=False, markup=False)
        console.print("Note: 1.2 is not 20 % faster in time: B saves 16.67 % of A's time.",
                      highlight=False, markup=False)
        return
    if ratio <= 0:
        from kvlab.errors import ConfigError

        raise ConfigError(f"a ratio of times must be positive, got {ratio:g}")
    console.print(explain_ratio(ratio), highlight=False, markup=False)

