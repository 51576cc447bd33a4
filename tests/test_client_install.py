"""A plain ``pip install kvlab`` (no extra) into a fresh venv: no torch, no Transformers,
and the harness works there.

The venv is built from this checkout with its declared dependencies (pip's cache keeps
it quick after the first time); the build goes to a temporary folder, not the
checkout's ``build/``. In it: ``kvlab --version`` names this checkout's commit (stamped
at the build), ``kvlab run`` measures ``kvlab serve-synthetic`` and the reports are
written (tests/client_commands.py), each engine command answers with one line naming
the extra, and ``import torch`` fails.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import kvlab
from kvlab.version import git_commit
from tests.client_commands import check_engine_commands, check_harness

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.slow


def clean_env() -> dict[str, str]:
    """This environment without what would let the test's own venv leak in."""
    return {k: v for k, v in os.environ.items()
            if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYTHONSTARTUP")}


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv holding ``pip install <this checkout>``, nothing else."""
    base = tmp_path_factory.mktemp("client-install")
    venv = base / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    # setuptools reads this file too: the build's scratch folders go outside the checkout
    config = base / "build.cfg"
    config.write_text(f"[build]\nbuild_base = {base / 'build'}\n"
                      f"[egg_info]\negg_base = {base}\n")
    done = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet",
                           "--disable-pip-version-check", str(ROOT)],
                          env={**clean_env(), "DIST_EXTRA_CONFIG": str(config)},
                          capture_output=True, text=True, timeout=900, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return venv


def test_a_plain_install_has_no_torch_and_no_transformers(venv: Path) -> None:
    python = str(venv / "bin" / "python")
    for module in ("torch", "transformers"):
        done = subprocess.run([python, "-c", f"import {module}"], capture_output=True,
                              text=True, env=clean_env(), check=False)
        assert done.returncode == 1 and "ModuleNotFoundError" in done.stderr, module
    listed = subprocess.run([python, "-m", "pip", "list", "--format", "json",
                             "--disable-pip-version-check"], capture_output=True, text=True,
                            env=clean_env(), check=True)
    names = {p["name"].lower() for p in json.loads(listed.stdout)}
    assert "kvlab" in names and not names & {"torch", "transformers", "accelerate"}, names


def test_its_version_names_the_commit_it_was_built_from(venv: Path) -> None:
    done = subprocess.run([str(venv / "bin" / "kvlab"), "--version"], capture_output=True,
                          text=True, env=clean_env(), cwd=venv, check=True)
    commit = git_commit(ROOT)
    assert commit is not None
    assert done.stdout.strip() == f"kvlab {kvlab.__version__} (commit {commit})"


def test_the_harness_runs_and_the_engine_commands_name_the_extra(
        venv: Path, tmp_path: Path) -> None:
    kvlab_cmd = [str(venv / "bin" / "kvlab")]
    run_dir = check_harness(kvlab_cmd, tmp_path, env=clean_env())
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["kvlab_version"] == kvlab.__version__
    assert manifest["git_commit"] == git_commit(ROOT)
    check_engine_commands(kvlab_cmd, env=clean_env(), tmp=tmp_path)
