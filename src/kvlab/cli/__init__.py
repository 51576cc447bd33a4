"""kvlab's command line: a thin layer that parses, calls the library and renders.

Each command lives in the module of its part; importing them registers them on
``app``. Errors the user can fix (:class:`kvlab.errors.KvlabError`) print one line and
exit with status 2.
"""

from __future__ import annotations

import sys
from typing import Any

from kvlab.cli._app import app, err_console
from kvlab.errors import KvlabError

# Command modules register themselves on import.
from kvlab.cli import engine_cmds  # noqa: F401  isort: skip
from kvlab.cli import speed_cmds  # noqa: F401  isort: skip
from kvlab.cli import profile_cmd  # noqa: F401  isort: skip
from kvlab.cli import memory_cmd  # noqa: F401  isort: skip
from kvlab.cli import serve_cmd  # noqa: F401  isort: skip
from kvlab.cli import llamacpp_cmds  # noqa: F401  isort: skip
from kvlab.cli import vllm_cmd  # noqa: F401  isort: skip
from kvlab.cli import endpoint_cmds  # noqa: F401  isort: skip
from kvlab.cli import calibrate_cmd  # noqa: F401  isort: skip
from kvlab.cli import bench_cmds  # noqa: F401  isort: skip
from kvlab.cli import report_cmds  # noqa: F401  isort: skip
from kvlab.cli import floor_cmd  # noqa: F401  isort: skip
from kvlab.cli import ab_cmd  # noqa: F401  isort: skip
from kvlab.cli import history_cmds  # noqa: F401  isort: skip
from kvlab.cli import peers_cmd  # noqa: F401  isort: skip

__all__ = ["app", "main"]


def main() -> None:
    """Console-script entry point: a KvlabError or a usage mistake (a value of the wrong
    type, an unknown option) is one line and exit 2; Ctrl-C is exit 130."""
    import importlib

    import typer

    from kvlab import watchdog

    lost = _keep_lost_interrupts()
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
    if lost:
        _one_line("interrupted (Ctrl-C) while the command finished its work")
        sys.exit(130)
    sys.exit(status if isinstance(status, int) else 0)


def _keep_lost_interrupts() -> list[BaseException]:
    """Python drops an exception raised inside a finalizer (a ``__del__``, a weakref
    callback) and hands it to ``sys.unraisablehook``: a Ctrl-C that lands there would be
    lost, and the command would end with status 0. The list returned collects those,
    with no traceback printed; every other unraisable exception is printed as before."""
    lost: list[BaseException] = []
    default = sys.unraisablehook

    def hook(unraisable: Any) -> None:
        if isinstance(unraisable.exc_value, KeyboardInterrupt):
            lost.append(unraisable.exc_value)
        else:
            default(unraisable)

    sys.unraisablehook = hook
    return lost


def _one_line(message: str) -> None:
    err_console.print(f"error: {message}", markup=False, highlight=False, soft_wrap=True)
