"""One request against one API -> one Record of raw facts.

CONTRACT (fixed):

    endpoint = Endpoint(base_url="http://127.0.0.1:8080", api=ApiKind.LLAMACPP_COMPLETION)
    spec = RequestSpec(prompt="...", max_tokens=64, stream=True,
                       params={"temperature": 0, "seed": 42, "ignore_eos": True,
                               "cache_prompt": False},
                       run_id="...", mode="kv-cache", capacity=512, query_id="q01")
    async with HarnessClient(max_connections=1) as client:
        record = await client.send(endpoint, spec, clock)   # never raises for a failed
                                                            # request: outcome says it

``params`` are merged into the API-specific body last (so an experiment's extra body
fields, e.g. vLLM's ``chat_template_kwargs``, win). ``send`` never raises for HTTP
errors, timeouts or disconnects: they become a Record with the matching outcome.

Outcomes (``records.Outcome``):

- ``ok``: a 2xx answer that followed its API. A streamed answer is ``ok`` only once its
  terminator arrived (``data: [DONE]`` for OpenAI, the final ``"stop": true`` event for
  llama.cpp). Missing usage, wrong token counts or ``truncated`` stay ``ok``: they are
  facts for validation, not transport failures.
- ``http_error``: a non-2xx status; ``error`` holds a short excerpt of the body.
- ``timeout``: the whole request (connect to last byte) took over ``endpoint.timeout_s``.
- ``disconnected``: refused, reset, or a stream that ended (cleanly or not) before its
  terminator. A body that stops early is treated as a broken connection, not as a
  protocol error, because a client cannot tell a crashed worker from a cut socket.
- ``malformed``: a body or event that is not the API's JSON (the response parser,
  :mod:`kvlab.bench.client.responses`, says so with ``MalformedResponse``; nothing else
  is caught as one), an ``error`` event inside the stream, a streamed answer that is
  not ``text/event-stream``, or bytes that are not HTTP/1.x.

An error of kvlab's own code is raised, never recorded as a row. The Record is
assembled in one place, :func:`record_of`. Checking an endpoint before a run
(``GET /v1/models``) is :mod:`kvlab.bench.client.models`, apart from this client.

Timing: every clock field is ``RunClock`` ns. One timestamp is taken per network read,
and every event parsed out of that read shares it (events that arrive together are
indistinguishable to the client anyway; :mod:`kvlab.bench.client.answers` reads one answer,
through either client, into those facts). For ``http://`` (kvlab's own client, on
Linux) that timestamp is the kernel's: when the read's last byte reached the TCP
stack, however late the event loop handled it; through aiohttp (``https://``, or
``http_client="aiohttp"``) it is when the read's coroutine resumed. ``chunk_ns`` has
one entry per stream event that carries generated output (non-empty text, or a
non-empty llama.cpp ``tokens`` list); ``chunk_tokens`` holds that event's token count
when the API states it (llama.cpp), else ``None`` (OpenAI deltas). Reading bodies and
events into those facts is :mod:`kvlab.bench.client.responses`; this module owns the
connection and the clock.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from array import array
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from kvlab.api.dialect import Dialect, Message
from kvlab.api.dialects import dialect_of
from kvlab.bench.client.answers import AiohttpAnswer, read_answer
from kvlab.bench.client.connstamps import SetupStamps, setup_trace
from kvlab.bench.client.rawhttp import RAW_SUPPORTED, Disconnected, ProtocolError
from kvlab.bench.client.rawpool import RawPool
from kvlab.bench.client.responses import MalformedResponse, ResponseFacts, WrongApi
from kvlab.rundir import RECORD_SCHEMA, ApiKind, Outcome, Record, RunClock


@dataclass(frozen=True)
class Endpoint:
    """Where and how to send requests. ``api_key`` never appears in repr or output."""

    base_url: str
    api: ApiKind
    model: str | None = None  # model id for OpenAI APIs (None: llama.cpp ignores it)
    api_key: str | None = field(default=None, repr=False)
    name: str = "endpoint"
    timeout_s: float = 120.0  # per request, whole response

    @property
    def dialect(self) -> Dialect:
        """What its API means: path, body, stream events (:mod:`kvlab.api`)."""
        return dialect_of(self.api)

    def url(self, path: str) -> str:
        """Absolute URL of an API path; a base URL ending in ``/v1`` is not doubled."""
        base = self.base_url.rstrip("/")
        if base.endswith("/v1") and path.startswith("/v1/"):
            path = path[3:]
        return base + path


@dataclass(frozen=True)
class RequestSpec:
    """One request to send, with the identity its Record will carry."""

    prompt: str
    max_tokens: int
    stream: bool = True
    params: dict[str, Any] = field(default_factory=dict)
    run_id: str = ""
    mode: str = ""
    capacity: int = 0
    query_id: str = ""
    repetition: int = 0
    position: int = 0
    warmup: bool = False
    load: str | None = None
    t_scheduled: int | None = None  # ns since run start, for scheduled (load) sends
    worker: int | None = None  # the load worker sending it (None: the run's own process)
    # A session's turn (bench.plan.loads.sessions): the whole conversation sent, its
    # history with the server's earlier answers and then ``prompt``, the turn's new
    # text; None: ``prompt`` alone
    messages: tuple[Message, ...] | None = None
    session: str | None = None  # the session it is a turn of (None: not a session's)
    turn: int | None = None  # its index in its session's chain, from 1
    # a session's turns may let the server keep the conversation (OpenAI Responses):
    # ``server_history`` asks for it; a turn that continues it names the stored answer
    # (``previous_response_id``) and sends only the messages after the first
    # ``stored_messages`` (the ones the server holds); ``messages`` stays the whole
    # conversation, so the Record's prompt_sha256 names the same prompt either way
    server_history: bool = False
    previous_response_id: str | None = None
    stored_messages: int = 0
    # an embeddings request's batch of texts (``prompt`` is its first) and the vector
    # length its answers must have (None: unknown)
    inputs: tuple[str, ...] | None = None
    dimension_expected: int | None = None

    def identity(self) -> dict[str, Any]:
        """The fields its Record carries as they are (who sent it, when it was due)."""
        return {"run_id": self.run_id, "mode": self.mode, "capacity": self.capacity,
                "query_id": self.query_id, "repetition": self.repetition,
                "position": self.position, "warmup": self.warmup, "load": self.load,
                "t_scheduled": self.t_scheduled, "worker": self.worker,
                "session": self.session, "turn": self.turn,
                "previous_response_id": self.previous_response_id,
                "inputs": None if self.inputs is None else len(self.inputs),
                "dimension_expected": self.dimension_expected}

    def sent_text(self) -> str:
        """What the request asks about, as one text: the prompt, or the conversation's
        messages (or a batch's inputs) as compact JSON (its SHA-256 is the Record's
        ``prompt_sha256``)."""
        sent: Any = self.messages if self.messages is not None else self.inputs
        if sent is None:
            return self.prompt
        return json.dumps(list(sent), ensure_ascii=False, separators=(",", ":"))


def build_body(endpoint: Endpoint, spec: RequestSpec) -> dict[str, Any]:
    """The JSON body for ``endpoint.api`` (a session's turn: its whole conversation);
    ``spec.params`` are merged last and win."""
    dialect = endpoint.dialect
    body = dialect.body(spec.prompt, spec.max_tokens, spec.stream, endpoint.model)
    if spec.messages is not None and spec.previous_response_id is not None:
        body.update(dialect.continue_fields(spec.previous_response_id,
                                            spec.messages[spec.stored_messages:]))
    elif spec.messages is not None:
        body.update(dialect.messages_fields(spec.messages))
    if spec.inputs is not None:
        body.update(dialect.inputs_fields(spec.inputs))
    body.update(spec.params)
    return body


def record_of(endpoint: Endpoint, spec: RequestSpec, path: str, body: dict[str, Any],
              facts: ResponseFacts, t_sent: int, t_end: int) -> Record:
    """The Record of one exchange: the request's identity and what was sent (``spec``,
    ``body``), what came back (``facts``) and when it was sent and ended (run clock,
    ns). The one place a Record is assembled from a request; a secret (the endpoint's
    key) never reaches its error text."""
    error = facts.error
    if error and endpoint.api_key:
        error = error.replace(endpoint.api_key, "***")
    return Record(
        schema_version=RECORD_SCHEMA, **spec.identity(),
        api=endpoint.api, path=path, stream=spec.stream, body=body,
        prompt_sha256=hashlib.sha256(spec.sent_text().encode()).hexdigest(), prompt=spec.prompt,
        requested_tokens=spec.max_tokens, t_sent=t_sent, t_end=t_end,
        **facts.record_fields(), error=error,
    )


HTTP_CLIENTS = ("auto", "aiohttp")
# the most connections a point's warm-up opens (an open loop without a cap could have
# every request in flight: the requests past these open their own, and say so)
MAX_WARM = 512


class HarnessClient:
    """At most ``max_connections`` open connections to the servers it is sent to.

    ``http_client``: ``"auto"`` sends ``http://`` requests through kvlab's own client
    (:mod:`kvlab.bench.client.rawhttp`: kernel receive timestamps, no per-read coroutine
    switch) and ``https://`` ones through aiohttp; ``"aiohttp"`` uses aiohttp for all
    (each read stamped when its coroutine resumes). ``keep_read_lags``: keep the loop's
    lag of every read (:attr:`read_lags_ns`, for ``kvlab calibrate``).
    """

    def __init__(self, max_connections: int = 1, http_client: str = "auto",
                 keep_read_lags: bool = False) -> None:
        if max_connections < 1:
            raise ValueError("max_connections must be >= 1")
        if http_client not in HTTP_CLIENTS:
            raise ValueError(f"http_client must be one of {HTTP_CLIENTS}, not {http_client!r}")
        self.max_connections = max_connections
        self.http_client = http_client
        self.keep_read_lags = keep_read_lags
        self._session: aiohttp.ClientSession | None = None
        self._raw: RawPool | None = None

    async def __aenter__(self) -> HarnessClient:
        connector = aiohttp.TCPConnector(limit=self.max_connections, limit_per_host=0)
        # No session-wide timeout: each send() bounds itself with endpoint.timeout_s.
        self._session = aiohttp.ClientSession(
            connector=connector,
            timeout=aiohttp.ClientTimeout(total=None),
            trace_configs=[setup_trace()],
        )
        if self.http_client == "auto" and RAW_SUPPORTED:
            self._raw = RawPool(self.max_connections, self.keep_read_lags)
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._raw is not None:
            self._raw.close()
            self._raw = None
        if self._session is not None:
            await self._session.close()
            self._session = None

    @property
    def read_lags_ns(self) -> array[int] | None:
        """Per kernel-stamped read, how late the loop handled it (ns); None unless kept
        by kvlab's own client (see :class:`~kvlab.bench.client.rawpool.RawPool`)."""
        return self._raw.read_lags_ns if self._raw is not None else None

    @property
    def session(self) -> aiohttp.ClientSession:
        if self._session is None:
            raise RuntimeError("use HarnessClient as 'async with HarnessClient() as c'")
        return self._session

    async def send(self, endpoint: Endpoint, spec: RequestSpec, clock: RunClock) -> Record:
        """Send one request and return its Record; never raises for a failed request
        (a failure of kvlab's own code is raised, not recorded)."""
        dialect = endpoint.dialect
        path = dialect.path
        body = build_body(endpoint, spec)
        payload = json.dumps(body).encode()
        for attempt in (1, 2):
            facts = ResponseFacts()
            t_sent = clock.now()  # kept only where the request was never written
            try:
                async with asyncio.timeout(endpoint.timeout_s):
                    await self._exchange(endpoint, dialect, payload, spec.stream, clock,
                                         facts)
            except TimeoutError:
                facts.fail(Outcome.TIMEOUT, f"no complete answer within {endpoint.timeout_s:g} s")
            except Disconnected as exc:  # kvlab's client
                if attempt == 1 and exc.stale:
                    continue  # a reused connection the server had closed: send again
                facts.fail(Outcome.DISCONNECTED, f"{type(exc).__name__}: {exc}")
            except (aiohttp.ClientOSError, aiohttp.ServerDisconnectedError) as exc:
                if attempt == 1 and facts.t_headers is None:
                    # A pooled keep-alive connection the server had already closed
                    # (llama-server closes after each stream): the request never
                    # reached it, so send it again on a fresh connection.
                    continue
                facts.fail(Outcome.DISCONNECTED, f"{type(exc).__name__}: {exc}")
            except (aiohttp.ClientError, OSError) as exc:
                facts.fail(Outcome.DISCONNECTED, f"{type(exc).__name__}: {exc}")
            except WrongApi as exc:  # the answer is another API's
                facts.fail(Outcome.WRONG_API, f"{type(exc).__name__}: {exc}")
            except (MalformedResponse, ProtocolError) as exc:  # the answer broke its API
                facts.fail(Outcome.MALFORMED, f"{type(exc).__name__}: {exc}")
            break
        # a whole answer ends when its body arrived, not once it was parsed
        t_end = facts.t_body if facts.t_body is not None else clock.now()
        if facts.t_written is not None:  # TTFT from the request written, set-up apart
            t_sent = facts.t_written
        return record_of(endpoint, spec, path, body, facts, t_sent, t_end)

    async def warm(self, endpoint: Endpoint, count: int) -> int:
        """Open ``count`` (at most ``MAX_WARM``) connections to ``endpoint`` before a
        point's measured requests, so none of them pays the set-up (kvlab's own client;
        through aiohttp nothing is opened ahead). Returns the connections open and idle
        (0 through aiohttp)."""
        url = endpoint.url(endpoint.dialect.path)
        if self._raw is None or not url.startswith("http://"):
            return 0
        return await self._raw.warm(url, min(count, MAX_WARM))

    async def _exchange(
        self,
        endpoint: Endpoint,
        dialect: Dialect,
        payload: bytes,
        stream: bool,
        clock: RunClock,
        facts: ResponseFacts,
    ) -> None:
        # identity: a compressing proxy would buffer the stream and blur the timings
        headers = {"Content-Type": "application/json", "Accept-Encoding": "identity"}
        if stream:
            headers["Accept"] = "text/event-stream"
        headers.update(dialect.headers(endpoint.api_key))  # Bearer, or Anthropic's
        url = endpoint.url(dialect.path)
        if self._raw is not None and url.startswith("http://"):
            await self._exchange_raw(self._raw, url, headers, dialect, payload, stream,
                                     clock, facts)
            return
        async with self.session.post(url, data=payload, headers=headers,
                                     trace_request_ctx=SetupStamps(clock, facts, url.startswith("https://"))
                                     ) as resp:
            answer = AiohttpAnswer(resp, time.perf_counter_ns())
            await read_answer(answer, dialect, stream, clock, facts)

    @staticmethod
    async def _exchange_raw(
        pool: RawPool,
        url: str,
        headers: dict[str, str],
        dialect: Dialect,
        payload: bytes,
        stream: bool,
        clock: RunClock,
        facts: ResponseFacts,
    ) -> None:
        """The same exchange through kvlab's own client (kernel receive timestamps)."""
        async with pool.post(url, headers, payload) as resp:
            conn, t0 = resp.connection, clock.t0_ns
            facts.t_written = conn.t_written - t0
            facts.connection_reused = conn.reused
            if not conn.reused:
                facts.t_connect_start = conn.t_connect_start - t0
                facts.t_connected = conn.t_connected - t0
            try:
                await read_answer(resp, dialect, stream, clock, facts)
            finally:
                facts.read_lag_ns = resp.max_lag_ns
                facts.loop_lag_ns = conn.loop_lag_ns

