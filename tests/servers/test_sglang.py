"""The throwaway fake SGLang kind: known to the experiment file and the plan, launched
as a process, and named by the checks it cannot feed."""

from __future__ import annotations

from pathlib import Path

import httpx

from kvlab.experiment import parse_experiment
from kvlab.servers.kinds import SERVER_KINDS
from kvlab.servers.sglang import SglangServer, SglangSettings

EXPERIMENT = """name = "fake"
[[modes]]
name = "s"
server = "sglang"
api = "openai-chat"
[modes.sglang]
itl_ms = 1
"""


def test_the_file_names_the_kind_and_its_table() -> None:
    mode = parse_experiment(EXPERIMENT).modes[0]
    assert SERVER_KINDS["sglang"] is SglangSettings and isinstance(mode.settings, SglangSettings)
    assert mode.settings.itl_ms == 1 and mode.settings.metric_names is None
    argv = mode.settings.build(512).argv()
    assert argv[2:4] == ["kvlab", "serve-synthetic"] and "--itl-ms" in argv


def test_it_starts_answers_and_stops(tmp_path: Path) -> None:
    server = SglangServer(SglangSettings(), 512)
    server.start(tmp_path / "server.log", ready_timeout_s=30)
    try:
        assert httpx.get(server.base_url + "/v1/models").json()["data"][0]["id"] == "synthetic"
        assert server.facts()["kind"] == "sglang" and "kv_served" not in server.facts()
    finally:
        server.stop()
    assert not server.is_alive()
