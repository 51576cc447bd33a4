"""Talking HTTP: endpoints, kvlab's own HTTP/1.1 client (kernel stamps), SSE, responses.

An :class:`Endpoint` (a base URL and its API) and a :class:`RequestSpec` (one request to
send) go through a :class:`HarnessClient`, which hands back the request's
:class:`~kvlab.records.Record`; the transport's facts sit beside the dialect's
(responses), ``/metrics`` is polled and parsed (gauges), and ``/v1/models`` is checked
before a run (models).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kvlab.bench.client.endpoints import (
        Endpoint,
        HarnessClient,
        RequestSpec,
        build_body,
        record_of,
    )

__all__ = [
    "Endpoint",
    "HarnessClient",
    "RequestSpec",
    "build_body",
    "record_of",
]

# Each name's module, imported on first use: importing one module of the package
# never imports its siblings (nor the libraries they need).
_HOMES = {
    "Endpoint": "kvlab.bench.client.endpoints",
    "HarnessClient": "kvlab.bench.client.endpoints",
    "RequestSpec": "kvlab.bench.client.endpoints",
    "build_body": "kvlab.bench.client.endpoints",
    "record_of": "kvlab.bench.client.endpoints",
}


def __getattr__(name: str) -> object:
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(_HOMES[name]), name)
