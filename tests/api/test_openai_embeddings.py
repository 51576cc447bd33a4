"""OpenAI embeddings: what a client keeps of an answer (vectors, lengths, values that
are not finite) and the refusals of answers that are not one."""

from __future__ import annotations

import json

import pytest

from kvlab.api.dialects import ApiKind, dialect_of
from kvlab.api.facts import AnswerFacts, MalformedResponse, WrongApi
from kvlab.api.openai_embeddings import OpenAIEmbeddings, vectors_answer

EMBEDDINGS = dialect_of(ApiKind.OPENAI_EMBEDDINGS)


def test_a_batch_travels_as_input_and_an_answer_reads_back_its_vectors() -> None:
    assert isinstance(EMBEDDINGS, OpenAIEmbeddings) and not EMBEDDINGS.generates
    assert EMBEDDINGS.inputs_fields(["a", "b"]) == {"input": ["a", "b"]}
    body = EMBEDDINGS.body("a", 0, False, "m")
    assert body == {"model": "m", "input": ["a"], "encoding_format": "float"}
    answer = json.loads(json.dumps(vectors_answer("m", [[0.6, 0.8], [1.0, 0.0]], 7)))
    facts = AnswerFacts()
    EMBEDDINGS.read_answer(facts, answer)
    assert (facts.vectors, facts.dimensions, facts.non_finite, facts.prompt_tokens) == (
        2, [2], 0, 7)
    probe = EMBEDDINGS.probe_body("a", {"seed": 1, "stream": True}, "m")
    assert probe == {"model": "m", "input": ["a"], "encoding_format": "float", "seed": 1}


def test_nan_null_and_lengths_that_differ_are_counted() -> None:
    answer = json.loads('{"object": "list", "data": [{"index": 0, "embedding": [NaN, 1]},'
                        '{"index": 1, "embedding": [null, 1, 2]}]}')
    facts = AnswerFacts()
    EMBEDDINGS.read_answer(facts, answer)
    assert (facts.vectors, facts.dimensions, facts.non_finite) == (2, [2, 3], 2)


@pytest.mark.parametrize(("answer", "error"), [
    ({"object": "list", "data": [{"index": 0, "embedding": "AAAA"}]}, MalformedResponse),
    ({"object": "list", "data": [{"index": 1, "embedding": [1.0]}]}, MalformedResponse),
    ({"object": "list", "data": [{"index": 0}]}, MalformedResponse),
    ({"object": "chat.completion", "choices": [{"message": {}}]}, WrongApi),
])
def test_an_answer_that_is_not_vectors_is_refused(answer: dict, error: type) -> None:
    with pytest.raises(error):
        EMBEDDINGS.read_answer(AnswerFacts(), answer)


def test_it_neither_streams_nor_writes_token_events() -> None:
    with pytest.raises(MalformedResponse, match="not a stream"):
        EMBEDDINGS.read_events(AnswerFacts(), [b"{}"], 1)
    with pytest.raises(ValueError):
        dialect_of(ApiKind.OPENAI_CHAT).inputs_fields(["a"])
