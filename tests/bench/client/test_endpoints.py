"""HarnessClient against a real HTTP server on 127.0.0.1 (tests/fakeserver.py)."""

from __future__ import annotations

import asyncio
import hashlib
import json
import sys

import pytest

from kvlab.bench.client.endpoints import Endpoint, HarnessClient, RequestSpec
from kvlab.bench.client.models import check_models
from kvlab.errors import EndpointAuthError, EndpointError, EndpointUnreachable
from kvlab.rundir import ApiKind, Outcome, Record, RunClock
from tests.fakeserver import FakeServer
from tests.lateness import LatenessProbe
from tests.ports import refusing_url

KEY = "sk-test-SECRET-0123456789"
# the APIs of llama.cpp and OpenAI's chat and completions; Responses, Messages and
# embeddings have tests of their own (test_responses_messages.py, test_embeddings.py)
ALL_APIS = [ApiKind.LLAMACPP_COMPLETION, ApiKind.OPENAI_CHAT, ApiKind.OPENAI_COMPLETION]


@pytest.fixture(scope="module")
def server():
    with FakeServer(api_key=KEY, model="m1") as srv:
        yield srv


CLIENT = "auto"  # the HTTP client every test of this module goes through


@pytest.fixture(autouse=True, params=["auto", "aiohttp"])
def http_client(request):
    """Each test runs through kvlab's own client ("auto" on http://) and through aiohttp."""
    global CLIENT
    CLIENT = request.param
    yield request.param
    CLIENT = "auto"


@pytest.fixture(autouse=True)
def _reset(server):
    server.fault = None
    server.crlf = False
    yield
    server.reasoning, server.reasoning_field, server.usage_reasoning = 0, "reasoning", None


def endpoint(server: FakeServer, api: ApiKind, **kw) -> Endpoint:
    return Endpoint(base_url=server.base_url, api=api, model="m1", api_key=KEY, **kw)


def send(ep: Endpoint, spec: RequestSpec) -> Record:
    async def go() -> Record:
        async with HarnessClient(max_connections=2, http_client=CLIENT) as client:
            return await client.send(ep, spec, RunClock())

    return asyncio.run(go())


def spec(n: int = 8, stream: bool = True, **params) -> RequestSpec:
    return RequestSpec(
        prompt="a b c d e",
        max_tokens=n,
        stream=stream,
        params=params,
        run_id="r",
        mode="m",
        capacity=512,
        query_id="q01",
    )


@pytest.mark.parametrize("api", ALL_APIS)
def test_stream_ok_records_facts(server, api):
    rec = send(endpoint(server, api), spec(8))
    assert rec.outcome is Outcome.OK, rec.error
    assert rec.text == "".join(f"t{i} " for i in range(8))
    assert rec.output_tokens == 8 and rec.prompt_tokens == 5
    assert rec.saw_terminator is True
    assert rec.saw_usage is (None if api is ApiKind.LLAMACPP_COMPLETION else True)
    assert len(rec.chunk_ns) == 8
    expected = 1 if api is ApiKind.LLAMACPP_COMPLETION else None
    assert rec.chunk_tokens == [expected] * 8
    assert rec.timings is not None and rec.timings["prompt_n"] == 5
    assert rec.cached_tokens == 0
    assert rec.stop_type in ("limit", "length")
    # no reasoning: the first answer token is the first token, and nothing else changes
    assert rec.t_first_answer == rec.t_first_content and rec.reasoning_chunks == []
    assert rec.reasoning_text == "" and rec.notes == [] and rec.usage_reasoning_tokens is None
    if CLIENT == "aiohttp" or sys.platform != "linux":
        assert rec.read_lag_ns is None  # reads stamped when handled: no lag to tell
    else:
        assert rec.read_lag_ns is not None and 0 <= rec.read_lag_ns < rec.t_end - rec.t_sent
    clock = [
        rec.t_sent,
        rec.t_headers,
        rec.t_first_chunk,
        rec.t_first_content,
        rec.t_last_content,
        rec.t_end,
    ]
    assert all(t is not None for t in clock)
    assert clock == sorted(clock)
    assert rec.chunk_ns == sorted(rec.chunk_ns)
    assert rec.prompt_sha256 == hashlib.sha256(b"a b c d e").hexdigest()
    assert rec.http_status == 200


