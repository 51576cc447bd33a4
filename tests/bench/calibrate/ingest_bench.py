"""Micro-benchmark: how many streamed SSE events per second one client process ingests.

A minimal HTTP/1.1 server in a *separate process* (so it does not share the client's
GIL) streams pre-encoded OpenAI chat chunks (or llama.cpp partials) as fast as the
socket takes them, ``--per-write`` events per write, over keep-alive connections.
The client side is measured two ways on the same server:

- ``harness``: :meth:`kvlab.bench.client.endpoints.HarnessClient.send` (full Record per request)
- ``baseline``: plain aiohttp, ``async for line in resp.content`` + ``json.loads``

Usage (from the repository root):

    .venv/bin/python -m tests.bench.calibrate.ingest_bench --streams 64 --events 2000
    .venv/bin/python -m tests.bench.calibrate.ingest_bench --api llamacpp-completion --per-write 1

Reusable pieces: :func:`start_server` (returns base URL and process) and
:func:`measure` (returns events/s for one client kind).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import time

import aiohttp

from kvlab.bench.client.endpoints import Endpoint, HarnessClient, RequestSpec
from kvlab.rundir import ApiKind, Outcome, RunClock


def _events(api: ApiKind, n: int) -> list[bytes]:
    """n content events plus the API's closing events, each b'data: ...\\n\\n'."""
    out = []
    for i in range(n):
        if api is ApiKind.LLAMACPP_COMPLETION:
            obj = {
                "index": 0,
                "content": f" tok{i}",
                "tokens": [i],
                "stop": False,
                "id_slot": 0,
                "tokens_predicted": i + 1,
                "tokens_evaluated": 12,
            }
        else:
            obj = {
                "id": "chatcmpl-bench",
                "object": "chat.completion.chunk",
                "created": 1,
                "model": "bench",
                "system_fingerprint": "b0-unknown",
                "choices": [{"index": 0, "delta": {"content": f" tok{i}"}, "finish_reason": None}],
            }
        out.append(b"data: " + json.dumps(obj).encode() + b"\n\n")
    if api is ApiKind.LLAMACPP_COMPLETION:
        final = {
            "content": "",
            "stop": True,
            "tokens_predicted": n,
            "tokens_evaluated": 12,
            "truncated": False,
            "stop_type": "limit",
            "timings": {"predicted_n": n},
        }
        out.append(b"data: " + json.dumps(final).encode() + b"\n\n")
    else:
        usage = {"choices": [], "usage": {"prompt_tokens": 12, "completion_tokens": n}}
        out.append(b"data: " + json.dumps(usage).encode() + b"\n\n")
        out.append(b"data: [DONE]\n\n")
    return out


async def _serve(api: ApiKind, n: int, per_write: int) -> None:
    events = _events(api, n)
    writes = [b"".join(events[i : i + per_write]) for i in range(0, len(events), per_write)]
    chunks = [b"%x\r\n%s\r\n" % (len(w), w) for w in writes]
    head = (
        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
    )

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                header = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in header.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":")[1])
                await reader.readexactly(length)
                writer.write(head)
                for chunk in chunks:
                    writer.write(chunk)
                    await writer.drain()
                writer.write(b"0\r\n\r\n")
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    print(server.sockets[0].getsockname()[1], flush=True)
    async with server:
        await server.serve_forever()


def start_server(api: ApiKind, events: int, per_write: int) -> tuple[str, subprocess.Popen]:
    """Start the streaming server in a child process; return (base URL, process)."""
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.bench.calibrate.ingest_bench",
            "--serve",
            "--api",
            api.value,
            "--events",
            str(events),
            "--per-write",
            str(per_write),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    port = int(proc.stdout.readline())
    return f"http://127.0.0.1:{port}", proc


async def measure(
    kind: str, base_url: str, api: ApiKind, streams: int, events: int, rounds: int = 1
) -> float:
    """Events/s ingested by ``kind`` ("harness" or "baseline"), ``streams`` at once."""
    ep = Endpoint(base_url=base_url, api=api, model="bench")
    spec = RequestSpec(prompt="bench", max_tokens=events)
    clock = RunClock()
    counted = 0

    async def harness_one(client: HarnessClient) -> int:
        rec = await client.send(ep, spec, clock)
        assert rec.outcome is Outcome.OK, rec.error
        return len(rec.chunk_ns)

    async def baseline_one(session: aiohttp.ClientSession) -> int:
        n = 0
        async with session.post(ep.url(ep.dialect.path), json={"stream": True}) as resp:
            async for line in resp.content:
                if line.startswith(b"data: "):
                    data = line[6:].strip()
                    if data == b"[DONE]":
                        break
                    json.loads(data)
                    n += 1
        return n

    if kind == "harness":
        async with HarnessClient(max_connections=streams) as client:
            await harness_one(client)  # warm-up: open a connection
            t0 = time.perf_counter()
            for _ in range(rounds):
                counted += sum(await asyncio.gather(*(harness_one(client) for _ in range(streams))))
    else:
        connector = aiohttp.TCPConnector(limit=streams)
        async with aiohttp.ClientSession(connector=connector) as session:
            await baseline_one(session)
            t0 = time.perf_counter()
            for _ in range(rounds):
                counted += sum(
                    await asyncio.gather(*(baseline_one(session) for _ in range(streams)))
                )
    return counted / (time.perf_counter() - t0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--api", default=ApiKind.OPENAI_CHAT.value, choices=[a.value for a in ApiKind])
    ap.add_argument("--streams", type=int, default=64)
    ap.add_argument("--events", type=int, default=2000, help="content events per stream")
    ap.add_argument("--per-write", type=int, default=8, help="events per server write")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    api = ApiKind(args.api)
    if args.serve:
        asyncio.run(_serve(api, args.events, args.per_write))
        return
    base_url, proc = start_server(api, args.events, args.per_write)
    try:
        for kind in ("baseline", "harness", "baseline", "harness"):
            rate = asyncio.run(measure(kind, base_url, api, args.streams, args.events, args.rounds))
            print(
                f"{kind:9s} {api.value} streams={args.streams} events={args.events} "
                f"per_write={args.per_write}: {rate:,.0f} events/s",
                flush=True,
            )
    finally:
        proc.terminate()
        proc.wait(10)


if __name__ == "__main__":
    main()
