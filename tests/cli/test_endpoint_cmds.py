"""``kvlab endpoints list|check`` against the fake server; the key never printed."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from kvlab.cli import app
from tests.fakeserver import FakeServer

KEY = "sk-cli-SECRET-77"


def test_list_and_check(tmp_path, monkeypatch):
    for var in (
        "VLLM_BASE_URL",
        "VLLM_MODEL_ID",
        "VLLM_API_KEY",
        "OPENAI_BASE_URL",
        "OPENAI_CHAT_MODEL_ID",
        "OPENAI_BASE_URL_1",
        "OPENAI_MODEL_1",
    ):
        monkeypatch.delenv(var, raising=False)
    runner = CliRunner()
    with FakeServer(api_key=KEY, model="m1") as srv:
        env = tmp_path / "x.env"
        env.write_text(f"VLLM_BASE_URL={srv.base_url}/v1\nVLLM_MODEL_ID=m1\nVLLM_API_KEY={KEY}\n")
        listed = runner.invoke(app, ["endpoints", "list", "--env-file", str(env), "--json"])
        assert listed.exit_code == 0, listed.output
        assert KEY not in listed.output
        doc = json.loads(listed.output.strip().splitlines()[-1])
        assert doc["endpoints"][0]["api_key"] == "set"

        checked = runner.invoke(
            app, ["endpoints", "check", "vllm", "--env-file", str(env), "--json"]
        )
        assert checked.exit_code == 0, checked.output
        assert json.loads(checked.output.strip().splitlines()[-1])["models"] == ["m1"]
        assert KEY not in checked.output

        wrong = runner.invoke(
            app, ["endpoints", "check", "vllm", "--env-file", str(env), "--model", "other"]
        )
        assert wrong.exit_code != 0 and KEY not in wrong.output
        assert "other" in str(wrong.exception)
