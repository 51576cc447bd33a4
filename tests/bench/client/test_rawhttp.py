"""kvlab's own HTTP/1.1 client: framing, heads, pooling and kernel receive stamps.

Whole exchanges against real servers (aiohttp, the embedded and synthetic servers,
llama-server) go through it in test_endpoints.py and the integration tests; here are
the parts a server will not exercise on demand (every split of a chunked body, bad
framing), through :mod:`tests.bench.client.rawwire`.
"""

from __future__ import annotations

import asyncio
import sys
import time

import pytest

from kvlab.bench.client.rawhttp import Disconnected, ProtocolError, Target
from kvlab.bench.client.rawpool import RawPool
from tests.bench.client.rawwire import Answer, exchange
from tests.lateness import LatenessProbe

CHUNKED = b"5\r\nhello\r\n7;ext=1\r\n, world\r\n0\r\n\r\n"
HEAD = b"HTTP/1.1 200 OK\r\n"
CHUNKED_HEAD = HEAD + b"Transfer-Encoding: chunked\r\n\r\n"


def test_chunked_body_survives_every_split():
    for i in range(len(CHUNKED) + 1):
        for j in range(i, len(CHUNKED) + 1):
            answer = exchange([CHUNKED_HEAD + CHUNKED[:i], CHUNKED[i:j], CHUNKED[j:]])
            assert (answer.body, answer.reusable) == (b"hello, world", True), (i, j)


def test_chunked_incomplete_is_not_done_and_bad_size_is_refused():
    answer = Answer()
    with pytest.raises(Disconnected):
        exchange([CHUNKED_HEAD, b"5\r\nhel"], answer)
    assert answer.body == b"hel"
    with pytest.raises(Disconnected):  # done only at the blank line
        exchange([CHUNKED_HEAD, b"1\r\nx\r\n0\r\nX-Trailer: 1\r\n"])
    answer = exchange([CHUNKED_HEAD, b"1\r\nx\r\n0\r\nX-Trailer: 1\r\n", b"\r\n"])
    assert (answer.body, answer.reusable) == (b"x", True)
    assert "x-trailer" not in answer.headers
    with pytest.raises(ProtocolError, match="chunk size"):
        exchange([CHUNKED_HEAD, b"zz\r\n"])
    with pytest.raises(ProtocolError, match="after chunk data"):  # its CRLF
        exchange([CHUNKED_HEAD, b"2\r\nabXY"])


def test_content_length_and_read_to_close():
    answer = exchange([HEAD + b"Content-Length: 5\r\n\r\nabc", b"deEXTRA"])
    assert (answer.body, answer.reusable) == (b"abcde", True)
    assert exchange([HEAD + b"Content-Length: 0\r\n\r\n"]).body == b""
    assert exchange([b"HTTP/1.1 204 No Content\r\n\r\n"]).reusable
    closing = exchange([HEAD + b"\r\n", b"anything"])
    assert (closing.body, closing.reusable) == (b"anything", False)
    answer = exchange([HEAD + b"Content-Length: 3\r\nConnection: close\r\n\r\nabc"])
    assert (answer.body, answer.reusable) == (b"abc", False)
    with pytest.raises(ProtocolError):
        exchange([HEAD + b"Content-Length: x\r\n\r\n"])


def test_head():
    answer = exchange([HEAD + b"Content-Type: text/event-stream\r\nX-A:  b \r\n"
                       b"Content-Length: 0\r\n\r\n"])
    assert answer.status == 200
    assert answer.headers == {"content-type": "text/event-stream", "x-a": "b",
                              "content-length": "0"}
    assert not exchange([b"HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n"]).reusable
    with pytest.raises(ProtocolError, match="status line"):
        exchange([b"SSH-2.0-OpenSSH_9.2\r\n"])


def test_target_parse():
    assert Target.parse("http://h:8080/v1/x?a=1") == Target("h", 8080, "/v1/x?a=1")
    assert Target.parse("http://h") == Target("h", 80, "/")
    with pytest.raises(ValueError, match="plain http"):
        Target.parse("https://h/x")


async def _serve_once(handler):
    server = await asyncio.start_server(handler, "127.0.0.1", 0)
    return server, f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"


async def _read_request(reader: asyncio.StreamReader) -> bytes:
    head = await reader.readuntil(b"\r\n\r\n")
    length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n")
                  if line.lower().startswith(b"content-length"))
    return head + await reader.readexactly(length)


