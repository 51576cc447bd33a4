"""The set-up's smoke check: a llama-server that cannot generate stops it with one line."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from kvlab.errors import ServerLaunchError
from kvlab.servers.smoke import REBUILD_HINT, smoke_check
from tests.experiments import experiment as build
from tests.experiments import llamacpp
from tests.servers.fakes import dies_at_first_request, dies_at_start, fake_gguf
from tests.servers.test_llamacpp import needs_llama


def test_sigill_at_the_first_request_gives_one_line_with_signal_fix_and_log(
        tmp_path: Path) -> None:
    log = tmp_path / "smoke.log"
    with pytest.raises(ServerLaunchError) as caught:
        smoke_check(dies_at_first_request(tmp_path), fake_gguf(tmp_path), log_path=log,
                    timeout_s=20)
    line = str(caught.value)
    assert "\n" not in line
    assert "SIGILL (illegal instruction: this llama-server was built for CPU features this " \
           "machine does not let it use)" in line
    assert REBUILD_HINT in line and str(log) in line
    assert "computing the first batch" in log.read_text()


def test_sigill_during_start_up_is_one_line_too(tmp_path: Path) -> None:
    with pytest.raises(ServerLaunchError) as caught:
        smoke_check(dies_at_start(tmp_path), fake_gguf(tmp_path), log_path=tmp_path / "l",
                    timeout_s=20)
    assert "\n" not in str(caught.value) and "died of SIGILL" in str(caught.value)


def test_preflight_refuses_a_server_that_dies_and_says_why_in_one_line(tmp_path: Path) -> None:
    env = {**os.environ, "LLAMA_SERVER": str(dies_at_first_request(tmp_path, "SIGABRT")),
           "XDG_CACHE_HOME": str(tmp_path / "cache"), "COLUMNS": "200"}
    experiment = build("x", llamacpp("a", model=str(fake_gguf(tmp_path))),
                       workload=dict(queries=2, capacities=[512])).write(tmp_path, "exp.toml")
    done = subprocess.run([sys.executable, "-m", "kvlab", "preflight", str(experiment)],
                          capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 2
    assert len(done.stderr.strip().splitlines()) == 1
    assert "died of SIGABRT" in done.stderr
    assert f"log: {tmp_path / 'cache' / 'kvlab' / 'smoke'}" in done.stderr
    assert "FAILED" in done.stdout


@pytest.mark.llamacpp
@needs_llama
def test_the_installed_llama_server_generates_on_this_cpu() -> None:
    result = smoke_check(threads=2)
    assert result.tokens == 8 and result.tokens_per_s > 0 and result.text
