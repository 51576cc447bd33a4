"""Stamps the git commit into a package built from a checkout (kvlab/COMMIT), so that
``kvlab --version`` and every run's manifest name it after a non-editable install.
Everything else about the build is in pyproject.toml."""

from __future__ import annotations

import sys
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT / "src"))
from kvlab.version import STAMP, git_commit, tracked  # noqa: E402  (stdlib only)


class BuildPy(build_py):
    """build_py, then kvlab/COMMIT when the source is a git checkout. An editable
    install reads git itself at run time, so it gets no stamp."""

    def run(self) -> None:
        super().run()
        if getattr(self, "editable_mode", False) or not tracked(ROOT / "setup.py"):
            return  # editable, or an sdist unpacked outside its checkout
        commit = git_commit(ROOT)
        if commit:
            target = Path(self.build_lib) / "kvlab" / STAMP
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(commit + "\n", encoding="utf-8")


setup(cmdclass={"build_py": BuildPy})
