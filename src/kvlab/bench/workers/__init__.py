"""Load beyond one process: a point's schedule sharded over load workers (Ray actors),
each running kvlab's own client (:class:`LoadWorker`), their clocks placed by
ping-pong and their records merged in completion order. :class:`RayPool` starts and
ends them; the Ray load driver (:mod:`kvlab.bench.drivers.ray`) uses it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kvlab.bench.workers.ray_pool import RayPool, RaySettings
    from kvlab.bench.workers.worker import LoadWorker

__all__ = [
    "LoadWorker",
    "RayPool",
    "RaySettings",
]

# Each name's module, imported on first use: importing one module of the package
# never imports its siblings (nor the libraries they need).
_HOMES = {
    "RayPool": "kvlab.bench.workers.ray_pool",
    "RaySettings": "kvlab.bench.workers.ray_pool",
    "LoadWorker": "kvlab.bench.workers.worker",
}


def __getattr__(name: str) -> object:
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(_HOMES[name]), name)