OPENAI_APIS = [ApiKind.OPENAI_CHAT, ApiKind.OPENAI_COMPLETION]


@pytest.mark.parametrize("field", ["reasoning", "reasoning_content"])
@pytest.mark.parametrize("api", OPENAI_APIS)
def test_a_reasoning_stream_is_output_from_its_first_thought(server, api, field):
    server.reasoning, server.reasoning_field, server.usage_reasoning = 3, field, 3
    rec = send(endpoint(server, api), spec(8))
    assert rec.outcome is Outcome.OK, rec.error
    assert len(rec.chunk_ns) == 8 and rec.reasoning_chunks == [0, 1, 2]
    assert rec.reasoning_text == "r0 r1 r2 " and rec.text == "t3 t4 t5 t6 t7 "
    assert rec.t_first_content == rec.chunk_ns[0] <= rec.t_first_answer == rec.chunk_ns[3]
    assert rec.output_tokens == 8 and rec.usage_reasoning_tokens == 3 and rec.notes == []


def test_a_usage_that_counts_no_reasoning_is_noted_on_the_record(server):
    server.reasoning, server.usage_reasoning = 4, 0  # as vLLM 0.32 with a plain parser
    rec = send(endpoint(server, ApiKind.OPENAI_CHAT), spec(8))
    assert rec.outcome is Outcome.OK, rec.error
    assert rec.usage_reasoning_tokens == 0 and len(rec.reasoning_chunks) == 4
    assert rec.notes == ["usage says 0 reasoning tokens, 4 were streamed: the streamed "
                         "count is used"]


@pytest.mark.parametrize("api", OPENAI_APIS)
def test_a_whole_answer_keeps_reasoning_apart(server, api):
    server.reasoning, server.usage_reasoning = 2, 2
    rec = send(endpoint(server, api), spec(6, stream=False))
    assert rec.outcome is Outcome.OK, rec.error
    assert rec.reasoning_text == "r0 r1 " and rec.text == "t2 t3 t4 t5 "
    assert rec.usage_reasoning_tokens == 2 and rec.t_first_answer is None


@pytest.mark.parametrize("api", ALL_APIS)
def test_non_stream_ok(server, api):
    rec = send(endpoint(server, api), spec(6, stream=False))
    assert rec.outcome is Outcome.OK, rec.error
    assert rec.text.startswith("t0 ") and rec.output_tokens == 6
    assert rec.saw_terminator is None and rec.saw_usage is None
    assert rec.chunk_ns == [] and rec.t_first_chunk is None
    assert rec.timings is not None


def test_bodies_sent(server):
    server.requests.clear()
    send(endpoint(server, ApiKind.LLAMACPP_COMPLETION), spec(4, temperature=0, n_predict=5))
    send(endpoint(server, ApiKind.OPENAI_CHAT), spec(4, seed=42))
    send(endpoint(server, ApiKind.OPENAI_COMPLETION), spec(4, stream=False))
    llama, chat, compl = (r["body"] for r in server.requests)
    assert llama == {"prompt": "a b c d e", "n_predict": 5, "stream": True, "temperature": 0}
    assert chat["messages"] == [{"role": "user", "content": "a b c d e"}]
    assert chat["model"] == "m1" and chat["max_tokens"] == 4 and chat["seed"] == 42
    assert chat["stream_options"] == {"include_usage": True}
    assert compl == {"model": "m1", "prompt": "a b c d e", "max_tokens": 4, "stream": False}
    assert all(r["headers"]["Authorization"] == f"Bearer {KEY}" for r in server.requests)


def test_base_url_with_v1_is_not_doubled(server):
    ep = Endpoint(
        base_url=server.base_url + "/v1/", api=ApiKind.OPENAI_CHAT, model="m1", api_key=KEY
    )
    assert send(ep, spec(2)).outcome is Outcome.OK


