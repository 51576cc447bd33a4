"""Sessions as the unit of load: conversations and agent traces whose turns wait for the
server's previous answer. The data model (turn: :class:`SessionTurn`), the readers of
each dataset kind (jsonl, sharegpt, weka, synthetic) and their sizing (rows), and the
loops that send sessions (runner: :class:`SessionGraph`, :class:`SessionRun`); the
``sessions`` load kind is :mod:`kvlab.bench.plan.loads.sessions`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kvlab.bench.plan.sessions.runner import SessionGraph, SessionRun
    from kvlab.bench.plan.sessions.turn import SessionTurn

__all__ = [
    "SessionGraph",
    "SessionRun",
    "SessionTurn",
]

# Each name's module, imported on first use: importing one module of the package
# never imports its siblings (nor the libraries they need).
_HOMES = {
    "SessionGraph": "kvlab.bench.plan.sessions.runner",
    "SessionRun": "kvlab.bench.plan.sessions.runner",
    "SessionTurn": "kvlab.bench.plan.sessions.turn",
}


def __getattr__(name: str) -> object:
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(_HOMES[name]), name)
