"""One Record per exchange, built in one place; only the response parser says malformed."""

from __future__ import annotations

import asyncio

import pytest

from kvlab.bench.client.endpoints import (
    Endpoint,
    HarnessClient,
    RequestSpec,
    record_of,
)
from kvlab.bench.client.responses import ResponseFacts
from kvlab.rundir import RECORD_SCHEMA, ApiKind, Outcome, Record, RunClock
from tests.fakeserver import FakeServer

KEY = "sk-record-of-test"


@pytest.fixture(scope="module")
def server():
    with FakeServer(api_key=KEY) as srv:
        yield srv


def send(server: FakeServer, api: ApiKind, spec: RequestSpec) -> Record:
    async def go() -> Record:
        async with HarnessClient() as client:
            return await client.send(Endpoint(server.base_url, api, "m1", api_key=KEY), spec,
                                     RunClock())

    return asyncio.run(go())


SPEC = RequestSpec(prompt="a b c", max_tokens=6, run_id="r", mode="m", capacity=512,
                   query_id="q07", repetition=2, position=11, warmup=True, load="c=4",
                   t_scheduled=123)


def test_the_record_carries_the_spec_and_the_facts() -> None:
    facts = ResponseFacts()
    facts.status, facts.output, facts.cached, facts.texts = 200, 6, 0, ["x", "y"]
    facts.error = f"echo {KEY}"
    endpoint = Endpoint("http://h", ApiKind.OPENAI_CHAT, "m1", api_key=KEY)
    record = record_of(endpoint, SPEC, "/v1/chat/completions", {"n": 1}, facts, 5, 9)
    identity = SPEC.identity()
    assert {k: getattr(record, k) for k in identity} == identity
    assert (record.t_sent, record.t_end, record.http_status) == (5, 9, 200)
    assert (record.output_tokens, record.cached_tokens, record.text) == (6, 0, "xy")
    assert record.error == "echo ***"  # the key never reaches a record
    # every Record field is set from the spec, the request or the facts
    named = set(identity) | set(facts.record_fields()) | {
        "api", "path", "stream", "body", "prompt_sha256", "prompt", "requested_tokens",
        "t_sent", "t_end", "error", "schema_version"}
    assert named == set(Record.model_fields) - {"imported_from"}
    assert record.schema_version == RECORD_SCHEMA  # the layout kvlab's client writes


@pytest.mark.parametrize("api", [ApiKind.LLAMACPP_COMPLETION, ApiKind.OPENAI_CHAT])
def test_json_of_the_wrong_shape_is_malformed(server, api) -> None:
    spec = RequestSpec(prompt="a b c", max_tokens=6, params={"fake_fault": "wrong_shape"})
    record = send(server, api, spec)
    assert record.outcome is Outcome.MALFORMED
    assert record.error is not None and record.error.startswith("MalformedResponse: ")


def test_a_fault_of_kvlab_itself_is_raised_not_recorded(server, monkeypatch) -> None:
    """A bug outside the response parser (here: the exchange) must not become a row."""

    async def broken(*args: object, **kwargs: object) -> None:
        raise AttributeError("kvlab bug")

    monkeypatch.setattr(HarnessClient, "_exchange", broken)
    with pytest.raises(AttributeError, match="kvlab bug"):
        send(server, ApiKind.OPENAI_CHAT, RequestSpec(prompt="a", max_tokens=2))


@pytest.mark.parametrize("stream", [False, True])
def test_a_server_without_timings_has_no_row_refused_as_prefix_reuse(server, stream) -> None:
    """llama.cpp's answer without ``timings`` still says ``tokens_cached`` (prompt +
    generated tokens in the slot); it is no cached-prompt count, so no row is refused
    as prefix_reuse for it."""
    from kvlab.analysis.validate import check_row

    spec = RequestSpec(prompt="a b c", max_tokens=6, stream=stream, run_id="r", mode="m",
                       capacity=512, query_id="q01",
                       params={"fake_fault": "no_timings", "cache_prompt": False})
    record = send(server, ApiKind.LLAMACPP_COMPLETION, spec)
    assert record.outcome == Outcome.OK and record.timings is None
    assert record.cached_tokens is None and record.output_tokens == 6
    assert check_row(record) == []


def test_a_sessions_turn_sends_its_conversation_and_its_record_names_the_session() -> None:
    from kvlab.bench.client.endpoints import build_body

    messages = ({"role": "user", "content": "a b"}, {"role": "assistant", "content": "c"},
                {"role": "user", "content": "d e"})
    spec = RequestSpec(prompt="d e", max_tokens=2, params={"temperature": 0},
                       messages=messages, session="s1", turn=2, query_id="s1.t2")
    endpoint = Endpoint("http://x.invalid", ApiKind.OPENAI_CHAT, "m")
    body = build_body(endpoint, spec)
    assert body["messages"] == list(messages) and body["temperature"] == 0
    record = record_of(endpoint, spec, "/v1/chat/completions", body, ResponseFacts(), 1, 2)
    assert (record.session, record.turn, record.prompt) == ("s1", 2, "d e")
    # the prompt's digest is of the whole conversation sent: another history, another one
    other = record_of(endpoint, RequestSpec(**{**spec.__dict__, "messages": messages[2:]}),
                      "/v1/chat/completions", body, ResponseFacts(), 1, 2)
    assert record.prompt_sha256 != other.prompt_sha256
    with pytest.raises(ValueError, match="a conversation needs a chat API"):
        build_body(Endpoint("http://x.invalid", ApiKind.LLAMACPP_COMPLETION), spec)
