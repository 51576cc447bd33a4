"""Checking an endpoint before a run: ``GET /v1/models`` lists the model the mode names.

A control-plane check, apart from the measurement client
(:class:`~kvlab.bench.client.endpoints.HarnessClient`): it runs before any request is
timed (``kvlab run``'s checks of external modes, ``kvlab endpoints check``), with a
plain synchronous HTTP client. Failures are one-line errors that say what to fix.
"""

from __future__ import annotations

import json

import httpx

from kvlab.bench.client.endpoints import Endpoint
from kvlab.bench.client.urls import redact_url, require_http_url
from kvlab.errors import EndpointAuthError, EndpointError, EndpointUnreachable

MODELS_TIMEOUT_S = 30.0  # at most; an endpoint's own request timeout when shorter


def check_models(endpoint: Endpoint) -> list[str]:
    """GET /v1/models with the key; return the ids; raise unless the model is listed.

    Raises EndpointAuthError (401/403), EndpointUnreachable (no connection, no answer in
    time) or EndpointError (other status, bad body, model missing; the message lists
    the ids).
    """
    require_http_url(endpoint.base_url, f"{endpoint.name}: base URL")
    url = endpoint.url("/v1/models")
    shown = redact_url(url)
    headers = endpoint.dialect.headers(endpoint.api_key)  # Bearer, or Anthropic's
    try:
        answer = httpx.get(url, headers=headers,
                           timeout=min(endpoint.timeout_s, MODELS_TIMEOUT_S))
    except httpx.TimeoutException as exc:
        raise EndpointUnreachable(
            f"{endpoint.name}: {shown} did not answer in time; is the server up and loaded?"
        ) from exc
    except (httpx.TransportError, OSError) as exc:
        raise EndpointUnreachable(
            f"{endpoint.name}: cannot connect to {shown} ({type(exc).__name__}); check the "
            "base URL (host, port, /v1) and that the server is running"
        ) from exc
    status = answer.status_code
    if status in (401, 403):
        hint = "the API key was rejected" if endpoint.api_key else "no API key is set"
        raise EndpointAuthError(
            f"{endpoint.name}: GET {shown} answered {status}: {hint}; check the key "
            "variable for this endpoint (kvlab endpoints list)"
        )
    if status != 200:
        hint = "; check the base URL (host, port, /v1)" if status == 404 else ""
        raise EndpointError(f"{endpoint.name}: GET {shown} answered HTTP {status}{hint}")
    try:
        ids = [str(item["id"]) for item in json.loads(answer.content)["data"]]
    except (ValueError, KeyError, TypeError) as exc:
        raise EndpointError(f"{endpoint.name}: GET {shown} is not an OpenAI model list") \
            from exc
    if endpoint.model is not None and endpoint.model not in ids:
        raise EndpointError(
            f"{endpoint.name}: model {endpoint.model!r} is not served; {shown} lists "
            f"{ids}; fix the model id setting"
        )
    return ids


def declared_width(endpoint: Endpoint) -> int | None:
    """The embedding width the server declares for the endpoint's model: its
    ``/v1/models`` entry's ``meta.n_embd`` (llama-server, kvlab serve); None when it
    declares none, or the list cannot be read (the vectors are then only held to one
    length among themselves)."""
    try:
        answer = httpx.get(endpoint.url("/v1/models"),
                           headers=endpoint.dialect.headers(endpoint.api_key),
                           timeout=min(endpoint.timeout_s, MODELS_TIMEOUT_S))
        entries = json.loads(answer.content)["data"]
    except (httpx.HTTPError, OSError, ValueError, KeyError, TypeError):
        return None
    for entry in entries if isinstance(entries, list) else ():
        if not isinstance(entry, dict) or (endpoint.model is not None and len(entries) > 1
                                           and entry.get("id") != endpoint.model):
            continue
        width = (entry.get("meta") or {}).get("n_embd")
        if isinstance(width, int) and not isinstance(width, bool) and width > 0:
            return width
    return None
