"""kvlab vllm setup's smoke check, noted once passed: the same environment and model
need not start vLLM again (make run); another environment or checkpoint must."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kvlab.servers import vllm_setup
from kvlab.servers.vllm_env import VllmEnv
from kvlab.servers.vllm_model import ModelDir
from kvlab.servers.vllm_setup import note_smoke, passed_smoke, setup_vllm

FACTS = {"smoke_tokens": 8, "smoke_startup_s": 41.5, "smoke_text": " Paris",
         "smoke_log": "/x/vllm.log", "smoke_checked_at": "2026-12-05T16:00:00+00:00"}


@pytest.fixture
def note(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The note in a folder of the test's own (the shared cache's note stays as it is)."""
    path = tmp_path / "note" / "vllm-passed.json"
    monkeypatch.setattr(vllm_setup, "smoke_note_path", lambda: path)
    return path


def an_env(folder: Path) -> VllmEnv:
    (folder / "bin").mkdir(parents=True)
    (folder / "pyvenv.cfg").write_text("home = /usr/bin\n")
    return VllmEnv(folder / "bin" / "python", "0.32.0", "kvlab")


def test_a_passed_check_is_found_for_the_same_environment_and_model(tmp_path, note) -> None:
    env, model = an_env(tmp_path / "env"), ModelDir(tmp_path / "model", {"a": "1"})
    assert passed_smoke(env, model) is None
    note_smoke(env, model, FACTS)
    assert passed_smoke(env, model) == FACTS
    assert passed_smoke(env, ModelDir(tmp_path / "model", {"a": "2"})) is None
    assert passed_smoke(VllmEnv(env.python, "0.33.0", "kvlab"), model) is None
    cfg = tmp_path / "env" / "pyvenv.cfg"  # the environment made again
    stat = cfg.stat()
    os.utime(cfg, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    assert passed_smoke(env, model) is None


def test_an_unreadable_note_means_no_check_passed(tmp_path, note) -> None:
    env, model = an_env(tmp_path / "env"), ModelDir(tmp_path / "model", {"a": "1"})
    note.parent.mkdir()
    for text in ("{not json", "[]", "{}"):
        note.write_text(text)
        assert passed_smoke(env, model) is None


@pytest.mark.vllm
def test_setup_keeps_a_passed_check_unless_asked(note) -> None:
    """On the real environment and converted model: with a check noted, setup (smoke
    None) reports it without starting vLLM; --no-smoke reports none."""
    from kvlab.servers.vllm_env import find_vllm
    from kvlab.servers.vllm_model import convert_bundled
    from tests.conftest import vllm_missing

    if reason := vllm_missing():
        pytest.skip(reason)
    env = find_vllm()
    note_smoke(env, convert_bundled(env), FACTS)
    kept = setup_vllm(env.python, smoke=None)
    assert kept.smoke_reused and kept.smoke_tokens == 8 and kept.smoke_startup_s == 41.5
    assert setup_vllm(env.python, smoke=False).smoke_tokens is None
