"""The app's gate and error shapes: loading 503, API key 401, bad requests 400."""

from __future__ import annotations

import threading

import httpx
import pytest

from kvlab.errors import ConfigError
from kvlab.serve import BackgroundServer, ServeSettings, create_app
from tests.serve.conftest import start, wait_ready

LOADING = {"error": {"message": "Loading model", "type": "unavailable_error", "code": 503}}
BAD_KEY = {"error": {"message": "Invalid API Key", "type": "authentication_error", "code": 401}}


def test_health_is_503_while_loading_then_200() -> None:
    gate = threading.Event()
    app = create_app(ServeSettings(n_ctx=32, threads=1), load_gate=gate)
    with BackgroundServer(app) as server:
        for path in ("/health", "/props", "/v1/models"):
            response = httpx.get(server.base_url + path)
            assert response.status_code == 503
            openai = {"param": None} if path.startswith("/v1/") else {}
            assert response.json() == {"error": {**LOADING["error"], **openai}}
        gate.set()
        wait_ready(server.base_url)
        assert httpx.get(server.base_url + "/health").json() == {"status": "ok"}


@pytest.fixture(scope="module")
def keyed_url():
    yield from start(api_key="s3cret-key")


@pytest.mark.parametrize("headers", [
    {}, {"Authorization": "Bearer wrong"}, {"X-Api-Key": "wrong"}, {"Authorization": "s3cret-key"},
])
def test_wrong_or_missing_key_is_401(keyed_url: str, headers: dict[str, str]) -> None:
    for method, path in (("GET", "/props"), ("GET", "/v1/models"), ("POST", "/completion")):
        response = httpx.request(method, keyed_url + path, headers=headers,
                                 json={"prompt": "a", "n_predict": 1})
        assert response.status_code == 401
        openai = {"param": None} if path.startswith("/v1/") else {}
        assert response.json() == {"error": {**BAD_KEY["error"], **openai}}


def test_right_key_passes_and_health_needs_none(keyed_url: str) -> None:
    assert httpx.get(keyed_url + "/health").status_code == 200
    for headers in ({"Authorization": "Bearer s3cret-key"}, {"X-Api-Key": "s3cret-key"}):
        response = httpx.post(keyed_url + "/completion", headers=headers,
                              json={"prompt": "a", "n_predict": 2, "temperature": 0})
        assert response.status_code == 200
        assert "s3cret" not in response.text
    props = httpx.get(keyed_url + "/props", headers={"X-Api-Key": "s3cret-key"})
    assert "s3cret" not in props.text


@pytest.mark.parametrize("path", ["/completion", "/v1/completions", "/v1/chat/completions",
                                  "/tokenize"])
def test_malformed_json_is_400(base_url: str, path: str) -> None:
    response = httpx.post(base_url + path, content=b'{"prompt": "a",',
                          headers={"Content-Type": "application/json"})
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["type"] == "invalid_request_error" and error["code"] == 400


@pytest.mark.parametrize("body", [
    {"n_predict": 3}, {"prompt": ""}, {"prompt": "a", "n_predict": "many"},
    {"prompt": "a", "n_predict": -2}, {"prompt": ["a", "b"]}, {"prompt": [1, 999]},
])
def test_bad_fields_are_400(base_url: str, body: dict) -> None:
    response = httpx.post(base_url + "/completion", json=body)
    assert response.status_code == 400
    assert response.json()["error"]["type"] == "invalid_request_error"


def test_unknown_route_is_404(base_url: str) -> None:
    response = httpx.get(base_url + "/nowhere")
    assert response.status_code == 404
    assert response.json()["error"]["type"] == "not_found_error"


def test_ctx_size_beyond_the_preset_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="8192"):
        create_app(ServeSettings(n_ctx=999_999))


def test_settings_repr_hides_the_key() -> None:
    assert "s3cret" not in repr(ServeSettings(api_key="s3cret"))
