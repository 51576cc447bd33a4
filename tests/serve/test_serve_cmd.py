"""``kvlab serve`` as a process: the URL line, readiness, and one-line errors."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

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


def test_an_unknown_model_exits_2_naming_the_choices() -> None:
    result = subprocess.run([*KVLAB, "serve", "--model", "no-such-model", "--port", "0"],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: unknown model 'no-such-model'")
    assert "gemma-3-270m" in lines[0] and "listening" not in result.stdout


def _bundled_gguf() -> Path:
    from kvlab.errors import KvlabError
    from kvlab.servers.fetch import fetch_bundled

    try:
        return fetch_bundled().path
    except KvlabError as exc:
        pytest.skip(f"the bundled Gemma 3 270M model is missing: {exc}")


def _truncated_copy(tmp_path: Path, n_bytes: int) -> Path:
    path = tmp_path / "truncated.gguf"
    with _bundled_gguf().open("rb") as source:
        path.write_bytes(source.read(n_bytes))
    return path


def test_a_gguf_cut_inside_its_header_exits_2_naming_the_file(tmp_path: Path) -> None:
    path = _truncated_copy(tmp_path, 2_000_000)  # the vocabulary alone is ~6 MB
    result = subprocess.run([*KVLAB, "serve", "--model", str(path), "--port", "0"],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and str(path) in lines[0] and "listening" not in result.stdout


@pytest.mark.slow
def test_a_gguf_cut_inside_its_tensors_stops_the_server_naming_the_file(
        tmp_path: Path) -> None:
    path = _truncated_copy(tmp_path, 20_000_000)  # header whole, weights cut
    result = subprocess.run([*KVLAB, "serve", "--model", str(path), "--port", "0",
                             "--threads", "1"], capture_output=True, text=True, timeout=300)
    assert result.returncode == 2 and "listening" in result.stdout  # it failed loading
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("error: ") and str(path) in last
    assert "Traceback" not in result.stderr


def test_ctx_size_beyond_the_models_context_exits_2_with_one_line() -> None:
    _bundled_gguf()
    result = subprocess.run([*KVLAB, "serve", "--model", "gemma-3-270m", "--ctx-size",
                             "40000", "--port", "0"], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert lines == ["error: --ctx-size 40000 is out of range for model 'gemma-3-270m': "
                     "use 2..32768 (the model's max_len)"]
