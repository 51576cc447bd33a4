"""Managed processes: a death by signal is named, with its usual cause."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from kvlab.errors import ServerLaunchError
from kvlab.servers.llamacpp import LlamaCppSettings, LlamaServer
from kvlab.servers.process import describe_exit, exit_verb, spawn, wait_ready
from tests.ports import refusing_url
from tests.servers.fakes import dies_at_start, fake_gguf


@pytest.mark.parametrize(("sig", "words"), [
    (signal.SIGILL, "illegal instruction: this llama-server was built for CPU features"),
    (signal.SIGSEGV, "segmentation fault"),
    (signal.SIGKILL, "OOM killer"),
    (signal.SIGABRT, "aborted"),
])
def test_fatal_signals_are_named_with_their_usual_cause(sig: signal.Signals, words: str) -> None:
    described = describe_exit(-sig, "llama-server")
    assert described.startswith(sig.name) and words in described


def test_plain_exit_codes_stay_statuses() -> None:
    assert exit_verb(1) == "exited with status 1"
    assert exit_verb(-signal.SIGTERM) == "died of SIGTERM"
    assert describe_exit(-200) == "signal 200"  # no such signal: still a readable line


def test_wait_ready_names_the_signal_a_child_died_of(tmp_path: Path) -> None:
    with (tmp_path / "log").open("wb") as log:
        proc = spawn([str(dies_at_start(tmp_path, "SIGSEGV"))], log)
        with refusing_url() as url, pytest.raises(ServerLaunchError,
                                                  match=r"died of SIGSEGV .segmentation fault"):
            wait_ready(url, proc, timeout_s=20, name="llama-server")
    assert proc.returncode == -signal.SIGSEGV


def test_llama_server_death_at_start_up_names_sigill_and_keeps_the_log_tail(
        tmp_path: Path) -> None:
    settings = LlamaCppSettings(binary=dies_at_start(tmp_path), model=fake_gguf(tmp_path))
    server = LlamaServer(settings, capacity=512)
    with pytest.raises(ServerLaunchError) as caught:
        server.start(tmp_path / "server.log", ready_timeout_s=20)
    message = str(caught.value)
    assert "died of SIGILL (illegal instruction: this llama-server was built" in message
    assert "load_tensors: loading model" in message  # the log's last lines, as before
    assert "status -4" not in message
    assert server.exit_description() is not None and "SIGILL" in server.exit_description()


def test_a_server_kvlab_stopped_did_not_crash(tmp_path: Path) -> None:
    sleeper = tmp_path / "llama-server"
    sleeper.write_text("#!/bin/sh\nexec sleep 30\n")
    sleeper.chmod(0o755)
    server = LlamaServer(LlamaCppSettings(binary=sleeper, model=fake_gguf(tmp_path)), 512)
    with pytest.raises(ServerLaunchError, match="not ready after"):
        server.start(tmp_path / "server.log", ready_timeout_s=0.5)
    assert server.exit_description() is None  # our SIGTERM is not reported as a crash
