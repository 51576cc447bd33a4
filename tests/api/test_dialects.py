"""The registry and what every dialect shares: what a server writes in a dialect, the
same dialect reads back as the facts it wrote; requests, probes, usage and tokenize.

Real servers speak these dialects in tests/serve (kvlab serve, the synthetic server,
OpenAI's own client) and tests/bench/client (the harness against them).
"""

from __future__ import annotations

import json

import pytest

from kvlab.api.dialect import AnswerHead, Dialect, Finish
from kvlab.api.dialects import DIALECTS, ApiKind, dialect_at, dialect_of
from kvlab.api.facts import AnswerFacts
from kvlab.api.wire import loads
from kvlab.bench.client.sse import SSEParser

EVERY = [pytest.param(d, id=str(k)) for k, d in DIALECTS.items()]
GENERATING = [pytest.param(d, id=str(k)) for k, d in DIALECTS.items() if d.generates]
HEAD = AnswerHead(id="x-1", created=1700000000, model="m\u00e9", fingerprint="fp",
                  n_prompt=11)
FINISH = Finish(text="Hi \u00e9!", tail="!", n_output=4, stop_type="eos", truncated=False,
                cached=3, timings={"cache_n": 3, "prompt_ms": 1.5, "predicted_ms": 2.0},
                token_ids=(5, 6, 7, 8))


def test_every_api_kind_has_one_dialect_and_every_route_one_dialect() -> None:
    assert set(DIALECTS) == set(ApiKind)
    routes = [r for d in DIALECTS.values() for r in d.routes]
    assert len(routes) == len(set(routes))
    for kind, dialect in DIALECTS.items():
        assert dialect.kind == kind and dialect.routes[0] == dialect.path
        assert dialect_of(kind.value) is dialect and dialect_at(dialect.path) is dialect
    assert dialect_at("/v2/nothing") is None
    with pytest.raises(ValueError):
        dialect_of("grpc")


def _split(stream: bytes) -> list[bytes]:
    """SSE data payloads of a stream the way the client's parser hands them over."""
    parser = SSEParser()
    return parser.feed(stream) + parser.close()


# APIs whose stream always ends with its usage (OpenAI's only when stream_options asks)
ALWAYS_USAGE = (ApiKind.OPENAI_RESPONSES, ApiKind.ANTHROPIC_MESSAGES)


@pytest.mark.parametrize("dialect", GENERATING)
def test_a_stream_written_in_a_dialect_reads_back_as_what_was_written(dialect: Dialect
                                                                      ) -> None:
    pieces = ["Hi", " \u00e9", ""]  # the last token's text is not complete yet
    stream = dialect.opening(HEAD) + b"".join(
        dialect.token_event(HEAD, text, (i,), i + 1) for i, text in enumerate(pieces))
    stream += dialect.closing(HEAD, FINISH, include_usage=True, extra={"x": 1})
    stream += dialect.done
    facts = AnswerFacts()
    events = _split(stream)
    if dialect.done:  # OpenAI: ended by [DONE] alone
        assert dialect.read_events(facts, events[:-1], 10) is False
        assert dialect.read_events(facts, events[-1:], 20) is True
    else:  # llama.cpp: by its final event
        assert dialect.read_events(facts, events, 10) is True
    assert "".join(facts.texts) == "Hi \u00e9!"  # the tail arrives with the closing
    assert facts.saw_terminator is True
    assert (facts.prompt_tokens, facts.output, facts.cached) == (11, 4, 3)
    assert facts.timings == FINISH.timings
    # llama.cpp's own word, OpenAI's, Anthropic's, or a Responses status
    assert facts.stop_type in ("eos", "stop", "end_turn", "completed")
    assert json.loads(events[-2 if dialect.done else -1])["x"] == 1  # extra: last event
    # one output chunk per token with text, or with a token when the event says how
    # many it holds (llama.cpp's do; an OpenAI delta does not), and the tail
    counted = facts.chunk_tokens[0] is not None
    assert len(facts.chunk_ns) == (4 if counted else 3)


