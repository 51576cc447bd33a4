"""``kvlab calibrate`` (how exact is the harness's clock here?) and ``kvlab serve-synthetic``."""

from __future__ import annotations

import datetime
import platform
from pathlib import Path
from typing import Any

import typer
from rich.table import Table

from kvlab.cli._app import BENCHMARK, SERVERS, app, console, err_console, print_json
from kvlab.cli.lists import LIST_METAVAR, float_list, int_list, list_help
from kvlab.errors import ConfigError


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def _render(report: Any) -> None:
    acc = Table(title="Timestamp error vs the server's send times (|error|, ms)")
    for col in ("c", "req", "events", "TTFT50", "TTFT99", "gap50", "gap99", "lat50", "lat99",
                "stamps", "lag99", "µs/tok", "srv CPU", "srv late99"):
        acc.add_column(col, justify="right", no_wrap=True, min_width=max(len(col), 6))
    for r in report.accuracy:
        e = r.errors
        acc.add_row(
            str(r.concurrency), f"{e.requests}" + (f" ({e.failed + e.unmatched} bad)"
                                                   if e.failed + e.unmatched else ""),
            str(e.events),
            _ms(e.ttft_ms["p50"]), _ms(e.ttft_ms["p99"]), _ms(e.gap_ms["p50"]),
            _ms(e.gap_ms["p99"]), _ms(e.latency_ms["p50"]), _ms(e.latency_ms["p99"]),
            r.stamps, _ms(r.read_lag_ms.get("p99")),
            "-" if r.client_cpu_us_per_token is None else f"{r.client_cpu_us_per_token:.1f}",
            "-" if r.server_cpu_frac is None else f"{r.server_cpu_frac:.0%}",
            _ms(r.server_lateness_p99_ms),
        )
    console.print(acc, width=max(console.width, 150), crop=False)
    if any(r.stamps == "kernel" for r in report.accuracy):
        console.print("stamps kernel: reads carry the kernel's arrival time; lag99 = p99 of "
                      "how late the client's loop handled them (what a read-time stamp adds)")
    if report.ingest:
        ing = Table(title="Ingest burst (no delay between writes)")
        for col in ("client", "events/s", "tokens/s", "CPU µs/event", "server CPU"):
            ing.add_column(col, justify="right")
        for i in report.ingest:
            ing.add_row(i.client, f"{i.events_per_s:,.0f}", f"{i.tokens_per_s:,.0f}",
                        f"{i.cpu_us_per_event:.2f}", f"{i.server_cpu_frac:.0%}")
        console.print(ing)
        rates = {i.client: i.events_per_s for i in report.ingest}
        base = rates.get("aiohttp-baseline")
        for name in ("kvlab", "kvlab-aiohttp"):
            if base and name in rates:
                console.print(f"{name} / aiohttp baseline events/s: {rates[name] / base:.2f}")
    if report.ramp:
        ramp = Table(title="Ingest ramp (paced; error grows = p99 latency over the limit)")
        for col in ("offered ev/s", "achieved ev/s", "latency p50", "latency p99", "gap p99",
                    "client CPU µs/token", "on time"):
            ramp.add_column(col, justify="right")
        for r in report.ramp:
            e = r.errors
            ramp.add_row(f"{r.offered_events_per_s:,.0f}", f"{r.events_per_s:,.0f}",
                         _ms(e.latency_ms["p50"]), _ms(e.latency_ms["p99"]), _ms(e.gap_ms["p99"]),
                         "-" if r.client_cpu_us_per_token is None
                         else f"{r.client_cpu_us_per_token:.1f}",
                         "yes" if r.ok else "no")
        console.print(ramp, width=max(console.width, 120), crop=False)
    for note in report.notes:
        console.print(f"note: {note}")


def _render_workers(facts: dict[str, Any]) -> None:
    """Where the load workers ran and their clock offsets per level (ms)."""
    hosts = ", ".join(f"worker {w['worker']}: {w['host']} pid {w['pid']}"
                      for w in facts.get("workers", []))
    console.print(f"load workers (Ray {facts.get('ray_version')}, {facts.get('address')}): "
                  f"{hosts}", highlight=False)
    table = Table(title="Workers' clock offsets to this process (ping-pong, ms)")
    for col in ("level", "worker", "offset", "± bound", "round trip"):
        table.add_column(col, justify="right")
    for level in facts.get("levels", []):
        for c in level["clocks"]:
            table.add_row(level["level"], str(c["worker"]), f"{c['offset_ns'] / 1e6:.3f}",
                          f"{c['error_ns'] / 1e6:.3f}", f"{c['rtt_ns'] / 1e6:.3f}")
    console.print(table)


