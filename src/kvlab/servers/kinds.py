"""The server kinds an experiment's ``server = "..."`` may name: one registry line each.

Adding a kind (say ``"sglang"``) takes three things:

1. a settings class in its own module, ``servers/sglang.py``: a
   :class:`~kvlab.servers.base.ServerSettings` with ``kind: Literal["sglang"] = "sglang"``,
   its options as fields (the ``[modes.sglang]`` table), ``build(capacity)`` and what
   the checks read of it (``metric_names``, ``kv_pool``; without them the checks say
   "not measured: sglang exposes no ...");
2. in the same module, the server it builds: a
   :class:`~kvlab.servers.process.ServerProcess` subclass giving ``argv()`` and
   ``facts()`` (the base spawns, waits for ``/health``, keeps the log, stops);
3. its settings class added to :data:`ServerSettingsUnion` below.

The experiment file, the run (start, stop, crash checks, manifest), ``--no-launch``
and ``--dry-run`` then know the kind with no other change.
"""

from __future__ import annotations

from typing import Annotated, get_args

from pydantic import Field

from kvlab.servers.base import ServerSettings
from kvlab.servers.embedded import EmbeddedSettings
from kvlab.servers.external import ExternalSettings
from kvlab.servers.llamacpp import LlamaCppSettings
from kvlab.servers.vllm import VllmSettings

# The registry: one settings class per kind, told apart by its ``kind`` field.
ServerSettingsUnion = Annotated[
    EmbeddedSettings | LlamaCppSettings | VllmSettings | ExternalSettings,
    Field(discriminator="kind"),
]

SERVER_KINDS: dict[str, type[ServerSettings]] = {
    cls.model_fields["kind"].default: cls for cls in get_args(get_args(ServerSettingsUnion)[0])
}
"""Kind name -> settings class, in registry order."""

OLD_SPELLINGS: dict[str, str] = {
    old: kind for kind, cls in SERVER_KINDS.items() for old in cls.old_spellings}
"""An older spelling of a kind -> the kind (``"kvlab"`` -> ``"embedded"``)."""


def current_kinds(modes: object) -> list[tuple[str, str]]:
    """Rewrite, in place, the old spellings of kinds in an experiment file's ``modes``
    (their ``server`` and ``[modes.<kind>]`` table); (old, new) per spelling met."""
    met: list[tuple[str, str]] = []
    for mode in modes if isinstance(modes, list) else []:
        if not isinstance(mode, dict):
            continue
        server = mode.get("server")
        if isinstance(server, str) and server in OLD_SPELLINGS:
            mode["server"] = OLD_SPELLINGS[server]
            met.append((server, mode["server"]))
        for old in [k for k in mode if k in OLD_SPELLINGS]:
            new = OLD_SPELLINGS[old]
            if new not in mode:
                mode[new] = mode.pop(old)
                met.append((old, new))
    return list(dict.fromkeys(met))
