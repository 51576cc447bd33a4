"""Endpoint URLs: checked before anything is sent, shown without secrets."""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

from kvlab.errors import ConfigError


def redact_url(url: str) -> str:
    """``url`` without user:password and query string (they may hold a secret)."""
    parts = urlsplit(url)
    try:
        port = parts.port
    except ValueError:  # a port that is not a number: leave it out
        port = None
    host = parts.hostname or ""
    netloc = f"{host}:{port}" if port else host
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def require_http_url(url: str, what: str) -> None:
    """ConfigError unless ``url`` is ``http(s)://host[:port][/path]`` (``what`` names the
    setting, e.g. "mode vllm: base_url")."""
    parts = urlsplit(url)
    try:
        parts.port  # noqa: B018  raises ValueError for a port out of range or not a number
        valid = parts.scheme in ("http", "https") and bool(parts.hostname)
    except ValueError:
        valid = False
    if not valid:
        shown = redact_url(url) if parts.scheme in ("http", "https") else url.split("@")[-1]
        raise ConfigError(f"{what}: invalid URL {shown!r}; expected http(s)://host[:port]"
                          "[/v1], e.g. http://127.0.0.1:8080/v1")
