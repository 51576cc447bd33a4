"""The pool of kvlab's own HTTP/1.1 connections (:mod:`kvlab.bench.client.rawhttp`):
keep-alive connections per server, at most N in use, opened ahead of a point's
requests on demand (:meth:`RawPool.warm`)."""

from __future__ import annotations

import asyncio
import contextlib
from array import array
from collections.abc import AsyncIterator

from kvlab.bench.client.rawhttp import Connection, Response, Target
from kvlab.bench.client.rawstamps import keep_kernel_stamps_on


class RawPool:
    """Keep-alive connections per (host, port), at most ``max_connections`` in use.

    ``read_lags_ns`` (with ``keep_read_lags``; 8 bytes per read, else None): for every
    kernel-stamped read, how long the event loop took to handle it after it arrived,
    which is the error a client stamping reads when it handles them would have had
    (empty where the kernel gives no stamps).
    """

    def __init__(self, max_connections: int, keep_read_lags: bool = False) -> None:
        keep_kernel_stamps_on()
        self._slots = asyncio.Semaphore(max_connections)
        self._idle: dict[tuple[str, int], list[Connection]] = {}
        self.read_lags_ns: array[int] | None = array("q") if keep_read_lags else None

    @contextlib.asynccontextmanager
    async def post(self, url: str, headers: dict[str, str],
                   body: bytes) -> AsyncIterator[Response]:
        """``async with pool.post(url, headers, body) as response:`` (body read inside)."""
        target = Target.parse(url)
        head = _request_head("POST", target, headers, len(body))
        async with self._slots:
            conn = await self._connection(target)
            ok = False
            try:
                yield await conn.request(head, body)
                ok = True
            finally:
                if ok and conn.reusable:
                    self._idle.setdefault((target.host, target.port), []).append(conn)
                else:
                    conn.close()

    async def _connection(self, target: Target) -> Connection:
        idle = self._idle.get((target.host, target.port))
        while idle:
            conn = idle.pop()
            if conn.alive():
                conn.reused = True
                return conn
            conn.close()
        return await Connection.open(target.host, target.port, self.read_lags_ns)

    async def warm(self, url: str, count: int) -> int:
        """Open up to ``count`` connections to ``url``'s server ahead of the requests
        (idle ones still open count), so the first requests find them ready; returns
        how many are open and idle. A connection that cannot be opened is left to the
        request that needs it (which records its failure)."""
        target = Target.parse(url)
        idle = self._idle.setdefault((target.host, target.port), [])
        for conn in [c for c in idle if not c.alive()]:
            conn.close()
            idle.remove(conn)
        missing = max(0, count - len(idle))

        async def one() -> Connection | None:
            try:
                return await Connection.open(target.host, target.port, self.read_lags_ns)
            except OSError:
                return None

        opened = await asyncio.gather(*(one() for _ in range(missing)))
        idle += [c for c in opened if c is not None]
        return len(idle)

    def close(self) -> None:
        for conns in self._idle.values():
            for conn in conns:
                conn.close()
        self._idle.clear()


def _request_head(method: str, target: Target, headers: dict[str, str], length: int) -> bytes:
    host = target.host if target.port == 80 else f"{target.host}:{target.port}"
    if ":" in target.host:  # an IPv6 literal
        host = f"[{target.host}]" + ("" if target.port == 80 else f":{target.port}")
    lines = [f"{method} {target.path} HTTP/1.1", f"Host: {host}", f"Content-Length: {length}"]
    lines += [f"{name}: {value}" for name, value in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
