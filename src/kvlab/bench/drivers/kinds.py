"""The load drivers a run can use: one settings class per driver, each building it (see
:mod:`kvlab.bench.drivers.driver`).

Adding a driver is one file (its settings and the driver) and one line here. The CLI
chooses the Ray driver for ``--workers``/``--ray-address``/``--workers-per-node`` and
an experiment's ``[load] workers = N``; a run's manifest keeps the driver's settings
(``workers``) so a resume uses it again.
"""

from __future__ import annotations

from typing import Annotated, Any, get_args

from pydantic import Field, TypeAdapter

from kvlab.bench.drivers.driver import DriverSettings
from kvlab.bench.drivers.inprocess import InProcessSettings
from kvlab.bench.drivers.memory import MemorySettings
from kvlab.bench.drivers.ray import RayDriverSettings

# The registry: one settings class per driver, told apart by its ``kind`` field.
DriverSettingsUnion = Annotated[
    InProcessSettings | RayDriverSettings | MemorySettings,
    Field(discriminator="kind"),
]

DRIVER_KINDS: dict[str, type[DriverSettings]] = {
    cls.model_fields["kind"].default: cls for cls in get_args(get_args(DriverSettingsUnion)[0])
}
"""Kind name -> settings class, in registry order."""

_ADAPTER: TypeAdapter[DriverSettings] = TypeAdapter(DriverSettingsUnion)


def saved_driver(saved: dict[str, Any] | None) -> DriverSettings | None:
    """The driver a run's manifest keeps (``workers``); None: none was kept. A manifest
    from before drivers had kinds holds Ray's settings without one."""
    if saved is None:
        return None
    return _ADAPTER.validate_python({"kind": RayDriverSettings().kind, **saved})


def workers_driver(count: int) -> DriverSettings:
    """The driver of an experiment's ``[load] workers = N``: N Ray workers."""
    return RayDriverSettings(count=count)