def test_key_never_in_repr_or_record(server):
    ep = endpoint(server, ApiKind.OPENAI_CHAT)
    assert KEY not in repr(ep)
    for rec in (
        send(ep, spec(3)),
        send(Endpoint(server.base_url, ApiKind.OPENAI_CHAT, "m1", "wrong-" + KEY), spec(3)),
    ):
        assert KEY not in rec.model_dump_json()


@pytest.mark.parametrize("api", ALL_APIS)
def test_stream_cut_is_disconnected(server, api):
    rec = send(endpoint(server, api), spec(8, fake_fault="cut"))
    assert rec.outcome is Outcome.DISCONNECTED
    assert rec.saw_terminator is False
    assert rec.text == "t0 t1 t2 t3 "  # what arrived is kept


@pytest.mark.parametrize("api", ALL_APIS)
def test_missing_terminator_is_disconnected(server, api):
    rec = send(endpoint(server, api), spec(4, fake_fault="no_done"))
    assert rec.outcome is Outcome.DISCONNECTED and rec.saw_terminator is False
    assert "stream ended before" in rec.error


@pytest.mark.parametrize("api", [ApiKind.OPENAI_CHAT, ApiKind.OPENAI_COMPLETION])
def test_missing_usage_is_recorded_not_failed(server, api):
    rec = send(endpoint(server, api), spec(4, fake_fault="no_usage"))
    assert rec.outcome is Outcome.OK
    assert rec.saw_usage is False and rec.output_tokens is None


@pytest.mark.parametrize("api", ALL_APIS)
@pytest.mark.parametrize("fault", ["malformed", "error_event", "not_sse"])
def test_malformed(server, api, fault):
    rec = send(endpoint(server, api), spec(4, fake_fault=fault))
    assert rec.outcome is Outcome.MALFORMED, rec.error
    assert rec.error
    if fault != "not_sse":  # what came before the bad event is kept
        assert rec.text.startswith("t0 t1 ") and rec.t_first_content is not None


def test_http_400_context_exceeded(server):
    rec = send(endpoint(server, ApiKind.LLAMACPP_COMPLETION), spec(4, fake_fault="ctx_exceeded"))
    assert rec.outcome is Outcome.HTTP_ERROR and rec.http_status == 400
    assert json.loads(rec.error)["error"]["type"] == "exceed_context_size_error"


def test_http_401(server):
    ep = Endpoint(server.base_url, ApiKind.OPENAI_CHAT, "m1", api_key="nope")
    rec = send(ep, spec(2))
    assert rec.outcome is Outcome.HTTP_ERROR and rec.http_status == 401
    assert "authentication_error" in rec.error


def test_timeout(server):
    server.slow_s = 2.0
    with LatenessProbe() as probe:
        rec = send(endpoint(server, ApiKind.LLAMACPP_COMPLETION, timeout_s=0.2),
                   spec(2, fake_fault="slow"))
    assert rec.outcome is Outcome.TIMEOUT  # it fired before the answer at 2 s
    # Not early, and not much later than 0.2 s: the loop's timer wake-up, then the
    # cancelled exchange's clean-up (two waits for the CPU).
    bound_ns = probe.allow_ms(1500.0, hops=2) * 1e6
    assert 0.15e9 < rec.t_end - rec.t_sent < bound_ns, probe


def test_refused_is_disconnected():
    with refusing_url() as url:
        rec = send(Endpoint(url, ApiKind.LLAMACPP_COMPLETION), spec(2))
    assert rec.outcome is Outcome.DISCONNECTED and rec.t_headers is None


@pytest.mark.parametrize("api", ALL_APIS)
def test_wrong_tokens_and_truncated_are_reported(server, api):
    rec = send(endpoint(server, api), spec(6, fake_fault="wrong_tokens"))
    assert rec.outcome is Outcome.OK and rec.output_tokens == 5
    if api is ApiKind.LLAMACPP_COMPLETION:
        rec = send(endpoint(server, api), spec(6, fake_fault="truncated"))
        assert rec.outcome is Outcome.OK and rec.truncated is True


