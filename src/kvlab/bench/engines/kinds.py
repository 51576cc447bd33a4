"""The load engines a run can use: one settings class per engine, each building it (see
:mod:`kvlab.bench.engines.engine`).

Adding an engine is one file (its settings and the engine) and one line here. The CLI
chooses the Ray engine for ``--workers``/``--ray-address``/``--workers-per-node`` and
an experiment's ``[load] workers = N``; a run's manifest keeps the engine's settings
(``workers``) so a resume uses it again.
"""

from __future__ import annotations

from typing import Annotated, Any, get_args

from pydantic import Field, TypeAdapter

from kvlab.bench.engines.engine import EngineSettings
from kvlab.bench.engines.inprocess import InProcessSettings
from kvlab.bench.engines.memory import MemorySettings
from kvlab.bench.engines.ray import RayEngineSettings

# The registry: one settings class per engine, told apart by its ``kind`` field.
EngineSettingsUnion = Annotated[
    InProcessSettings | RayEngineSettings | MemorySettings,
    Field(discriminator="kind"),
]

ENGINE_KINDS: dict[str, type[EngineSettings]] = {
    cls.model_fields["kind"].default: cls for cls in get_args(get_args(EngineSettingsUnion)[0])
}
"""Kind name -> settings class, in registry order."""

_ADAPTER: TypeAdapter[EngineSettings] = TypeAdapter(EngineSettingsUnion)


def saved_engine(saved: dict[str, Any] | None) -> EngineSettings | None:
    """The engine a run's manifest keeps (``workers``); None: none was kept. A manifest
    from before engines had kinds holds Ray's settings without one."""
    if saved is None:
        return None
    return _ADAPTER.validate_python({"kind": RayEngineSettings().kind, **saved})


def workers_engine(count: int) -> EngineSettings:
    """The engine of an experiment's ``[load] workers = N``: N Ray workers."""
    return RayEngineSettings(count=count)
