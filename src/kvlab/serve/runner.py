"""Run the app with uvicorn on a socket bound first, so port 0 works.

:func:`serve` blocks (the ``kvlab serve`` command); :class:`BackgroundServer` runs the
same app on a daemon thread for tests and in-process use::

    with BackgroundServer(create_app(ServeSettings(n_ctx=256))) as server:
        httpx.get(server.base_url + "/health")
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable
from types import TracebackType
from typing import Any

from kvlab.errors import ConfigError, KvlabError, ServerLaunchError


def check_port(port: int) -> None:
    """ConfigError unless ``port`` is a TCP port (0..65535; 0 lets the OS pick)."""
    if not 0 <= port <= 65535:
        raise ConfigError(f"--port {port} is not a TCP port: use 1..65535, or 0 to pick a "
                          "free one")


def bind(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host:port`` (port 0: the OS picks a free one)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # proto must be IPPROTO_TCP: asyncio sets TCP_NODELAY on accepted connections only
    # when it is. With proto 0, Nagle's algorithm meets the client's delayed ACK and a
    # stream's events reach the client in one burst ~40 ms late on a reused connection.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except (OSError, OverflowError) as exc:
        sock.close()
        why = exc.strerror if isinstance(exc, OSError) else "not a TCP port"
        raise ConfigError(
            f"cannot listen on {host}:{port}: {why}; choose another --port "
            f"(0 picks a free one) or --host") from None
    sock.listen(128)
    sock.set_inheritable(True)
    return sock


def url_of(sock: socket.socket) -> str:
    """``http://host:port`` of a bound socket."""
    host, port = sock.getsockname()[:2]
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def _server(app: Any, log_level: str) -> Any:
    import uvicorn

    config = uvicorn.Config(app, log_level=log_level, access_log=False, lifespan="on",
                            timeout_graceful_shutdown=5)
    return uvicorn.Server(config)


def serve(app: Any, host: str, port: int, on_listen: Callable[[str], None],
          log_level: str = "info") -> None:
    """Listen, call ``on_listen(url)``, then serve until Ctrl-C / SIGTERM.

    If the model fails to load, the server stops and its load error is raised here
    (llama-server exits too), so a corrupt model file ends ``kvlab serve`` with one line.
    """
    sock = bind(host, port)
    on_listen(url_of(sock))
    server = _server(app, log_level)
    state = getattr(app.state, "kvlab", None)
    if state is not None:
        state.on_load_error = lambda: setattr(server, "should_exit", True)
    server.run(sockets=[sock])
    error = state.slot.load_error if state is not None else None
    if isinstance(error, KvlabError):
        raise error
    if error is not None:
        raise ServerLaunchError(f"kvlab serve: the model failed to load: "
                                f"{type(error).__name__}: {error}")


class BackgroundServer:
    """The app served on a loopback port by a daemon thread; a context manager."""

    def __init__(self, app: Any, host: str = "127.0.0.1", log_level: str = "warning") -> None:
        self._sock = bind(host, 0)
        self.base_url = url_of(self._sock)
        self._server = _server(app, log_level)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [self._sock]}, daemon=True,
            name="kvlab-serve")

    def __enter__(self) -> BackgroundServer:
        self._thread.start()
        deadline = time.monotonic() + 30
        while not self._server.started:  # lifespan startup done, loop accepting
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("kvlab serve: the background server did not start")
            time.sleep(0.01)
        return self

    def __exit__(self, *exc: tuple[type[BaseException] | None, BaseException | None,
                                   TracebackType | None]) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=10)
        self._sock.close()
