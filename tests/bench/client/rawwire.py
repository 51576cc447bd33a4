"""One answer written into a socket pair piece by piece and read back by kvlab's own
client (:class:`~kvlab.bench.client.rawhttp.Connection`, the reader callback of a benchmark):
the faults a real server will not produce on demand (every split, bad framing)."""

from __future__ import annotations

import asyncio
import socket
from dataclasses import dataclass, field

from kvlab.bench.client.rawhttp import Connection

TIMEOUT_S = 5.0


@dataclass
class Answer:
    status: int = 0
    headers: dict[str, str] = field(default_factory=dict)
    pieces: list[bytes] = field(default_factory=list)  # as the sink got them
    reusable: bool = False  # ended cleanly with keep-alive

    @property
    def body(self) -> bytes:
        return b"".join(self.pieces)


async def _exchange(pieces: list[bytes], answer: Answer) -> None:
    loop = asyncio.get_running_loop()
    ours, theirs = socket.socketpair()
    ours.setblocking(False)
    theirs.setblocking(False)
    conn = Connection(ours, loop)

    async def serve() -> None:
        await loop.sock_recv(theirs, 65536)  # the request
        for piece in pieces:
            await loop.sock_sendall(theirs, piece)
            await asyncio.sleep(0)  # let the client read: pieces arrive apart
        theirs.close()  # EOF

    server = asyncio.create_task(serve())
    try:
        async with asyncio.timeout(TIMEOUT_S):
            resp = await conn.request(b"POST / HTTP/1.1\r\nContent-Length: 0\r\n\r\n", b"")
            answer.status, answer.headers = resp.status, resp.headers
            await resp.stream(lambda data, _t: answer.pieces.append(data))
            answer.reusable = conn.reusable
    finally:
        conn.close()
        server.cancel()
        theirs.close()


def exchange(pieces: list[bytes], answer: Answer | None = None) -> Answer:
    """Serve ``pieces`` then close; the answer read (raises what the client raises;
    ``answer`` keeps what came before)."""
    answer = answer if answer is not None else Answer()
    asyncio.run(_exchange(pieces, answer))
    return answer
