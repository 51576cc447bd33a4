"""kvlab beside the peers' own clients: their environments and the cross-check.

GuideLLM, AIPerf and vLLM's ``bench serve`` are installed in environments of their own
(:mod:`.envs`, ``kvlab peers setup``), never in kvlab's. The cross-check
(:func:`run_crosscheck`, ``kvlab peers crosscheck``) has all four clients, kvlab's
included, measure the synthetic server on one known schedule, in rounds, and states
each one's TTFT and ITL error against that schedule (:mod:`.accuracy`); its result is
:class:`CrossCheck` (``crosscheck.json``). Each peer's result file is read back by
:mod:`kvlab.peers` and checked against what the peer printed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kvlab.crosscheck.result import CrossCheck
    from kvlab.crosscheck.rounds import run_crosscheck

__all__ = [
    "CrossCheck",
    "run_crosscheck",
]

# Each name's module, imported on first use: importing one module of the package
# never imports its siblings (nor the libraries they need).
_HOMES = {
    "CrossCheck": "kvlab.crosscheck.result",
    "run_crosscheck": "kvlab.crosscheck.rounds",
}


def __getattr__(name: str) -> object:
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(_HOMES[name]), name)
