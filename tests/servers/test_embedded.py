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
