"""Anthropic's own Python client against kvlab serve: its Messages stream, its whole
message, its token count, and its headers (``x-api-key``, ``anthropic-version``)."""

from __future__ import annotations

from collections.abc import Iterator

import anthropic
import pytest

from tests.serve.conftest import start

# temperature too: this client (2.x) no longer takes it as an argument
FORCED = {"ignore_eos": True, "cache_prompt": False, "seed": 42, "temperature": 0}


@pytest.fixture(scope="module")
def client() -> Iterator[anthropic.Anthropic]:
    """A server with an API key: the client authenticates with x-api-key."""
    for url in start(api_key="secret-key"):
        yield anthropic.Anthropic(base_url=url, api_key="secret-key", timeout=60)


def test_the_client_streams_a_message_with_its_usage(client: anthropic.Anthropic) -> None:
    with client.messages.stream(model="toy", max_tokens=6,
                                messages=[{"role": "user", "content": "hi"}],
                                extra_body=FORCED) as stream:
        kinds = [event.type for event in stream]
        text = stream.get_final_text()
        final = stream.get_final_message()
    assert kinds[0] == "message_start" and "content_block_delta" in kinds
    assert kinds[-1] == "message_stop"
    assert final.stop_reason == "max_tokens" and text == final.content[0].text  # type: ignore[union-attr]
    assert final.usage.output_tokens == 6
    assert final.usage.cache_read_input_tokens == 0


def test_a_whole_message_and_its_token_count_agree(client: anthropic.Anthropic) -> None:
    messages = [{"role": "user", "content": "hello there"}]
    counted = client.messages.count_tokens(model="toy", messages=messages)  # type: ignore[arg-type]
    answer = client.messages.create(model="toy", max_tokens=4,
                                    messages=messages, extra_body=FORCED)  # type: ignore[arg-type]
    assert answer.type == "message" and answer.usage.output_tokens == 4
    assert counted.input_tokens == answer.usage.input_tokens > 3  # template included


def test_a_wrong_key_is_refused() -> None:
    for url in start(api_key="secret-key"):
        wrong = anthropic.Anthropic(base_url=url, api_key="nope", timeout=30)
        with pytest.raises(anthropic.AuthenticationError):
            wrong.messages.create(model="toy", max_tokens=2,
                                  messages=[{"role": "user", "content": "hi"}])
