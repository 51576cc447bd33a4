"""How prompt tokens are counted to size the padding, and which method counted them.

The padding of a capacity is cut with a token counter (:mod:`kvlab.bench.plan.workload`).
:func:`choose_counter` picks the first method the endpoint allows, in this order, and
says which one it used (kept per capacity in ``prepared.json`` and the manifest, and
shown in the report):

1. ``server-tokenize``: the server's own ``POST /tokenize`` (llama.cpp, vLLM, kvlab
   serve). The count is of the prompt text, without a chat template.
2. ``tokenizer-file``: a tokenizer the user names (``kvlab run --tokenizer`` or ``[workload]
   tokenizer``): a Hugging Face ``tokenizer.json`` (read with ``tokenizers``) or a GGUF
   (its embedded vocabulary, converted by ``transformers`` once per file: tens of
   seconds for a large vocabulary, then cached). The count is of the prompt text,
   special tokens (BOS) included.
3. ``api-count``: the API's own count of a request's prompt, where the API has one
   (Anthropic's ``POST /v1/messages/count_tokens``; llama-server, vLLM and kvlab serve
   answer it too): the prompt as the API holds it, chat template included, as
   calibration counts it, but nothing is generated and one request counts one text.
   It comes after the methods that count the text alone, because a dataset sizes
   pieces of text (a turn, the padding) that a template's tokens would throw off.
4. ``usage-calibration``: no way to count offline, so each count is a probe request
   (the mode's own API and body fields, 1 output token, not streamed) whose
   ``usage.prompt_tokens`` (llama.cpp: ``tokens_evaluated``) the server reports. The
   count includes whatever the server adds (chat template, BOS): the prompt as the
   server sees it. Padding cut points are found by bisection on these counts, so one
   capacity costs about 10 probes plus one per query and one per prompt (each probe
   generates one token; counts are cached per text).

If none applies, :class:`~kvlab.errors.ConfigError` asks for a tokenizer.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx

from kvlab.bench.client.endpoints import Endpoint
from kvlab.errors import ConfigError, EndpointAuthError, EndpointError, EndpointUnreachable
from kvlab.rundir.prepared import Sizing

METHODS = ("server-tokenize", "tokenizer-file", "api-count", "usage-calibration")


class Counter:
    """``await counter(text)`` -> tokens by :attr:`sizing`'s method (cached per text)."""

    def __init__(self, count: Callable[[str], Awaitable[int]], sizing: Sizing) -> None:
        self._count = count
        self.sizing = sizing
        self._cache: dict[str, int] = {}

    def share(self, caches: dict[tuple[str, str], dict[str, int]]) -> Counter:
        """Use (and fill) the cache of counts by the same method and source in
        ``caches``, so the capacities of one run count each query once."""
        shared = caches.setdefault((self.sizing.method, self.sizing.source), {})
        shared.update(self._cache)
        self._cache = shared
        return self

    async def __call__(self, text: str) -> int:
        if text not in self._cache:
            self._cache[text] = await self._count(text)
        return self._cache[text]


def _root(base_url: str) -> str:
    root = base_url.rstrip("/")
    return root[: -len("/v1")] if root.endswith("/v1") else root


def _headers(endpoint: Endpoint) -> dict[str, str]:
    return endpoint.dialect.headers(endpoint.api_key)  # Bearer, or Anthropic's x-api-key


async def _post(client: httpx.AsyncClient, endpoint: Endpoint, url: str,
                body: dict[str, Any]) -> httpx.Response:
    """POST or raise EndpointUnreachable / EndpointAuthError (the key is never shown)."""
    try:
        response = await client.post(url, json=body, headers=_headers(endpoint),
                                     timeout=endpoint.timeout_s)
    except httpx.HTTPError as exc:
        raise EndpointUnreachable(f"{endpoint.name}: cannot reach {url} "
                                  f"({type(exc).__name__})") from None
    if response.status_code in (401, 403):
        raise EndpointAuthError(f"{endpoint.name}: {url} answered {response.status_code}; "
                                "check the API key variable (kvlab endpoints list)")
    return response


async def server_counter(client: httpx.AsyncClient, endpoint: Endpoint) -> Counter | None:
    """The server's ``POST /tokenize`` as a counter; None when it has none (any answer
    but a token list: 404, 405, 501, another shape)."""
    dialect = endpoint.dialect
    return await _route_counter(
        client, endpoint, _root(endpoint.base_url) + dialect.tokenize_path,
        lambda text: dialect.tokenize_body(text, endpoint.model), dialect.token_count,
        "server-tokenize")


async def api_counter(client: httpx.AsyncClient, endpoint: Endpoint) -> Counter | None:
    """The API's own prompt count (its dialect's ``count_path``) as a counter; None when
    the API has none or the server does not answer it with a count."""
    dialect = endpoint.dialect
    if dialect.count_path is None:
        return None
    return await _route_counter(
        client, endpoint, endpoint.url(dialect.count_path),
        lambda text: dialect.count_body(text, endpoint.model), dialect.counted, "api-count")


