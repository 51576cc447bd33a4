"""Load strategies: one file per kind of ``[load]`` (sequential, concurrency, rate, trace,
sessions), the interface (base: :class:`LoadTable`, the settings; :class:`LoadStrategy`,
one load point) and the registry (kinds: :data:`LOAD_KINDS`, :data:`LoadSettings`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kvlab.bench.plan.loads.base import LoadStrategy, LoadTable
    from kvlab.bench.plan.loads.kinds import LOAD_KINDS, LoadSettings

__all__ = [
    "LOAD_KINDS",
    "LoadSettings",
    "LoadStrategy",
    "LoadTable",
]

# Each name's module, imported on first use: importing one module of the package
# never imports its siblings (nor the libraries they need).
_HOMES = {
    "LoadStrategy": "kvlab.bench.plan.loads.base",
    "LoadTable": "kvlab.bench.plan.loads.base",
    "LOAD_KINDS": "kvlab.bench.plan.loads.kinds",
    "LoadSettings": "kvlab.bench.plan.loads.kinds",
}


def __getattr__(name: str) -> object:
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(_HOMES[name]), name)
