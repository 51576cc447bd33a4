"""Endpoint settings: .env, environment, experiment, command line; partial settings; keys."""

from __future__ import annotations

import os

import pytest

from kvlab.bench.client.endpoint_config import (
    describe,
    find_env_file,
    load_endpoints,
    select_endpoint,
)
from kvlab.errors import ConfigError
from kvlab.rundir import ApiKind

KEY = "sk-config-SECRET-42"


@pytest.fixture
def env_file(tmp_path):
    path = tmp_path / ".env"
    path.write_text(
        "VLLM_BASE_URL=http://dotenv:5002/v1\n"
        "VLLM_MODEL_ID=qwen-dotenv\n"
        f"VLLM_API_KEY={KEY}\n"
        "OPENAI_BASE_URL_2=http://slot2:8000\n"
        "OPENAI_MODEL_2=m2\n"
        "OPENAI_NAME_2=local-two\n"
    )
    return path


def load(env_file, environ=None, **kw):
    return {e.name: e for e in load_endpoints(environ=environ or {}, env_file=env_file, **kw)}


def test_dotenv_groups(env_file):
    eps = load(env_file)
    assert set(eps) == {"vllm", "local-two"}
    vllm = eps["vllm"]
    assert (vllm.base_url, vllm.model, vllm.api_key) == (
        "http://dotenv:5002/v1",
        "qwen-dotenv",
        KEY,
    )
    assert vllm.api is ApiKind.OPENAI_CHAT
    assert eps["local-two"].api_key is None and eps["local-two"].model == "m2"


def test_dotenv_does_not_touch_os_environ(env_file):
    before = dict(os.environ)
    load_endpoints(environ=None, env_file=env_file)
    assert dict(os.environ) == before


def test_precedence_cli_over_experiment_over_environment_over_dotenv(env_file):
    environ = {"VLLM_MODEL_ID": "from-env", "VLLM_BASE_URL": ""}  # empty counts as unset
    eps = load(env_file, environ)
    assert eps["vllm"].model == "from-env" and eps["vllm"].base_url == "http://dotenv:5002/v1"
    exp = [{"name": "vllm", "model": "from-exp", "timeout_s": 30}]
    eps = load(env_file, environ, experiment=exp)
    assert eps["vllm"].model == "from-exp" and eps["vllm"].timeout_s == 30
    eps = load(env_file, environ, experiment=exp, cli={"name": "vllm", "model": "from-cli"})
    assert eps["vllm"].model == "from-cli" and eps["vllm"].timeout_s == 30
    assert eps["vllm"].api_key == KEY  # untouched fields keep the lower source


def test_seed_spellings_for_slot_one(tmp_path):
    environ = {
        "OPENAI_BASE_URL": "http://one/v1",
        "OPENAI_CHAT_MODEL_ID": "chat-1",
        "OPENAI_ENDPOINT_NAME": "vllm-local",
        "OPENAI_API_KEY": KEY,
    }
    eps = load(None, environ, search_env_file=False)
    assert eps["vllm-local"].model == "chat-1" and eps["vllm-local"].api_key == KEY


def test_key_alone_is_not_an_endpoint():
    assert load(None, {"OPENAI_API_KEY": KEY}, search_env_file=False) == {}


@pytest.mark.parametrize(
    ("environ", "missing"),
    [
        ({"VLLM_BASE_URL": "http://x"}, "VLLM_MODEL_ID"),
        ({"VLLM_MODEL_ID": "m", "VLLM_API_KEY": KEY}, "VLLM_BASE_URL"),
        ({"OPENAI_BASE_URL_3": "http://x"}, "OPENAI_MODEL_3"),
        ({"OPENAI_MODEL_1": "m"}, "OPENAI_BASE_URL_1"),
    ],
)
def test_partial_settings_name_the_missing_variable(environ, missing):
    with pytest.raises(ConfigError, match=missing) as info:
        load(None, environ, search_env_file=False)
    assert KEY not in str(info.value)


def test_experiment_and_cli_entries():
    environ = {"MY_KEY": KEY}
    exp = [{"name": "ll", "base_url": "http://127.0.0.1:8080", "api": "llamacpp-completion"}]
    cli = {"name": "ad-hoc", "base_url": "http://h/v1", "model": "m", "api_key_env": "MY_KEY"}
    eps = load(None, environ, experiment=exp, cli=cli, search_env_file=False)
    assert eps["ll"].api is ApiKind.LLAMACPP_COMPLETION and eps["ll"].model is None
    assert eps["ad-hoc"].api_key == KEY
    with pytest.raises(ConfigError, match="api_key_env"):
        load(None, {}, experiment=[{"name": "x", "api_key": KEY}], search_env_file=False)
    with pytest.raises(ConfigError, match="NOPE"):
        load(None, {}, cli={**cli, "api_key_env": "NOPE"}, search_env_file=False)
    with pytest.raises(ConfigError, match="not one of"):
        load(None, {}, cli={**cli, "api": "grpc"}, search_env_file=False)
    with pytest.raises(ConfigError, match="model id"):
        load(None, {}, cli={"name": "x", "base_url": "http://h"}, search_env_file=False)


def test_missing_env_file_is_an_error(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        load_endpoints(environ={}, env_file=tmp_path / "nope.env")


def test_find_env_file_walks_up(tmp_path, env_file):
    deep = tmp_path / "a" / "b"
    deep.mkdir(parents=True)
    assert find_env_file(deep) == env_file


def test_select_and_describe_hide_the_key(env_file):
    eps = load_endpoints(environ={}, env_file=env_file)
    vllm = select_endpoint(eps, "vllm")
    assert KEY not in repr(vllm)
    shown = describe(vllm)
    assert shown["api_key"] == "set" and KEY not in str(shown)
    assert describe(select_endpoint(eps, "local-two"))["api_key"] == "not set"
    with pytest.raises(ConfigError, match="several"):
        select_endpoint(eps, None)
    with pytest.raises(ConfigError, match="no endpoint named"):
        select_endpoint(eps, "zzz")
