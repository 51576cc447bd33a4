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
