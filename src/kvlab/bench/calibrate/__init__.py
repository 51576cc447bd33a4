"""Checking the client itself: its timestamp error and ingest limit against the synthetic
server, in one process or over load workers (``kvlab calibrate``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kvlab.bench.calibrate.check import CalibrateSettings, CalibrationReport, calibrate

__all__ = [
    "CalibrateSettings",
    "CalibrationReport",
    "calibrate",
]

# Each name's module, imported on first use: importing one module of the package
# never imports its siblings (nor the libraries they need).
_HOMES = {
    "CalibrateSettings": "kvlab.bench.calibrate.check",
    "CalibrationReport": "kvlab.bench.calibrate.check",
    "calibrate": "kvlab.bench.calibrate.check",
}


def __getattr__(name: str) -> object:
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(_HOMES[name]), name)