def test_request_bytes_keep_alive_and_stream():
    seen: list[bytes] = []

    async def handler(reader, writer):
        for _ in range(2):  # two requests on one connection
            seen.append(await _read_request(reader))
            writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                         b"3\r\nabc\r\n")
            await writer.drain()
            await asyncio.sleep(0.02)
            writer.write(b"2\r\nde\r\n0\r\n\r\n")
            await writer.drain()
        writer.close()

    async def go():
        server, url = await _serve_once(handler)
        pool = RawPool(1)
        pieces: list[tuple[bytes, int]] = []
        async with server:
            for _ in range(2):
                async with pool.post(url + "/completion", {"X-K": "v"}, b'{"a":1}') as resp:
                    assert resp.status == 200
                    await resp.stream(lambda data, t: pieces.append((data, t)))
        pool.close()
        return pieces

    pieces = asyncio.run(go())
    assert len(seen) == 2  # the second request reused the connection
    assert seen[0].startswith(b"POST /completion HTTP/1.1\r\nHost: 127.0.0.1:")
    assert b"\r\nX-K: v\r\n" in seen[0] and seen[0].endswith(b'\r\n\r\n{"a":1}')
    body = b"".join(p for p, _ in pieces)
    assert body == b"abcdeabcde"
    stamps = [t for _, t in pieces]
    assert stamps == sorted(stamps)


def test_server_closing_mid_body_is_disconnected_not_stale():
    async def handler(reader, writer):
        await _read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc")
        await writer.drain()
        writer.close()

    async def go():
        server, url = await _serve_once(handler)
        async with server, RawPool(1).post(url, {}, b"") as resp:
            await resp.read()

    with pytest.raises(Disconnected) as info:
        asyncio.run(go())
    assert not info.value.stale


@pytest.mark.skipif(sys.platform != "linux", reason="kernel receive stamps are Linux's")
def test_a_late_read_keeps_the_kernel_arrival_time():
    """Bytes that wait 80 ms in the socket while the loop is blocked are stamped with
    when they arrived, not when they were read."""
    sent_at: list[int] = []
    unblocked_at: list[int] = []

    async def handler(reader, writer):
        await _read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
        await writer.drain()
        await asyncio.sleep(0.05)
        sent_at.append(time.perf_counter_ns())
        writer.write(b"1\r\nx\r\n0\r\n\r\n")
        await writer.drain()
        time.sleep(0.08)  # block the loop: the client cannot read meanwhile
        unblocked_at.append(time.perf_counter_ns())

    async def go():
        server, url = await _serve_once(handler)
        got: list[tuple[int, int]] = []
        async with server, RawPool(1).post(url, {}, b"") as resp:
            await resp.stream(lambda data, t: got.append((t, time.perf_counter_ns())))
        return got

    got = asyncio.run(go())
    (arrived, handled), = got
    assert handled >= unblocked_at[0]  # read after the 80 ms block
    # Stamped when it came: before the block ended, which a stamp taken at the read
    # cannot be, however late this machine runs either side.
    assert sent_at[0] <= arrived < unblocked_at[0]


def test_wall_offset_is_read_in_one_narrow_bracket(monkeypatch):
    """A pause between reading the two clocks must not shift the offset (it shifted
    every kernel stamp late by the pause, so stamps landed after their read and were
    dropped: read_lag_ns None)."""
    from kvlab.bench.client import rawstamps

    real = time.time_ns
    calls = iter(range(1000))

    def slow_first(*_a):
        if next(calls) == 0:
            time.sleep(0.02)  # a thread switch between the two reads
        return real()

    def true_offset() -> int:  # the narrowest of many brackets: no pause inside it
        _width, offset = min((after - before, wall - (before + after) // 2)
                            for before, wall, after in
                            ((time.perf_counter_ns(), real(), time.perf_counter_ns())
                             for _ in range(50)))
        return offset

    with LatenessProbe() as probe:
        truth = true_offset()
        monkeypatch.setattr(rawstamps.time, "time_ns", slow_first)
        offset = rawstamps._WallClock().offset_ns(time.perf_counter_ns())
        monkeypatch.setattr(rawstamps.time, "time_ns", real)
    # Off by the 20 ms pause if it was read across it; else by at most a preemption of
    # every one of its narrower brackets (one wait for the CPU).
    assert abs(offset - truth) < probe.allow_ms(2.0, hops=1) * 1e6, probe


@pytest.mark.skipif(sys.platform != "linux", reason="kernel receive stamps are Linux's")
def test_kernel_stamps_are_kept_on():
    from kvlab.bench.client.rawstamps import keep_kernel_stamps_on

    assert keep_kernel_stamps_on() is True
    assert keep_kernel_stamps_on() is True  # once per process
