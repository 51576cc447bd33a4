"""The ``engine`` extra: what the engine commands need beyond a plain ``pip install kvlab``.

The harness (``kvlab run`` against any endpoint, the reports, ``kvlab memory``,
``kvlab compare``, ``kvlab serve-synthetic``) installs without torch. The reference
engine and ``kvlab serve`` need ``pip install 'kvlab[engine]'``; an engine command
without it stops with one line naming the extra (:func:`require_engine`), before any
of its heavy imports, which stay inside the command functions.
"""

from __future__ import annotations

import importlib.util

from kvlab.errors import ConfigError

INSTALL = "pip install 'kvlab[engine]'"

# the top-level modules of the engine extra's packages (pyproject.toml; checked by
# tests/test_dependencies.py)
ENGINE_MODULES = ("torch", "transformers", "accelerate", "jinja2", "fastapi", "starlette",
                  "uvicorn")


def _importable(module: str) -> bool:
    """True when ``module`` can be found (found, not imported: torch takes seconds)."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def engine_missing() -> list[str]:
    """The engine extra's modules that cannot be imported here ([] when installed)."""
    return [module for module in ENGINE_MODULES if not _importable(module)]


def require_engine(command: str) -> None:
    """ConfigError (one line, exit 2) when ``command`` ("kvlab serve") cannot run for
    want of the engine extra."""
    missing = engine_missing()
    if missing:
        raise ConfigError(f"{command} needs the engine extra: {INSTALL} (not installed: "
                          f"{', '.join(missing)})")
