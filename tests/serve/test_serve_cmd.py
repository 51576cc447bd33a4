"""``kvlab serve`` as a process: the URL line, readiness, and one-line errors."""

from __future__ import annotations

import re
import subprocess
import sys

import httpx
import pytest

from kvlab.errors import ConfigError
from kvlab.serve.runner import bind
from tests.serve.conftest import wait_ready

KVLAB = [sys.executable, "-m", "kvlab"]


def test_ctx_size_beyond_max_len_exits_2_with_one_line() -> None:
    result = subprocess.run([*KVLAB, "serve", "--ctx-size", "999999", "--port", "0"],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: --ctx-size 999999")
    assert "Traceback" not in result.stderr and "listening" not in result.stdout


@pytest.mark.parametrize("extra", [[], ["--synthetic"]])
@pytest.mark.parametrize("port", ["99999", "-1"])
def test_port_out_of_range_exits_2_with_one_line(port: str, extra: list[str]) -> None:
    result = subprocess.run([*KVLAB, "serve", "--port", port, *extra],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: --port {port} is not a TCP port")


@pytest.mark.parametrize("argv", [["serve", "--synthetic"], ["serve-synthetic"], ["serve"]])
def test_a_port_in_use_exits_2_with_one_line(argv: list[str]) -> None:
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        result = subprocess.run([*KVLAB, *argv, "--port", port], capture_output=True,
                                text=True, timeout=120)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: cannot listen on 127.0.0.1:{port}")


def test_serve_synthetic_refuses_an_out_of_range_port() -> None:
    result = subprocess.run([*KVLAB, "serve-synthetic", "--port", "99999"],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 2 and "is not a TCP port" in result.stderr


def test_bind_refuses_an_out_of_range_port() -> None:
    with pytest.raises(ConfigError, match="not a TCP port"):
        bind("127.0.0.1", 99999)


def test_serve_prints_its_url_and_answers() -> None:
    argv = [*KVLAB, "serve", "--port", "0", "--ctx-size", "32", "--threads", "1",
            "--api-key", "k-not-logged"]
    process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True)
    try:
        line = process.stdout.readline()
        match = re.fullmatch(r"kvlab serve: listening on (http://127\.0\.0\.1:\d+)\n", line)
        assert match, line
        url = match.group(1)
        wait_ready(url)
        out = httpx.post(url + "/completion", headers={"X-Api-Key": "k-not-logged"},
                         json={"prompt": "hi", "n_predict": 3, "temperature": 0}).json()
        assert out["tokens_predicted"] == 3
    finally:
        process.terminate()
        stdout, stderr = process.communicate(timeout=30)
    assert "k-not-logged" not in stdout + stderr
