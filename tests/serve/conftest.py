"""Real kvlab servers on loopback (uvicorn in a thread), with small contexts."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from kvlab.engine import build_model, get_preset
from kvlab.serve import BackgroundServer, ServeSettings, create_app

N_CTX = 64  # small: every request stays fast on two shared cores
# The toy as `start()` serves it, for tests that check its answers have no near tie
# (tests/rounding.py) before comparing served tokens exactly.
SERVED_TOY = build_model(get_preset("toy"), seed=ServeSettings().weights_seed)


def wait_ready(base_url: str, timeout_s: float = 60.0) -> None:
    """Poll /health until it answers 200."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if httpx.get(base_url + "/health").status_code == 200:
            return
        time.sleep(0.02)
    raise AssertionError("the server never got ready")


def start(**overrides: Any) -> Iterator[str]:
    """A ready server with ServeSettings(n_ctx=N_CTX, threads=1, **overrides)."""
    settings = ServeSettings(**{"n_ctx": N_CTX, "threads": 1, **overrides})
    with BackgroundServer(create_app(settings)) as server:
        wait_ready(server.base_url)
        yield server.base_url


@pytest.fixture(scope="session")
def base_url() -> Iterator[str]:
    """The default server: preset toy, KV cache on, n_ctx 64."""
    yield from start()


@pytest.fixture(scope="session")
def no_cache_url() -> Iterator[str]:
    """The same model with --no-cache (full recomputation)."""
    yield from start(use_cache=False)


def sse_events(text: str) -> list[str]:
    """The ``data:`` payloads of an SSE body, in order."""
    events = []
    for block in text.split("\n\n"):
        lines = [line for line in block.split("\n") if line.startswith("data: ")]
        if lines:
            events.append("\n".join(line[6:] for line in lines))
    return events


def stream(base_url: str, path: str, body: dict[str, Any]) -> tuple[httpx.Response, list[str]]:
    """POST with stream:true; the response and its raw event payloads."""
    with httpx.stream("POST", base_url + path, json={**body, "stream": True},
                      timeout=60) as response:
        text = response.read().decode()
    return response, sse_events(text)


def stream_json(base_url: str, path: str, body: dict[str, Any]) -> list[dict[str, Any]]:
    """The JSON events of a 200 stream, ``[DONE]`` kept as the string "[DONE]"."""
    response, events = stream(base_url, path, body)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/event-stream")
    return [e if e == "[DONE]" else json.loads(e) for e in events]
