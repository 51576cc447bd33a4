"""The harness without the engine extra, in this venv: torch, Transformers, FastAPI ...
made unimportable (tests/cli/no_engine.py), every harness command still works and never
tries to import one of them, and every engine command answers with one line naming the
extra. tests/test_client_install.py proves the same in a fresh venv without them."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from kvlab.cli.extras import ENGINE_MODULES
from tests.client_commands import blocked_env, check_engine_commands, check_harness

BOOT = [sys.executable, str(Path(__file__).with_name("no_engine.py"))]

pytestmark = pytest.mark.slow


def test_the_harness_commands_import_nothing_of_the_engine(tmp_path: Path) -> None:
    log = tmp_path / "blocked.log"
    run_dir = check_harness(BOOT, tmp_path, env=blocked_env(list(ENGINE_MODULES), log))
    assert (run_dir / "records.jsonl").stat().st_size > 0
    tried = sorted(set(log.read_text().split())) if log.exists() else []
    assert not tried, f"harness commands tried to import: {tried}"


def test_the_engine_commands_name_the_extra(tmp_path: Path) -> None:
    log = tmp_path / "blocked.log"
    check_engine_commands(BOOT, env=blocked_env(list(ENGINE_MODULES), log), tmp=tmp_path)
    assert "torch" in log.read_text().split()  # the blocker did stand in torch's way

