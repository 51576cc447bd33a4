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
from kvlab.cli import memory_cmd  # noqa: F401  isort: skip
from kvlab.cli import serve_cmd  # noqa: F401  isort: skip
from kvlab.cli import llamacpp_cmds  # noqa: F401  isort: skip
from kvlab.cli import endpoint_cmds  # noqa: F401  isort: skip
from kvlab.cli import calibrate_cmd  # noqa: F401  isort: skip
from kvlab.cli import bench_cmds  # noqa: F401  isort: skip
from kvlab.cli import report_cmds  # noqa: F401  isort: skip

__all__ = ["app", "main"]


def main() -> None:
    """Console-script entry point."""
    try:
        app()
    except KvlabError as exc:
        err_console.print(f"error: {exc}", markup=False, highlight=False, soft_wrap=True)
        sys.exit(2)
