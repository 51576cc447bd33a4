"""The client on OpenAI Responses and Anthropic Messages: the fake server's faults
(each one clear refusal class, nothing it had received lost), Anthropic's headers, and
kvlab serve's real answers in both dialects."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from kvlab.analysis.validate import Reason, check_row
from kvlab.bench.client.endpoints import Endpoint, HarnessClient, RequestSpec
from kvlab.rundir import ApiKind, Outcome, Record, RunClock
from tests.fakeserver import FakeServer

KEY = "sk-test-SECRET-0123456789"
NEW_APIS = [ApiKind.OPENAI_RESPONSES, ApiKind.ANTHROPIC_MESSAGES]
FORCED = {"temperature": 0, "seed": 42, "ignore_eos": True, "cache_prompt": False}


@pytest.fixture(scope="module")
def server() -> Iterator[FakeServer]:
    with FakeServer(api_key=KEY, model="m1") as srv:
        yield srv


@pytest.fixture(autouse=True)
def _reset(server: FakeServer) -> Iterator[None]:
    yield
    server.fault, server.prefix_cache = None, False


def send(ep: Endpoint, spec: RequestSpec, http_client: str = "auto") -> Record:
    async def go() -> Record:
        async with HarnessClient(max_connections=2, http_client=http_client) as client:
            return await client.send(ep, spec, RunClock())

    return asyncio.run(go())


def spec(n: int = 8, stream: bool = True, prompt: str = "a b c d e", **params: object
         ) -> RequestSpec:
    return RequestSpec(prompt=prompt, max_tokens=n, stream=stream, params=dict(params),
                       run_id="r", mode="m", capacity=512, query_id="q01")


def endpoint(server: FakeServer, api: ApiKind) -> Endpoint:
    return Endpoint(base_url=server.base_url, api=api, model="m1", api_key=KEY)


@pytest.mark.parametrize("http_client", ["auto", "aiohttp"])
@pytest.mark.parametrize("api", NEW_APIS)
def test_a_stream_reads_into_a_valid_row(server: FakeServer, api: ApiKind,
                                         http_client: str) -> None:
    rec = send(endpoint(server, api), spec(8), http_client)
    assert rec.outcome is Outcome.OK, rec.error
    assert rec.text == "".join(f"t{i} " for i in range(8)) and len(rec.chunk_ns) == 8
    assert (rec.output_tokens, rec.prompt_tokens, rec.cached_tokens) == (8, 5, 0)
    assert rec.saw_terminator and rec.saw_usage
    assert check_row(rec) == []


@pytest.mark.parametrize("api", NEW_APIS)
def test_a_whole_answer_reads_into_a_valid_row(server: FakeServer, api: ApiKind) -> None:
    rec = send(endpoint(server, api), spec(6, stream=False))
    assert rec.outcome is Outcome.OK, rec.error
    assert rec.text.startswith("t0 ") and rec.output_tokens == 6
    assert check_row(rec) == []


def test_messages_carry_anthropics_headers_and_the_key_nowhere_else(server: FakeServer
                                                                    ) -> None:
    server.requests.clear()
    rec = send(endpoint(server, ApiKind.ANTHROPIC_MESSAGES), spec(2))
    headers = server.requests[-1]["headers"]
    assert headers["x-api-key"] == KEY and headers["anthropic-version"] == "2023-06-01"
    assert "Authorization" not in headers
    assert KEY not in rec.model_dump_json()
    wrong = Endpoint(server.base_url, ApiKind.ANTHROPIC_MESSAGES, "m1", api_key="nope")
    assert send(wrong, spec(2)).http_status == 401


# -- bad input: one refusal class each, nothing received lost -----------------------


@pytest.mark.parametrize("api", NEW_APIS)
def test_a_stream_cut_mid_block_is_stream_cut(server: FakeServer, api: ApiKind) -> None:
    rec = send(endpoint(server, api), spec(8, fake_fault="cut"))
    assert rec.outcome is Outcome.DISCONNECTED and rec.text == "t0 t1 t2 t3 "
    (violation,) = check_row(rec)
    assert violation.reason is Reason.STREAM_CUT
    if api is ApiKind.ANTHROPIC_MESSAGES:  # where it was cut: inside the text block
        assert rec.notes == ["the stream was cut inside a text block (index 0)"]
        assert "inside a text block" in violation.detail


@pytest.mark.parametrize("api", NEW_APIS)
@pytest.mark.parametrize(("fault", "reason"), [
    ("malformed", Reason.MALFORMED), ("error_event", Reason.MALFORMED),
    ("wrong_api", Reason.WRONG_API), ("not_sse", Reason.MALFORMED),
    ("no_done", Reason.STREAM_CUT)])
def test_each_fault_is_one_refusal_class(server: FakeServer, api: ApiKind, fault: str,
                                         reason: Reason) -> None:
    rec = send(endpoint(server, api), spec(4, fake_fault=fault))
    (violation,) = check_row(rec)
    assert violation.reason is reason, (rec.outcome, rec.error)
    if fault in ("malformed", "error_event"):
        assert rec.text.startswith("t0 t1 ")  # what came before the bad event is kept
    if fault == "wrong_api":
        assert rec.outcome is Outcome.WRONG_API
        assert "openai-chat" in (rec.error or "")  # names the API it answered in


@pytest.mark.parametrize("api", NEW_APIS)
def test_wrong_counts_and_missing_usage_are_refused(server: FakeServer, api: ApiKind
                                                    ) -> None:
    wrong = send(endpoint(server, api), spec(6, fake_fault="wrong_tokens"))
    assert [v.reason for v in check_row(wrong)] == [Reason.OUTPUT_TOKENS]
    bare = send(endpoint(server, api), spec(6, fake_fault="no_usage"))
    assert bare.outcome is Outcome.OK and bare.saw_usage is False
    assert Reason.NO_USAGE in [v.reason for v in check_row(bare)]


@pytest.mark.parametrize("api", NEW_APIS)
def test_cached_tokens_under_cache_prompt_false_are_prefix_reuse(server: FakeServer,
                                                                 api: ApiKind) -> None:
    server.prefix_cache = True
    shared = " ".join(f"w{i}" for i in range(40))
    send(endpoint(server, api), spec(2, prompt=shared + " first", **FORCED))
    rec = send(endpoint(server, api), spec(2, prompt=shared + " second", **FORCED))
    assert rec.cached_tokens == 32 and rec.prompt_tokens == 41  # the prompt, cache included
    (violation,) = check_row(rec)
    assert violation.reason is Reason.PREFIX_REUSE and "32 of 41" in violation.detail


def test_a_server_without_tokenize_sizes_prompts_by_count_tokens(server: FakeServer
                                                                 ) -> None:
    """The fake has no /tokenize: Messages' own count comes before usage probes."""
    import httpx

    from kvlab.bench.plan.sizing import choose_counter

    async def count() -> tuple[str, int]:
        async with httpx.AsyncClient() as client:
            counter = await choose_counter(client, endpoint(server, ApiKind.ANTHROPIC_MESSAGES),
                                           {}, None)
            return counter.sizing.method, await counter("one two three")

    server.requests.clear()
    assert asyncio.run(count()) == ("api-count", 5)  # 3 words and the fake's template
    assert all(r["path"] == "/v1/messages/count_tokens" for r in server.requests)
    assert server.requests[-1]["headers"]["x-api-key"] == KEY


@pytest.mark.parametrize("api", [ApiKind.OPENAI_CHAT, ApiKind.OPENAI_COMPLETION])
def test_openai_routes_answered_in_anthropics_shape_are_wrong_api(server: FakeServer,
                                                                  api: ApiKind) -> None:
    rec = send(endpoint(server, api), spec(4, fake_fault="wrong_api"))
    assert rec.outcome is Outcome.WRONG_API and "anthropic-messages" in (rec.error or "")
    assert [v.reason for v in check_row(rec)] == [Reason.WRONG_API]