@app.command(rich_help_panel=BENCHMARK)
def calibrate(
    concurrency: list[str] = typer.Option(
        ["1,64,256,1024"], metavar=LIST_METAVAR, help="Streams per accuracy level. "
        + list_help("--concurrency", "64", "256")),
    duration_s: float = typer.Option(6.0, help="Seconds per accuracy level."),
    itl_ms: float = typer.Option(50.0, help="Inter-token gap the server keeps (ms)."),
    ttft_ms: float = typer.Option(20.0, help="Time to first token the server keeps (ms)."),
    tokens: int = typer.Option(32, help="Tokens per request in the accuracy levels."),
    api: str = typer.Option("llamacpp-completion",
                            help="The API the client speaks: llamacpp-completion, "
                                 "openai-chat, openai-completion, openai-responses or "
                                 "anthropic-messages (a streamed one)."),
    known_delay_ms: float = typer.Option(
        0.0, help="Self-test: every client timestamp reads this much late (ms)."
    ),
    ingest: bool = typer.Option(True, help="Run the ingest burst and ramp."),
    ingest_streams: int = typer.Option(64, help="Streams in the ingest tests."),
    ingest_duration_s: float = typer.Option(3.0, help="Seconds of each ingest burst."),
    ramp_duration_s: float = typer.Option(2.0, help="Seconds per ingest ramp rate."),
    ramp: list[str] = typer.Option(
        ["5000,7500,10000,12500,15000,20000,25000,30000,40000,50000,75000,100000"],
        metavar=LIST_METAVAR,
        help="Offered events/s of the ingest ramp. " + list_help("--ramp", "5000", "7500")),
    save: bool = typer.Option(True, help="Write the limits to the calibration file."),
    pin: bool = typer.Option(False, help="Run the synthetic server on the last CPU and the "
                             "client on the others, so they never share a core."),
    http_client: str = typer.Option(
        "auto", help="The harness's HTTP client: auto (kvlab's own for http://, with kernel "
        "receive timestamps) or aiohttp (stamps each read when its coroutine resumes)."),
    workers: int | None = typer.Option(
        None, "--workers", metavar="N",
        help="Measure N load workers (Ray actors on a local Ray, as kvlab run --workers N "
             "runs them) as one client: streams shared out, gap error and ingest limit of "
             "the N together, saved as the limit of N workers (kvlab run --workers N is "
             "held to it). Needs the ray extra."),
    json_out: bool = typer.Option(False, "--json", help="Print one JSON document last."),
) -> None:
    """Measure the harness's timestamp error and ingest limit against a synthetic server.

    Examples: kvlab calibrate; kvlab calibrate --workers 2 --concurrency 1,64,256
    """
    from kvlab import __version__
    from kvlab.analysis.saturation import Calibration, save_calibration
    from kvlab.api.dialects import dialect_of
    from kvlab.bench.calibrate.check import CalibrateSettings
    from kvlab.bench.calibrate.check import calibrate as run_calibration
    from kvlab.records import ApiKind

    if workers is not None:
        from kvlab.bench.workers.ray_pool import ray_module

        if workers < 1:
            raise ConfigError(f"--workers must be >= 1, got {workers}")
        if pin:
            raise ConfigError("--pin places one client process; drop it with --workers")
        ray_module("kvlab calibrate --workers")
    if http_client not in ("auto", "aiohttp"):
        raise ConfigError(f"--http-client must be auto or aiohttp, got {http_client!r}")
    streamed = [k for k in ApiKind if dialect_of(k).generates]  # calibration times streams
    if api not in streamed:
        raise ConfigError(f"--api must be one of {', '.join(streamed)}, got {api!r}")
    levels = tuple(int_list(concurrency, "--concurrency"))
    durations = (duration_s, ingest_duration_s, ramp_duration_s)
    if min(durations) <= 0 or min(itl_ms, ttft_ms) < 0 or tokens < 2 or ingest_streams < 1:
        raise ConfigError("durations must be > 0, --itl-ms/--ttft-ms >= 0, --tokens >= 2, "
                          "--ingest-streams >= 1")
    settings = CalibrateSettings(
        concurrency=levels, duration_s=duration_s, itl_ms=itl_ms, ttft_ms=ttft_ms,
        tokens=tokens, api=ApiKind(api), known_delay_ms=known_delay_ms, ingest=ingest,
        ingest_streams=ingest_streams, ramp_rates=tuple(float_list(ramp, "--ramp")),
        ingest_duration_s=ingest_duration_s, ramp_duration_s=ramp_duration_s,
        pin_cpus=pin, http_client=http_client, workers=workers,
    )
    say = err_console.print if json_out else console.print
    if workers is not None:
        from kvlab.bench.calibrate.spread import calibrate_on_workers as run_calibration
    report = run_calibration(settings, progress=lambda m: say(f"[dim]{m}[/dim]"))
    document = report.to_dict()
    saved: Path | None = None
    if save and report.max_events_per_s is not None and report.max_tokens_per_s is not None:
        saved = save_calibration(Calibration(
            max_events_per_s=report.max_events_per_s, max_tokens_per_s=report.max_tokens_per_s,
            measured_at=datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
            host=platform.node(), kvlab_version=__version__, workers=workers,
        ))
    document["calibration_file"] = str(saved) if saved else None
    if json_out:
        print_json(document)
        return
    _render(report)
    if report.workers:
        _render_workers(report.workers)
    whose = f"{workers} load workers' limit" if workers else "client limit"
    if report.max_events_per_s is not None:
        console.print(f"{whose}: {report.max_events_per_s:,.0f} events/s, "
                      f"{report.max_tokens_per_s:,.0f} tokens/s"
                      + (f" (saved to {saved})" if saved else ""))
    elif ingest:
        console.print(f"{whose}: not found (even the lowest ramp rate was late)")


