"""``kvlab endpoints list|check``: the configured inference endpoints (keys never shown)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer
from rich.markup import escape
from rich.table import Table

from kvlab.cli._app import SERVERS, app, console, print_json

endpoints_app = typer.Typer(
    help="Configured inference endpoints (VLLM_*, OPENAI_*_<n> in the environment or .env).",
    no_args_is_help=True,
)
app.add_typer(endpoints_app, name="endpoints", rich_help_panel=SERVERS)

ENV_FILE = typer.Option(
    None, "--env-file", help="A .env file (default: the nearest .env upwards from here)."
)


def _cli_entry(
    name: str | None, base_url: str | None, model: str | None, api: str | None, key_env: str | None
) -> dict[str, Any] | None:
    """Command-line overrides as one endpoint entry (None when no option is given)."""
    given = {"base_url": base_url, "model": model, "api": api, "api_key_env": key_env}
    if all(v is None for v in given.values()):
        return None
    return {"name": name or "cli", **given}


@endpoints_app.command("list")
def list_endpoints(
    env_file: Path = ENV_FILE,
    as_json: bool = typer.Option(False, "--json", help="Print one JSON document."),
) -> None:
    """List the configured endpoints; keys appear only as "set" / "not set"."""
    from kvlab.bench.client.endpoint_config import describe, load_endpoints

    rows = [describe(e) for e in load_endpoints(env_file=env_file)]
    table = Table("name", "api", "base URL", "model", "key", "timeout (s)")
    for r in rows:
        cells = (r["name"], r["api"], r["base_url"], r["model"] or "-", r["api_key"])
        table.add_row(*(escape(str(c)) for c in cells), f"{r['timeout_s']:g}")
    if not rows:
        console.print(
            "No endpoint configured: set VLLM_BASE_URL + VLLM_MODEL_ID, or "
            "OPENAI_BASE_URL_1 + OPENAI_MODEL_1 (environment or .env)."
        )
    else:
        console.print(table)
    if as_json:
        print_json({"endpoints": rows})


@endpoints_app.command("check")
def check(
    name: str = typer.Argument(None, help="Endpoint name (default: the only one)."),
    env_file: Path = ENV_FILE,
    base_url: str = typer.Option(None, "--base-url", help="Override or give the base URL."),
    model: str = typer.Option(None, "--model", help="Override or give the model id."),
    api: str = typer.Option(None, "--api", help="openai-chat, openai-completion, ..."),
    api_key_env: str = typer.Option(
        None, "--api-key-env", help="Name of the variable that holds the key (not the key)."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON document."),
) -> None:
    """Authenticated GET /v1/models: the configured model must be listed."""
    from kvlab.bench.client.endpoint_config import describe, load_endpoints, select_endpoint
    from kvlab.bench.client.models import check_models

    cli = _cli_entry(name, base_url, model, api, api_key_env)
    endpoint = select_endpoint(
        load_endpoints(cli=cli, env_file=env_file), name or (cli or {}).get("name")
    )
    ids = check_models(endpoint)
    console.print(
        f"[green]ok[/green] {escape(endpoint.name)}: {escape(endpoint.base_url)} serves "
        f"{escape(str(endpoint.model))} (models listed: {escape(', '.join(ids))})"
    )
    if as_json:
        print_json({**describe(endpoint), "ok": True, "models": ids})
