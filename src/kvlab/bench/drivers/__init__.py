"""Load drivers: what sends a run's requests (in this process, over Ray workers, or in
memory for tests).

One file per driver, each a settings class (what a run's manifest keeps, so a resume
uses the driver again) and the driver it builds, behind the interface
(:mod:`~kvlab.bench.drivers.driver`: :class:`LoadDriver`, :class:`DriverSettings`) and
the registry (:mod:`~kvlab.bench.drivers.kinds`). The executor (:mod:`kvlab.run`)
sends every request of a run through one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kvlab.bench.drivers.driver import DriverSettings, LoadDriver
    from kvlab.bench.drivers.inprocess import InProcessSettings
    from kvlab.bench.drivers.kinds import DRIVER_KINDS, DriverSettingsUnion
    from kvlab.bench.drivers.memory import MemorySettings
    from kvlab.bench.drivers.ray import RayDriverSettings

__all__ = [
    "DRIVER_KINDS",
    "DriverSettings",
    "DriverSettingsUnion",
    "InProcessSettings",
    "LoadDriver",
    "MemorySettings",
    "RayDriverSettings",
]

# Each name's module, imported on first use: importing one module of the package
# never imports its siblings (nor the libraries they need).
_HOMES = {
    "DriverSettings": "kvlab.bench.drivers.driver",
    "LoadDriver": "kvlab.bench.drivers.driver",
    "InProcessSettings": "kvlab.bench.drivers.inprocess",
    "DRIVER_KINDS": "kvlab.bench.drivers.kinds",
    "DriverSettingsUnion": "kvlab.bench.drivers.kinds",
    "MemorySettings": "kvlab.bench.drivers.memory",
    "RayDriverSettings": "kvlab.bench.drivers.ray",
}


def __getattr__(name: str) -> object:
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(_HOMES[name]), name)
