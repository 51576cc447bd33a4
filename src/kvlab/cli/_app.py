"""The Typer application and the consoles every command module shares.

Command modules import ``app`` from here and register themselves with
``@app.command()``; heavy libraries (torch, matplotlib, fastapi) are imported inside
the command functions so ``kvlab --help`` stays fast.
"""

from __future__ import annotations

import json
from typing import Any

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

console = Console()
err_console = Console(stderr=True)


def print_json(document: Any) -> None:
    """Print one JSON document on the last line of stdout (the ``--json`` contract)."""
    typer.echo(json.dumps(document, separators=(",", ":"), default=str))
