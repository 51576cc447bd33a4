"""Server kinds: their settings, the servers they build, and the processes kvlab launches.

A run measures a :class:`Server`, built by its kind's :class:`ServerSettings` (the
``[modes.<kind>]`` table; the registry :data:`SERVER_KINDS`, :data:`ServerSettingsUnion`);
a kind kvlab launches derives :class:`ServerProcess`. Beside them: llama-server's build,
binary, smoke check and KV log check, the model fetch, the preflight, and vLLM's own
environment and checkpoint.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kvlab.servers.base import Server, ServerSettings
    from kvlab.servers.kinds import SERVER_KINDS, ServerSettingsUnion
    from kvlab.servers.process import ServerProcess

__all__ = [
    "SERVER_KINDS",
    "Server",
    "ServerProcess",
    "ServerSettings",
    "ServerSettingsUnion",
]

# Each name's module, imported on first use: importing one module of the package
# never imports its siblings (nor the libraries they need).
_HOMES = {
    "Server": "kvlab.servers.base",
    "ServerSettings": "kvlab.servers.base",
    "SERVER_KINDS": "kvlab.servers.kinds",
    "ServerSettingsUnion": "kvlab.servers.kinds",
    "ServerProcess": "kvlab.servers.process",
}


def __getattr__(name: str) -> object:
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(_HOMES[name]), name)
