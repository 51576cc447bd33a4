"""Connection set-up and the request written, stamped through aiohttp's trace hooks.

kvlab's own client (:mod:`kvlab.bench.client.rawhttp`) stamps its connections itself;
aiohttp (``https://``, or ``http_client = "aiohttp"``) reports them through a
``TraceConfig``: a new connection's start and end (TCP and TLS end together there, so
for ``https://`` the end is "TLS done" and ``t_connected`` stays None), a pooled
connection reused, and the request's headers sent (the request written). The stamps go
into the exchange's :class:`~kvlab.bench.client.responses.ResponseFacts` on the run's
clock.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any

import aiohttp

from kvlab.bench.client.responses import ResponseFacts
from kvlab.rundir import RunClock


@dataclass
class SetupStamps:
    """What aiohttp's trace hooks stamp on one request (run clock ns into ``facts``)."""

    clock: RunClock
    facts: ResponseFacts
    tls: bool  # https://: the connection's end is TLS done


def setup_trace() -> aiohttp.TraceConfig:
    """aiohttp's hooks for the connection set-up and the request written: a new
    connection's start and end (TCP and TLS together: for ``https://`` its end is TLS
    done), a pooled one as reused, and the request's headers sent."""
    config = aiohttp.TraceConfig()

    def stamps(ctx: Any) -> SetupStamps | None:
        found = ctx.trace_request_ctx
        return found if isinstance(found, SetupStamps) else None

    async def create_start(_s: Any, ctx: Any, _p: Any) -> None:
        if (st := stamps(ctx)) is not None:
            st.facts.t_connect_start = st.clock.now()
            st.facts.connection_reused = False

    async def create_end(_s: Any, ctx: Any, _p: Any) -> None:
        if (st := stamps(ctx)) is not None:
            now = st.clock.now()  # (TCP and TLS end together here)
            if st.tls:
                st.facts.t_tls = now
            else:
                st.facts.t_connected = now

    async def reuse(_s: Any, ctx: Any, _p: Any) -> None:
        if (st := stamps(ctx)) is not None:
            st.facts.connection_reused = True

    async def headers_sent(_s: Any, ctx: Any, _p: Any) -> None:
        if (st := stamps(ctx)) is not None:
            st.facts.t_written = st.clock.now()
            loop = asyncio.get_running_loop()
            loop.call_soon(_loop_probe, st.facts, time.perf_counter_ns())

    config.on_connection_create_start.append(create_start)
    config.on_connection_create_end.append(create_end)
    config.on_connection_reuseconn.append(reuse)
    config.on_request_headers_sent.append(headers_sent)
    return config


def _loop_probe(facts: ResponseFacts, queued_ns: int) -> None:
    """The event loop's lag at the send: how long a callback queued then waited."""
    facts.loop_lag_ns = time.perf_counter_ns() - queued_ns