async def _route_counter(client: httpx.AsyncClient, endpoint: Endpoint, url: str,
                         body_of: Callable[[str], dict[str, Any]],
                         count_of: Callable[[Any], int | None], method: str
                         ) -> Counter | None:
    """A route that answers a count per body as a counter; None when a first probe is
    not answered with a count."""
    response = await _post(client, endpoint, url, body_of("probe"))
    try:
        if response.status_code != 200 or count_of(response.json()) is None:
            return None
    except ValueError:
        return None

    async def count(text: str) -> int:
        answer = await _post(client, endpoint, url, body_of(text))
        try:
            tokens = count_of(answer.json()) if answer.status_code == 200 else None
        except ValueError:
            tokens = None
        if tokens is None:
            raise EndpointError(f"{endpoint.name}: POST {url} answered "
                                f"{answer.status_code} to a prompt it counted before")
        return tokens

    return Counter(count, Sizing(method, url))


def file_counter(path: Path) -> Counter:
    """A local tokenizer: ``tokenizer.json`` (``tokenizers``) or a GGUF's vocabulary
    (``transformers``). ConfigError if it cannot be read."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"tokenizer {path}: no such file; give a tokenizer.json or a .gguf")
    digest = _sha256(path)
    if path.suffix.lower() == ".gguf":
        encode = _gguf_encoder(path, digest)
    else:
        from tokenizers import Tokenizer

        try:
            tokenizer = Tokenizer.from_file(str(path))
        except Exception as exc:  # the Rust error type is not importable
            raise ConfigError(f"tokenizer {path}: not a tokenizer.json ({exc})") from None

        def encode(text: str) -> int:
            return len(tokenizer.encode(text).ids)

    async def count(text: str) -> int:
        return encode(text)

    return Counter(count, Sizing("tokenizer-file", str(path), sha256=digest))


def _sha256(path: Path) -> str:
    """Hex SHA-256 of a file read in 1 MiB blocks (a GGUF may be many GB)."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _gguf_encoder(path: Path, digest: str) -> Callable[[str], int]:
    """Token count by the GGUF's vocabulary. Transformers converts it to a ``tokenizers``
    tokenizer (tens of seconds for a large vocabulary); the result is kept under the
    engine's tokenizer cache, named by the file's SHA-256, so later runs load it at once."""
    from tokenizers import Tokenizer

    from kvlab.servers.fetch import TOKENIZER_CACHE_DIR as CACHE_DIR

    cached = CACHE_DIR / f"{digest}.json"
    if cached.is_file():
        tokenizer = Tokenizer.from_file(str(cached))
    else:
        try:
            from transformers import AutoTokenizer
        except ImportError:
            raise ConfigError(f"tokenizer {path}: reading a GGUF's vocabulary needs "
                              "transformers (pip install 'kvlab[engine]'), or give the "
                              "model's tokenizer.json instead") from None
        try:
            tokenizer = AutoTokenizer.from_pretrained(
                str(path.parent), gguf_file=path.name, local_files_only=True
            ).backend_tokenizer
        except Exception as exc:  # transformers raises many kinds for an unusable file
            raise ConfigError(f"tokenizer {path}: no usable tokenizer in this GGUF "
                              f"({type(exc).__name__}); give the model's tokenizer.json"
                              ) from None
        cached.parent.mkdir(parents=True, exist_ok=True)
        partial = cached.with_suffix(f".{os.getpid()}.part")
        tokenizer.save(str(partial))
        partial.replace(cached)  # never a half-written cache entry
    return lambda text: len(tokenizer.encode(text).ids)  # special tokens (BOS) included


async def usage_counter(client: httpx.AsyncClient, endpoint: Endpoint,
                        params: dict[str, Any]) -> Counter | None:
    """Counts from probe requests' ``usage.prompt_tokens``; None if the server's answer
    to a first probe states no prompt tokens. ``params``: the mode's body fields."""
    dialect = endpoint.dialect
    url = endpoint.url(dialect.path)
    sizing = Sizing("usage-calibration", url)

    async def count(text: str) -> int:
        body = dialect.probe_body(text, params, endpoint.model)
        sizing.probes += 1
        response = await _post(client, endpoint, url, body)
        if response.status_code != 200:
            excerpt = " ".join(response.text[:200].split())  # one line
            raise EndpointError(f"{endpoint.name}: a prompt-sizing probe to {url} answered "
                                f"HTTP {response.status_code}: {excerpt}")
        try:
            tokens = dialect.prompt_tokens(response.json())
        except ValueError:
            tokens = None
        if tokens is None:
            if sizing.probes == 1:
                raise _NoUsage
            raise EndpointError(f"{endpoint.name}: a prompt-sizing probe to {url} stated no "
                                "prompt tokens, unlike the probes before it")
        return tokens

    counter = Counter(count, sizing)
    try:
        await counter("probe")
    except _NoUsage:
        return None
    return counter


class _NoUsage(Exception):
    """A probe's answer stated no prompt tokens."""


async def choose_counter(client: httpx.AsyncClient, endpoint: Endpoint,
                         params: dict[str, Any], tokenizer_file: Path | None) -> Counter:
    """The first usable method of the module's order (see the module doc)."""
    counter = await server_counter(client, endpoint)
    if counter is None and tokenizer_file is not None:
        counter = await asyncio.to_thread(file_counter, tokenizer_file)
    if counter is None:
        counter = await api_counter(client, endpoint)
    if counter is None:
        counter = await usage_counter(client, endpoint, params)
    if counter is None:
        raise ConfigError(
            f"{endpoint.name}: {_root(endpoint.base_url)} offers no POST /tokenize and its "
            "answers state no usage.prompt_tokens, so kvlab cannot size prompts in its "
            "tokens; name the model's tokenizer: kvlab run --tokenizer tokenizer.json (or a "
            '.gguf), or [workload] tokenizer = "path/to/tokenizer.json" in the experiment')
    return counter
