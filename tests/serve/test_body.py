"""Request bodies: strict JSON, bounded depth and size, each refusal a 400 in the
route's API shape (streamed or not), and the greedy-temperature rule."""

from __future__ import annotations

import httpx
import pytest

from kvlab.serve.api_errors import ApiError
from kvlab.serve.body import MAX_BODY_BYTES, MAX_DEPTH, nesting_depth, parse_json_body
from kvlab.serve.params import GREEDY_BELOW, parse_gen_params
from tests.serve.conftest import stream_json

CHAT = '{"messages":[{"role":"user","content":"hi"}],"max_tokens":3%s}'
COMPLETION = '{"prompt":"hi","n_predict":3%s}'
ROUTES = [("/completion", COMPLETION, False), ("/v1/completions", COMPLETION, True),
          ("/v1/chat/completions", CHAT, True)]


def test_nesting_depth_ignores_brackets_inside_strings() -> None:
    assert nesting_depth(b'{"a": [1, [2]], "s": "[[[[{{{{"}') == 3
    assert nesting_depth(b'{"s": "a \\" [[[ "}') == 1
    assert nesting_depth(b"[" * 100_000 + b"]" * 100_000) == MAX_DEPTH + 1


@pytest.mark.parametrize("raw", [
    b'{"temperature": NaN}', b'{"temperature": Infinity}', b'{"temperature": -Infinity}',
    b'{"temperature": 1e400}', b"[" * (MAX_DEPTH + 1) + b"]" * (MAX_DEPTH + 1),
    b"[1, 2]", b'"text"',
])
def test_parse_refuses_non_standard_json(raw: bytes) -> None:
    with pytest.raises(ApiError) as caught:
        parse_json_body(raw)
    assert caught.value.status == 400


def test_parse_accepts_depth_at_the_limit() -> None:
    nested = "[" * (MAX_DEPTH - 1) + "]" * (MAX_DEPTH - 1)
    assert parse_json_body(f'{{"x": {nested}}}'.encode()) == {"x": parse_json_body(
        f'{{"y": {nested}}}'.encode())["y"]}


@pytest.mark.parametrize("value", [0, 0.0, 1e-40, GREEDY_BELOW / 2, -3])
def test_tiny_zero_and_negative_temperatures_are_greedy(value: float) -> None:
    assert parse_gen_params({"temperature": value}, 42).temperature == 0.0


def test_temperature_at_the_epsilon_samples() -> None:
    assert parse_gen_params({"temperature": GREEDY_BELOW}, 42).temperature == GREEDY_BELOW


def test_huge_integer_temperature_is_400() -> None:
    with pytest.raises(ApiError, match="finite"):
        parse_gen_params({"temperature": 10**400}, 42)


def _post(base_url: str, path: str, raw: bytes) -> httpx.Response:
    return httpx.post(base_url + path, content=raw, timeout=60,
                      headers={"Content-Type": "application/json"})


@pytest.mark.parametrize("value", ["NaN", "Infinity", "-Infinity", "1e400"])
@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize(("path", "template", "openai"), ROUTES)
def test_non_finite_numbers_are_400_in_the_api_shape(
        base_url: str, path: str, template: str, openai: bool, stream: bool, value: str) -> None:
    extra = f',"temperature":{value}' + (',"stream":true' if stream else "")
    response = _post(base_url, path, (template % extra).encode())
    assert response.status_code == 400
    assert response.headers["content-type"] == "application/json"
    error = response.json()["error"]
    assert error["type"] == "invalid_request_error" and error["code"] == 400
    assert ("param" in error) is openai


@pytest.mark.parametrize(("path", "template", "openai"), ROUTES)
def test_deep_nesting_is_400_not_a_recursion_error(
        base_url: str, path: str, template: str, openai: bool) -> None:
    raw = (template % (',"extra":' + "[" * 100_000 + "]" * 100_000)).encode()
    response = _post(base_url, path, raw)
    assert response.status_code == 400
    assert str(MAX_DEPTH) in response.json()["error"]["message"]


@pytest.mark.parametrize(("path", "template", "openai"), ROUTES)
def test_body_over_the_size_limit_is_400(base_url: str, path: str, template: str,
                                         openai: bool) -> None:
    padding = "x" * (MAX_BODY_BYTES + 1)
    response = _post(base_url, path, (template % f',"pad":"{padding}"').encode())
    assert response.status_code == 400
    assert str(MAX_BODY_BYTES) in response.json()["error"]["message"]


@pytest.mark.parametrize(("path", "template", "openai"), ROUTES)
def test_tiny_temperature_decodes_like_zero(base_url: str, path: str, template: str,
                                            openai: bool) -> None:
    def answer(temperature: str) -> str:
        response = _post(base_url, path, (template % f',"temperature":{temperature}').encode())
        assert response.status_code == 200, response.text
        body = response.json()
        if "content" in body:
            return body["content"]
        choice = body["choices"][0]
        return choice.get("text") or choice["message"]["content"]

    assert answer("1e-40") == answer("0")


def test_tiny_temperature_streams_without_an_error_event(base_url: str) -> None:
    events = stream_json(base_url, "/completion",
                         {"prompt": "hi", "n_predict": 3, "temperature": 1e-40})
    assert all("error" not in e for e in events) and events[-1]["stop"] is True


def test_with_pieces_must_be_a_boolean(base_url: str) -> None:
    bad = httpx.post(base_url + "/tokenize", json={"content": "ab", "with_pieces": 1})
    assert bad.status_code == 400 and "with_pieces" in bad.json()["error"]["message"]
    good = httpx.post(base_url + "/tokenize", json={"content": "ab", "with_pieces": True})
    assert good.json()["tokens"][0] == {"id": 97, "piece": "a"}


@pytest.mark.parametrize(("method", "path", "allow"), [
    ("GET", "/completion", "POST"), ("DELETE", "/v1/chat/completions", "POST"),
    ("POST", "/health", "GET"),
])
def test_405_carries_allow(base_url: str, method: str, path: str, allow: str) -> None:
    response = httpx.request(method, base_url + path)
    assert response.status_code == 405
    assert response.headers["allow"] == allow
    assert response.json()["error"]["code"] == 405