def test_crlf_and_pings(server):
    server.crlf = True
    for api in ALL_APIS:
        rec = send(endpoint(server, api), spec(5))
        assert rec.outcome is Outcome.OK and len(rec.chunk_ns) == 5


def test_concurrent_sends_share_one_client(server):
    async def go() -> list[Record]:
        async with HarnessClient(max_connections=4, http_client=CLIENT) as client:
            ep = endpoint(server, ApiKind.OPENAI_CHAT)
            return await asyncio.gather(*(client.send(ep, spec(5), RunClock()) for _ in range(12)))

    recs = asyncio.run(go())
    assert [r.outcome for r in recs] == [Outcome.OK] * 12


def test_check_models(server):
    assert check_models(endpoint(server, ApiKind.OPENAI_CHAT)) == ["m1"]
    with pytest.raises(EndpointAuthError, match="401"):
        check_models(Endpoint(server.base_url, ApiKind.OPENAI_CHAT, "m1", api_key="bad"))
    with pytest.raises(EndpointError, match=r"'other'.*\['m1'\]"):
        check_models(Endpoint(server.base_url, ApiKind.OPENAI_CHAT, "other", api_key=KEY))


def test_check_models_unreachable():
    with refusing_url() as url, pytest.raises(EndpointUnreachable, match="cannot connect"):
        check_models(Endpoint(url, ApiKind.OPENAI_CHAT, "m"))


# -- against the embedded server over the real reference engine (kvlab serve) ---------


@pytest.fixture(scope="module")
def embedded():
    from kvlab.serve import BackgroundServer, ServeSettings, create_app
    from tests.serve.conftest import wait_ready

    settings = ServeSettings(n_ctx=64, threads=1, api_key=KEY)
    with BackgroundServer(create_app(settings)) as srv:
        wait_ready(srv.base_url)  # fails the test, not its requests, if never ready
        yield srv.base_url


GREEDY = {"temperature": 0, "seed": 42, "ignore_eos": True, "cache_prompt": False}


@pytest.mark.parametrize("stream", [True, False])
@pytest.mark.parametrize("api", ALL_APIS)
def test_embedded_server(embedded, api, stream):
    ep = Endpoint(base_url=embedded, api=api, model="toy", api_key=KEY)
    rec = send(ep, RequestSpec(prompt="hello kv", max_tokens=5, stream=stream, params=GREEDY))
    assert rec.outcome is Outcome.OK, rec.error
    assert rec.output_tokens == 5 and rec.prompt_tokens and rec.prompt_tokens > 0
    assert rec.timings is not None and rec.timings["predicted_n"] == 5
    assert rec.stop_type in ("limit", "length")
    assert KEY not in rec.model_dump_json()
    if stream:
        assert rec.saw_terminator is True
        assert rec.saw_usage is (None if api is ApiKind.LLAMACPP_COMPLETION else True)
        assert rec.t_sent < rec.t_first_content <= rec.t_last_content <= rec.t_end
        if api is ApiKind.LLAMACPP_COMPLETION:
            assert sum(rec.chunk_tokens) == 5


def test_embedded_server_models_and_context_error(embedded):
    assert "toy" in check_models(Endpoint(embedded, ApiKind.OPENAI_CHAT, "toy", api_key=KEY))
    ep = Endpoint(embedded, ApiKind.LLAMACPP_COMPLETION, api_key=KEY)
    rec = send(ep, RequestSpec(prompt="x" * 200, max_tokens=4, params=GREEDY))
    assert rec.outcome is Outcome.HTTP_ERROR and rec.http_status == 400
    assert "exceed_context_size_error" in rec.error


def test_ingest_bench_runs():
    """The micro-benchmark helper works end to end (its speed is not asserted)."""
    from tests.bench.calibrate.ingest_bench import measure, start_server

    for api in (ApiKind.OPENAI_CHAT, ApiKind.LLAMACPP_COMPLETION):
        base_url, proc = start_server(api, events=20, per_write=4)
        try:
            for kind in ("harness", "baseline"):
                assert asyncio.run(measure(kind, base_url, api, streams=2, events=20)) > 0
        finally:
            proc.terminate()
            proc.wait(10)


