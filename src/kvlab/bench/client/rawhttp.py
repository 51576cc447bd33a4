"""kvlab's own HTTP/1.1 client for plain ``http://``: streams read with kernel timestamps.

Why not aiohttp here: a client that stamps a network read when its coroutine resumes
reads late whenever the event loop is busy with other streams (at 256 streams a
request's set-up alone delays everyone else's tokens by ~0.4 ms). This client asks the
kernel to stamp every received segment (``SO_TIMESTAMPNS``) and reads with
``recvmsg``: each read carries the time its last byte reached the machine's TCP stack,
however late the loop gets to it. Where the kernel gives no stamp (not Linux), the
read is stamped when it is made, as aiohttp reads are.

Scope: what benchmark servers send (llama-server, vLLM/uvicorn, the embedded and
synthetic servers): one request at a time per connection, ``Content-Length``,
``chunked`` or read-to-close bodies, keep-alive with a bounded pool. No TLS, proxies,
redirects, compression or cookies; :class:`~kvlab.bench.client.endpoints.HarnessClient` uses
aiohttp for ``https://``.

Reads are pushed, not pulled: the loop's reader callback does ``recvmsg`` and feeds
the bytes to httptools (llhttp, the C parser of uvicorn and aiohttp), whose callbacks
hand ``(body bytes, t_ns)`` straight to the caller's sink, with no coroutine switch per
read. ``t_ns`` is ``perf_counter_ns`` time: every piece of body a read carries has the
read's stamp. (h11 was tried too: at 256 streams the loop's read lag grew 3-8 times
and one run in four had a 53 ms p99 gap error; httptools stayed within noise.)

Errors: :class:`Disconnected` (an ``OSError``) when the server closes or resets the
connection before the answer is complete; ``stale`` is set when that happened on a
reused connection before any byte of the answer (the request can be sent again).
:class:`ProtocolError` (a ``ValueError``) for a response that is not HTTP/1.x or whose
framing is wrong (a bad ``Content-Length`` or chunk size, no CRLF after a chunk).

The kernel's stamps and their clock are :mod:`kvlab.bench.client.rawstamps`; the pool
of keep-alive connections (and their warm-up) is :mod:`kvlab.bench.client.rawpool`.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import time
from array import array
from collections.abc import Callable
from dataclasses import dataclass, field
from urllib.parse import urlsplit

import httptools

from kvlab.bench.client.rawstamps import (
    ANC_SIZE,
    RAW_SUPPORTED,
    SO_TIMESTAMPNS,
    TIMESPEC,
    WALL,
)

__all__ = ["RAW_SUPPORTED", "Connection", "Disconnected", "ProtocolError", "Response",
           "Sink", "Target"]

READ_SIZE = 256 * 1024

Sink = Callable[[bytes, int], None]  # body bytes, arrival time (perf_counter ns)


MAX_HEAD_BYTES = 64 * 1024


class ProtocolError(ValueError):
    """Bytes that are not an HTTP/1.x response."""


class Disconnected(ConnectionError):
    """The connection ended before the answer did."""

    def __init__(self, message: str, stale: bool = False) -> None:
        super().__init__(message)
        self.stale = stale  # on a reused connection, before any byte: safe to resend


@dataclass(frozen=True)
class Target:
    """Where one request goes: host, port and the path with its query."""

    host: str
    port: int
    path: str

    @classmethod
    def parse(cls, url: str) -> Target:
        parts = urlsplit(url)
        if parts.scheme != "http" or not parts.hostname:
            raise ValueError(f"not a plain http:// URL: {url!r}")
        path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        return cls(parts.hostname, parts.port or 80, path)


@dataclass
class Response:
    """Status and headers of an answer; its body is taken with :meth:`read` or :meth:`stream`."""

    status: int
    headers: dict[str, str]  # names lower-cased; a repeated header keeps its last value
    t_head_ns: int  # arrival of the read that completed the head (perf_counter ns)
    _conn: Connection = field(repr=False)

    async def read(self) -> bytes:
        """The whole body."""
        parts: list[bytes] = []
        await self._conn.body(lambda data, _t: parts.append(data))
        return b"".join(parts)

    async def stream(self, sink: Sink) -> None:
        """Hand each piece of body to ``sink(data, t_ns)`` as it arrives; return at its end."""
        await self._conn.body(sink)

    @property
    def connection(self) -> Connection:
        """The connection it came on (its set-up and write stamps)."""
        return self._conn

    @property
    def max_lag_ns(self) -> int | None:
        """Most a read of this answer waited before the loop took it (ns); None when no
        read carried a kernel stamp."""
        return self._conn.exchange_lag_ns


class Connection:
    """One socket to one server, used for one exchange at a time; httptools (llhttp)
    does the framing, called back from :meth:`_on_readable`."""

    def __init__(self, sock: socket.socket, loop: asyncio.AbstractEventLoop,
                 lags: array[int] | None = None) -> None:
        self.sock = sock
        self._loop = loop
        self._fd = sock.fileno()
        self.reused = False
        self.reusable = False  # set when an answer ended cleanly with keep-alive
        # Per kernel-stamped read: how long after its arrival the loop handled it (ns);
        # None: not kept.
        self.lags = lags
        self.exchange_lag_ns: int | None = None  # the most of those, this exchange
        # connection set-up (perf_counter ns): resolving and connecting began, and the
        # socket was connected; 0 until :meth:`open` sets them
        self.t_connect_start = 0
        self.t_connected = 0
        self.t_written = 0  # the last request's bytes handed to the kernel (perf ns)
        self.exchanges = 0  # requests sent on this connection
        # how long a callback queued as the request was written waited for the event
        # loop (ns): the loop's lag at the send; None until it ran
        self.loop_lag_ns: int | None = None
        self._parser = httptools.HttpResponseParser(self)
        self._fields: dict[str, str] = {}
        self._status = 0  # of the final answer, once its head is complete
        self._complete = False
        self._got = False  # any byte of the answer received
        self._head_bytes = 0  # received while the head is incomplete
        self._t = 0  # arrival of the read being parsed
        self._head_t = 0
        self._early: list[tuple[bytes, int]] = []  # body bytes before body() was called
        self._error: BaseException | None = None  # found before body() was called
        self._sink: Sink | None = None
        self._done: asyncio.Future[None] | None = None

    @classmethod
    async def open(cls, host: str, port: int, lags: array[int] | None = None) -> Connection:
        loop = asyncio.get_running_loop()
        t_start = time.perf_counter_ns()
        infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        last: OSError | None = None
        for family, type_, proto, _name, addr in infos:
            sock = socket.socket(family, type_, proto)
            try:
                sock.setblocking(False)
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                if SO_TIMESTAMPNS is not None:
                    with contextlib.suppress(OSError):
                        sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
                await loop.sock_connect(sock, addr)
                conn = cls(sock, loop, lags)
                conn.t_connect_start, conn.t_connected = t_start, time.perf_counter_ns()
                return conn
            except OSError as exc:
                sock.close()
                last = exc
        raise last or OSError(f"cannot resolve {host}")

    def alive(self) -> bool:
        """False when an idle connection was closed by the server (EOF or data waiting)."""
        try:
            self.sock.recv(1, socket.MSG_PEEK)
        except (BlockingIOError, InterruptedError):
            return True  # nothing to read: open and quiet
        except OSError:
            return False
        return False  # EOF, or bytes nobody asked for: either way not reusable

    def close(self) -> None:
        self._stop_reading()
        self.reusable = False
        with contextlib.suppress(OSError):
            self.sock.close()

    # -- one exchange --------------------------------------------------------------

    async def request(self, head: bytes, body: bytes) -> Response:
        """Send a request and wait for the head of its answer."""
        self.reusable = self._complete = self._got = False
        self._head_bytes = 0
        self.exchange_lag_ns = None
        self._fields, self._status, self._early, self._sink, self._error = {}, 0, [], None, None
        self.exchanges += 1
        self.loop_lag_ns = None
        try:
            self.t_written = time.perf_counter_ns()
            await self._loop.sock_sendall(self.sock, head + body)
            self._loop.call_soon(self._loop_probe, time.perf_counter_ns())
        except OSError as exc:  # a reused connection the server has closed, typically
            raise Disconnected(f"{type(exc).__name__}: {exc}", stale=self.reused) from exc
        await self._wait()
        return Response(self._status, self._fields, self._head_t, self)

    def _loop_probe(self, queued_ns: int) -> None:
        self.loop_lag_ns = time.perf_counter_ns() - queued_ns

    async def body(self, sink: Sink) -> None:
        """Feed the body to ``sink`` until it ends."""
        if not self._status:
            raise RuntimeError("body() before a response head")
        self._sink = sink
        for data, t in self._early:  # body bytes that came in the head's read
            sink(data, t)
        if self._error is not None:
            raise self._error
        if not self._complete:
            await self._wait()

    async def _wait(self) -> None:
        """Read the socket until the parser's callbacks settle ``_done``."""
        self._done = self._loop.create_future()
        self._loop.add_reader(self._fd, self._on_readable)
        try:
            await self._done
        finally:
            self._stop_reading()

    # -- the parser's callbacks -------------------------------------------------------

    def on_header(self, name: bytes, value: bytes) -> None:
        if not self._status:  # (a trailer field after the body is not a header)
            self._fields[name.decode("latin-1").lower()] = value.decode("latin-1").strip()

    def on_headers_complete(self) -> None:
        status = self._parser.get_status_code()
        if 100 <= status < 200:
            self._fields = {}  # an interim answer (100 Continue); the real one follows
            return
        self._status, self._head_t = status, self._t
        self._finish(None)

    def on_body(self, data: bytes) -> None:
        if self._sink is None:
            self._early.append((data, self._t))
        else:
            self._sink(data, self._t)

    def on_message_complete(self) -> None:
        if self._status:
            self._complete = True
            self.reusable = self._parser.should_keep_alive()
            self._finish(None)

    # -- the reader callback (hot path) ---------------------------------------------

    def _on_readable(self) -> None:
        try:
            data, anc, _flags, _addr = self.sock.recvmsg(READ_SIZE, ANC_SIZE)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:
            self._finish(Disconnected(f"{type(exc).__name__}: {exc}", stale=self._stale()))
            return
        now = time.perf_counter_ns()
        t = now
        if anc and anc[0][1] == SO_TIMESTAMPNS:
            sec, nsec = TIMESPEC.unpack_from(anc[0][2])
            kernel = sec * 1_000_000_000 + nsec - WALL.offset_ns(now)
            if kernel < now:  # a clock step could put it in the future: keep ours then
                t = kernel
                lag = now - kernel
                if self.lags is not None:
                    self.lags.append(lag)
                if self.exchange_lag_ns is None or lag > self.exchange_lag_ns:
                    self.exchange_lag_ns = lag
        if not data:
            self._on_eof()
            return
        self._t, self._got = t, True
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserCallbackError as exc:  # the caller's sink refused
            self._fail(exc.__context__ or exc)
        except httptools.HttpParserError as exc:
            if not self._complete:  # (bytes after a complete answer are not ours)
                what = "bad framing" if self._status else "not an HTTP/1.x status line or head"
                self._fail(ProtocolError(f"{what}: {exc}"))
        if not self._status:
            self._head_bytes += len(data)
            if self._head_bytes > MAX_HEAD_BYTES:
                self._fail(ProtocolError("response head over 64 KiB"))

    def _on_eof(self) -> None:
        fields = self._fields
        if (self._status and "content-length" not in fields
                and "chunked" not in fields.get("transfer-encoding", "").lower()):
            self._complete = True
            self._finish(None)  # a read-to-close body ends here
            return
        self._finish(Disconnected("the server closed the connection", stale=self._stale()))

    def _fail(self, exc: BaseException) -> None:
        self._error = exc  # body() raises it if the head's future had settled already
        self._finish(exc)

    def _stale(self) -> bool:
        return self.reused and not self._got

    def _finish(self, exc: BaseException | None) -> None:
        self._stop_reading()
        done = self._done
        if done is not None and not done.done():
            if exc is None:
                done.set_result(None)
            else:
                done.set_exception(exc)

    def _stop_reading(self) -> None:
        with contextlib.suppress(ValueError, OSError):
            self._loop.remove_reader(self._fd)
