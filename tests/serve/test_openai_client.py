"""OpenAI's own Python client against kvlab serve: what an application would see.

The client parses every answer into its typed models, so a shape it cannot read fails
here; forced lengths (``ignore_eos``, kvlab's extra body field) come back exactly.
"""

from __future__ import annotations

import openai
import pytest

FORCED = {"ignore_eos": True, "cache_prompt": False, "seed": 42}


@pytest.fixture(scope="module")
def client(base_url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=base_url + "/v1", api_key="unused", timeout=60)


def test_models(client: openai.OpenAI) -> None:
    (model,) = client.models.list().data
    assert model.id == "toy" and model.owned_by == "kvlab"


def test_chat_counts_the_forced_tokens(client: openai.OpenAI) -> None:
    answer = client.chat.completions.create(
        model="toy", messages=[{"role": "user", "content": "hi"}], max_tokens=6,
        temperature=0, extra_body=FORCED)
    assert answer.object == "chat.completion"
    assert answer.choices[0].finish_reason == "length"
    assert answer.usage is not None and answer.usage.completion_tokens == 6
    assert answer.usage.prompt_tokens_details is not None
    assert answer.usage.prompt_tokens_details.cached_tokens == 0


@pytest.mark.parametrize("chat", [True, False])
def test_streams_end_with_a_usage_chunk_without_choices(client: openai.OpenAI,
                                                        chat: bool) -> None:
    common = {"model": "toy", "max_tokens": 7, "temperature": 0, "stream": True,
              "stream_options": {"include_usage": True}, "extra_body": FORCED}
    if chat:
        chunks = list(client.chat.completions.create(
            messages=[{"role": "user", "content": "hi"}], **common))
        text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    else:
        chunks = list(client.completions.create(prompt="Once", **common))
        text = "".join(c.choices[0].text for c in chunks if c.choices)
    *body, last = chunks
    assert last.choices == [] and last.usage is not None
    assert last.usage.completion_tokens == 7
    assert all(c.usage is None for c in body)  # usage once, where OpenAI puts it
    assert [c.choices[0].finish_reason for c in body if c.choices][-1] == "length"
    assert text  # the generated text came through the client's models


def test_the_responses_client_streams_its_typed_events(client: openai.OpenAI) -> None:
    """``client.responses.stream``: every event parsed into the client's models, the text
    it accumulates, and the final response with its usage."""
    with client.responses.stream(model="toy", input="hi", max_output_tokens=6,
                                 temperature=0, extra_body=FORCED) as stream:
        kinds = [event.type for event in stream]
        final = stream.get_final_response()
    assert kinds[:2] == ["response.created", "response.in_progress"]
    assert kinds.count("response.output_text.delta") >= 1
    assert kinds[-1] == "response.completed"  # the one end the client's helper reads
    assert final.status == "incomplete" and final.incomplete_details is not None
    assert final.incomplete_details.reason == "max_output_tokens"
    assert final.usage is not None and final.usage.output_tokens == 6
    assert final.usage.input_tokens_details.cached_tokens == 0
    assert final.output_text  # the text the deltas carried


def test_the_responses_client_continues_a_stored_response(client: openai.OpenAI) -> None:
    first = client.responses.create(model="toy", input="hi", max_output_tokens=3,
                                    temperature=0, extra_body=FORCED)
    second = client.responses.create(model="toy", input="more", max_output_tokens=3,
                                     temperature=0, previous_response_id=first.id,
                                     extra_body=FORCED)
    alone = client.responses.create(model="toy", input="more", max_output_tokens=3,
                                    temperature=0, extra_body=FORCED)
    assert second.usage is not None and first.usage is not None and alone.usage is not None
    # the stored conversation (first prompt and answer) came before the new input
    assert second.usage.input_tokens > alone.usage.input_tokens + first.usage.output_tokens
    with pytest.raises(openai.BadRequestError, match="no stored response"):
        client.responses.create(model="toy", input="x", max_output_tokens=2,
                                previous_response_id="resp_unknown")
