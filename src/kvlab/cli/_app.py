"""The Typer application and the consoles every command module shares.

Command modules import ``app`` from here and register themselves with
``@app.command()``; heavy libraries (torch, matplotlib, fastapi) are imported inside
the command functions so ``kvlab --help`` stays fast.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping
from typing import Any, TextIO

import typer
from rich.console import Console

app = typer.Typer(
    name="kvlab",
    help=(
        "Understand and measure LLM inference: a reference engine with an explicit KV "
        "cache, KV memory accounting, and a validated benchmark harness for llama.cpp, "
        "vLLM and OpenAI-compatible servers."
    ),
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
    rich_markup_mode="rich",
)

# ``kvlab --help`` lists the commands in these groups (each command names its own):
# the benchmark harness, its history, the servers it measures, KV memory accounting,
# and the studies of the reference engine (kvlab.studies).
BENCHMARK = "Benchmark: run, judge, report"
HISTORY = "Run history"
SERVERS = "Servers and endpoints"
MEMORY = "KV memory"
STUDIES = "Studies of the reference engine"



def _print_version(asked: bool) -> None:
    if asked:
        from kvlab.version import version_line

        typer.echo(version_line())
        raise typer.Exit()


@app.callback()
def _options(
    version: bool = typer.Option(False, "--version", is_eager=True, callback=_print_version,
                                 help="Print kvlab's version and the git commit of its "
                                      "source (when known), then exit."),
) -> None:
    # the options every command shares (before the command's name): only --version
    pass


# Rich cuts a table to 80 columns when its stream is not a terminal (CI, `make run >
# log`, `| tee`): "pag…", "con…". Off a terminal, lines are as long as their content
# needs, unless COLUMNS says otherwise.
LOG_WIDTH = 1000


def console_width(stream: TextIO, environ: Mapping[str, str] = os.environ) -> int | None:
    """The width to give a Console writing to ``stream``: None on a terminal (Rich asks
    the terminal), COLUMNS when set, else LOG_WIDTH, wider than any table kvlab prints,
    so nothing is cut or wrapped."""
    if stream.isatty():
        return None
    columns = environ.get("COLUMNS", "")
    return int(columns) if columns.isdigit() and int(columns) > 0 else LOG_WIDTH


console = Console(width=console_width(sys.stdout))
err_console = Console(stderr=True, width=console_width(sys.stderr))


def print_json(document: Any) -> None:
    """Print one JSON document on the last line of stdout (the ``--json`` contract)."""
    typer.echo(json.dumps(document, separators=(",", ":"), default=str))