def test_a_pooled_connection_closed_by_the_server_is_retried_once() -> None:
    """llama-server closes the connection after each stream; the next request must not
    fail on the stale pooled connection (the server closed it without answering)."""
    import asyncio

    from kvlab.bench.client.endpoints import Endpoint, HarnessClient, RequestSpec
    from kvlab.rundir import ApiKind, Outcome, RunClock

    body = (
        b'data: {"content":"a","tokens":[1],"stop":false}\n\n'
        b'data: {"content":"","stop":true,"tokens_predicted":1,"tokens_evaluated":3,'
        b'"truncated":false,"stop_type":"limit","timings":{}}\n\n'
    )
    served = connections = 0

    async def request_arrived(reader: asyncio.StreamReader) -> bool:
        """Read one whole request; False if the client closed the connection instead."""
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError:
            return False
        length = int(
            next(line.split(b":")[1] for line in head.split(b"\r\n")
                 if line.lower().startswith(b"content-length"))
        )
        await reader.readexactly(length)
        return True

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal served, connections
        connections += 1
        await request_arrived(reader)
        served += 1
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
            b"Keep-Alive: timeout=5, max=100\r\nContent-Length: "
            + str(len(body)).encode() + b"\r\n\r\n" + body
        )
        await writer.drain()
        # Like llama-server: close despite advertising keep-alive, once the client has
        # sent its next request on this connection (not after a guessed pause, which a
        # slow client outlasts): that request always meets the closed connection.
        await request_arrived(reader)
        writer.close()

    async def go() -> list[Outcome]:
        server = await asyncio.start_server(handle, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        endpoint = Endpoint(f"http://127.0.0.1:{port}", ApiKind.LLAMACPP_COMPLETION)
        spec = RequestSpec(prompt="abc", max_tokens=1)
        clock = RunClock()
        outcomes = []
        async with server, HarnessClient(http_client=CLIENT) as client:
            for _ in range(3):
                outcomes.append((await client.send(endpoint, spec, clock)).outcome)
        return outcomes

    outcomes = asyncio.run(go())
    assert outcomes == [Outcome.OK] * 3
    assert served == 3 and connections == 3  # requests 2 and 3 were each sent again


def test_connection_set_up_is_recorded_apart_from_ttft(server):
    """The first request opens its connection (its set-up in its own fields, t_sent
    once it is written); the next one reuses it (no set-up); plain HTTP has no TLS."""
    ep = endpoint(server, ApiKind.OPENAI_CHAT)

    async def go() -> list[Record]:
        clock = RunClock()
        async with HarnessClient(max_connections=1, http_client=CLIENT) as client:
            return [await client.send(ep, spec(), clock) for _ in range(2)]

    first, second = asyncio.run(go())
    assert first.outcome == Outcome.OK and first.schema_version == 2
    assert first.connection_reused is False and first.t_tls is None
    assert first.t_connect_start is not None and first.t_connected is not None
    assert first.t_connect_start <= first.t_connected <= first.t_sent
    assert first.t_first_content is not None and first.t_sent < first.t_first_content
    assert second.connection_reused is True
    assert (second.t_connect_start, second.t_connected) == (None, None)
    assert first.loop_lag_ns is not None and first.loop_lag_ns >= 0


def test_a_warmed_point_pays_no_set_up_on_kvlabs_own_client(server):
    ep = endpoint(server, ApiKind.OPENAI_CHAT)

    async def go() -> tuple[int, list[Record]]:
        clock = RunClock()
        async with HarnessClient(max_connections=3, http_client=CLIENT) as client:
            opened = await client.warm(ep, 3)
            return opened, list(await asyncio.gather(
                *(client.send(ep, spec(), clock) for _ in range(3))))

    opened, records = asyncio.run(go())
    if CLIENT == "aiohttp":  # aiohttp opens nothing ahead: each pays, and says so
        assert opened == 0 and all(r.connection_reused is False for r in records)
        return
    assert opened == 3
    assert [r.connection_reused for r in records] == [True, True, True]
    assert all(r.t_connect_start is None for r in records)