@app.command("serve-synthetic", rich_help_panel=SERVERS)
def serve_synthetic(
    host: str = typer.Option("127.0.0.1", help="Address to bind."),
    port: int = typer.Option(8080, help="Port (0 = any free port)."),
    ttft_ms: float = typer.Option(20.0, help="Default time to first token (ms)."),
    itl_ms: float = typer.Option(50.0, help="Default gap between writes (ms)."),
    tokens: int = typer.Option(64, help="Default tokens when the request sets none."),
    tokens_per_event: int = typer.Option(1, help="Tokens per SSE event."),
    events_per_write: int = typer.Option(1, help="SSE events per socket write."),
    slots: int = typer.Option(0, min=0, help="Requests served at once; the others wait for "
                              "a slot (0: no limit). One slot serves a request per "
                              "ttft + (tokens - 1) * itl ms: a capacity known by hand."),
) -> None:
    """Serve tokens on an exact schedule and log the send times (see kvlab.serve.synthetic)."""
    from kvlab.serve.synthetic import Schedule

    if min(tokens, tokens_per_event, events_per_write) < 1 or min(ttft_ms, itl_ms) < 0:
        raise ConfigError("--tokens, --tokens-per-event, --events-per-write must be >= 1 and "
                          "--ttft-ms, --itl-ms >= 0")
    run_synthetic(host, port, Schedule(ttft_ms=ttft_ms, itl_ms=itl_ms, tokens=tokens,
                                       tokens_per_event=tokens_per_event,
                                       events_per_write=events_per_write), slots)


def run_synthetic(host: str, port: int, default: Any = None, slots: int = 0) -> None:
    """Run the synthetic server in the foreground until Ctrl-C (``kvlab serve --synthetic``)."""
    import asyncio
    import contextlib

    from kvlab.serve.runner import check_port
    from kvlab.serve.synthetic import Schedule, serve

    check_port(port)
    try:
        with contextlib.suppress(KeyboardInterrupt):
            asyncio.run(serve(host, port, default or Schedule(), slots))
    except OSError as exc:  # address in use, unknown host
        raise ConfigError(f"cannot listen on {host}:{port}: {exc.strerror or exc}; choose "
                          "another --port (0 picks a free one) or --host") from None
