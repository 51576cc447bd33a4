"""kvlab's command line: a thin layer that parses, calls the library and renders.

Each command lives in the module of its part; importing them registers them on
``app``. Errors the user can fix (:class:`kvlab.errors.KvlabError`) print one line and
exit with status 2.
"""

from __future__ import annotations

import sys

from kvlab.cli._app import app, err_console
from kvlab.errors import KvlabError

# Command modules register themselves on import.
from kvlab.cli import engine_cmds  # noqa: F401  isort: skip
from kvlab.cli import speed_cmds  # noqa: F401  isort: skip
from kvlab.cli import memory_cmd  # noqa: F401  isort: skip
from kvlab.cli import serve_cmd  # noqa: F401  isort: skip
from kvlab.cli import llamacpp_cmds  # noqa: F401  isort: skip
from kvlab.cli import vllm_cmd  # noqa: F401  isort: skip
from kvlab.cli import endpoint_cmds  # noqa: F401  isort: skip
from kvlab.cli import calibrate_cmd  # noqa: F401  isort: skip
from kvlab.cli import bench_cmds  # noqa: F401  isort: skip
from kvlab.cli import report_cmds  # noqa: F401  isort: skip
from kvlab.cli import history_cmds  # noqa: F401  isort: skip

__all__ = ["app", "main"]


def main() -> None:
    """Console-script entry point: a KvlabError or a usage mistake (a value of the wrong
    type, an unknown option) is one line and exit 2; Ctrl-C is exit 130."""
    import importlib

    import typer

    # the click typer runs on (typer >= 0.26 vendors its own copy)
    from kvlab import watchdog

    watchdog.ensure()  # whatever this command starts ends with it, even after kill -9
    # the click typer runs on (typer >= 0.26 vendors its own copy)
    clicks = importlib.import_module(typer.BadParameter.__module__)
    no_args = getattr(clicks, "NoArgsIsHelpError", ())
    try:
        status = app(standalone_mode=False, prog_name="kvlab")
    except KvlabError as exc:
        _one_line(str(exc))
        sys.exit(exc.exit_status)
    except no_args as exc:
        exc.show()  # `kvlab` alone: the help text
        sys.exit(exc.exit_code)
    except clicks.UsageError as exc:
        where = f" (see {exc.ctx.command_path} --help)" if exc.ctx is not None else ""
        _one_line(" ".join(exc.format_message().split()) + where)
        sys.exit(2)
    except clicks.ClickException as exc:
        _one_line(" ".join(exc.format_message().split()))
        sys.exit(exc.exit_code)
    except typer.Abort:  # Ctrl-C outside a run
        sys.exit(130)
    sys.exit(status if isinstance(status, int) else 0)


def _one_line(message: str) -> None:
    err_console.print(f"error: {message}", markup=False, highlight=False, soft_wrap=True)
