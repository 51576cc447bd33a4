"""API dialects: what each HTTP API kvlab speaks means, one object per API.

:mod:`kvlab.api.dialects` is the registry (:class:`ApiKind` and the dialect of each,
:func:`dialect_of`); :mod:`kvlab.api.dialect` the interface every dialect meets
(:class:`Dialect`); one module per dialect (:mod:`~kvlab.api.llamacpp`,
:mod:`~kvlab.api.openai_chat`, :mod:`~kvlab.api.openai_completion`,
:mod:`~kvlab.api.openai_responses`, :mod:`~kvlab.api.anthropic_messages`,
:mod:`~kvlab.api.openai_embeddings`); what an answer says, read into
:class:`AnswerFacts` (facts), and what names an answer of the wrong API
(:mod:`~kvlab.api.sniff`). The benchmark client, prompt sizing, calibration,
``kvlab serve`` and the synthetic server all go through it, so this package imports
nothing else of kvlab.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kvlab.api.dialect import Dialect
    from kvlab.api.dialects import DIALECTS, ApiKind, dialect_of
    from kvlab.api.facts import AnswerFacts, MalformedResponse, WrongApi

__all__ = [
    "DIALECTS",
    "AnswerFacts",
    "ApiKind",
    "Dialect",
    "MalformedResponse",
    "WrongApi",
    "dialect_of",
]

# Each name's module, imported on first use: importing one module of the package
# never imports its siblings (nor the libraries they need).
_HOMES = {
    "Dialect": "kvlab.api.dialect",
    "DIALECTS": "kvlab.api.dialects",
    "ApiKind": "kvlab.api.dialects",
    "dialect_of": "kvlab.api.dialects",
    "AnswerFacts": "kvlab.api.facts",
    "MalformedResponse": "kvlab.api.facts",
    "WrongApi": "kvlab.api.facts",
}


def __getattr__(name: str) -> object:
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(_HOMES[name]), name)
