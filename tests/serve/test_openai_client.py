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
