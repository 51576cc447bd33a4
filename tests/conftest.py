"""Shared test set-up."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def _no_machine_calibration(tmp_path_factory: pytest.TempPathFactory,
                            monkeypatch: pytest.MonkeyPatch) -> None:
    """Runs and reports read this machine's client limits (``kvlab calibrate``); tests
    must not depend on whether the developer ever ran it, so none is found."""
    path: Path = tmp_path_factory.getbasetemp() / "no-calibration.json"
    monkeypatch.setenv("KVLAB_CALIBRATION", str(path))


def llama_server_missing() -> str | None:
    """Why the real llama-server tests cannot run here (None when they can): the
    binary or the bundled Gemma 3 270M model is missing."""
    from kvlab.errors import KvlabError
    from kvlab.servers.binary import find_llama_server
    from kvlab.servers.fetch import fetch_bundled

    try:
        find_llama_server()
        fetch_bundled()
    except KvlabError as exc:
        return f"llama-server or the bundled model is missing: {exc}"
    return None