@pytest.mark.parametrize("dialect", GENERATING)
def test_a_stream_not_asked_for_usage_states_no_counts_in_openai(dialect: Dialect) -> None:
    """OpenAI's usage chunk comes only when stream_options asks; llama.cpp's final
    event always states the counts."""
    facts = AnswerFacts()
    stream = dialect.closing(HEAD, FINISH, include_usage=False) + dialect.done
    assert dialect.read_events(facts, _split(stream), 5) is True
    always = dialect.kind in ALWAYS_USAGE
    assert facts.saw_usage is (True if always else None)  # None: none came (client: False)
    assert facts.prompt_tokens == (None if dialect.states_usage and not always else 11)
    assert facts.timings == FINISH.timings  # on the last chunk either way


@pytest.mark.parametrize("dialect", GENERATING)
def test_a_whole_answer_reads_back_and_states_its_prompt_tokens(dialect: Dialect) -> None:
    answer = json.loads(json.dumps(dialect.whole(HEAD, FINISH)))
    facts = AnswerFacts()
    dialect.read_answer(facts, answer)
    assert "".join(facts.texts) == FINISH.text
    assert (facts.prompt_tokens, facts.output, facts.cached) == (11, 4, 3)
    assert dialect.prompt_tokens(answer) == 11
    assert dialect.prompt_tokens({"usage": {"prompt_tokens": True}}) is None
    assert dialect.prompt_tokens([1]) is None


@pytest.mark.parametrize("dialect", GENERATING)
def test_the_body_and_the_probe_ask_what_they_say(dialect: Dialect) -> None:
    body = dialect.body("tell me", 64, True, "m")
    assert body["stream"] is True and body[dialect.max_tokens_field] == 64
    assert dialect.prompt_field in body and ("model" in body) is dialect.needs_model
    probe = dialect.probe_body("tell me", {"n_predict": 9, "max_tokens": 9, "seed": 1,
                                           "stream": True}, "m")
    assert probe[dialect.max_tokens_field] == 1 and probe["stream"] is False
    assert probe["seed"] == 1 and "stream_options" not in probe
    assert {"n_predict", "max_tokens", dialect.max_tokens_field} & set(probe) == {
        dialect.max_tokens_field}


@pytest.mark.parametrize("dialect", GENERATING)
def test_token_events_are_json_and_count_their_tokens(dialect: Dialect) -> None:
    raw = dialect.token_event(HEAD, 'a "quoted" \u00e9', (1, 2), 2)
    facts = AnswerFacts()
    dialect.read_events(facts, _split(raw), 1)
    assert facts.texts == ['a "quoted" \u00e9']
    assert facts.chunk_tokens in ([2], [None])  # what the event says it holds, if it says
    assert dialect.event_tokens(loads(_split(raw)[0])) == (facts.chunk_tokens[0] or 1)


def test_tokenize_is_one_body_every_server_reads() -> None:
    counts = {d.token_count({"tokens": [1, 2, 3]}) for d in DIALECTS.values()}
    assert counts == {3}
    dialect = dialect_of(ApiKind.OPENAI_CHAT)
    assert dialect.tokenize_body("x", "m") == {"content": "x", "prompt": "x", "model": "m"}
    assert dialect.token_count({"count": 7, "tokens": [1]}) == 7
    assert dialect.token_count({"detail": "not found"}) is None


def test_a_conversation_travels_as_messages_in_a_chat_api_only() -> None:
    """What a client sends of a conversation, a server of that API reads back as the
    same chat messages (kvlab serve's conversion, as llama-server's)."""
    messages = ({"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"},
                {"role": "assistant", "content": "yes"}, {"role": "user", "content": "42"})
    for dialect in DIALECTS.values():
        if dialect.chat:
            sent = {**dialect.body("x", 8, False, "m"), **dialect.messages_fields(messages)}
            assert dialect.chat_request(json.loads(json.dumps(sent)))["messages"] == \
                list(messages), dialect.kind
        else:
            with pytest.raises(ValueError, match="takes one prompt, not chat messages"):
                dialect.messages_fields(messages)
