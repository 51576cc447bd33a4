"""A port where nothing listens, for as long as a test needs it.

A fixed port (9, 1) is not "nothing listens" on every machine (an inetd discard
service, a developer's own server), and a port the OS called free a moment ago may be
taken by the time the test connects. :func:`refusing_port` holds a socket bound to a
port the OS picks, without listening: no other program can listen there meanwhile, and
a TCP connection to it is refused at once (Linux answers the SYN with a reset).
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def refusing_port(host: str = "127.0.0.1") -> Iterator[int]:
    """A port on ``host`` that refuses connections until the ``with`` block ends."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))  # bound, never listen(): connections are refused
        yield int(sock.getsockname()[1])


@contextmanager
def refusing_url(host: str = "127.0.0.1") -> Iterator[str]:
    """``http://host:port`` on a :func:`refusing_port`."""
    with refusing_port(host) as port:
        yield f"http://{host}:{port}"
