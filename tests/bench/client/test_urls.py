"""Endpoint URLs: an invalid one is named as such; shown URLs carry no secret."""

from __future__ import annotations

import pytest

from kvlab.bench.client.urls import redact_url, require_http_url
from kvlab.errors import ConfigError


@pytest.mark.parametrize("url", ["htp:/127.0.0.1:8080/v1", "http:/127.0.0.1/v1",
                                 "127.0.0.1:8080", "http://h:99999/v1", "http://h:port/v1",
                                 "ftp://h/v1"])
def test_invalid_urls_are_refused_as_invalid(url: str) -> None:
    with pytest.raises(ConfigError, match="invalid URL"):
        require_http_url(url, "mode x: base_url")


@pytest.mark.parametrize("url", ["http://127.0.0.1:8080/v1", "https://api.example.com/v1",
                                 "http://[::1]:8080"])
def test_http_urls_pass(url: str) -> None:
    require_http_url(url, "mode x: base_url")


def test_redaction_drops_credentials_and_query() -> None:
    assert redact_url("https://user:pw@h:8443/v1?key=s3cret") == "https://h:8443/v1"
    with pytest.raises(ConfigError) as caught:
        require_http_url("https://user:pw@h:99999/v1", "x")
    assert "pw" not in str(caught.value)
