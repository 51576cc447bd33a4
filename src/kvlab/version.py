"""Which kvlab this is: the version and the git commit of the source it runs from.

The commit comes from one of two places, in this order:

- a git checkout that tracks this very package (``src/kvlab`` of a clone, installed
  editable or run from ``src``): ``git rev-parse HEAD`` now, ``-dirty`` when a tracked
  file differs from it;
- the commit written into the package when it was built (``setup.py`` stamps
  :data:`STAMP` while building from a checkout: ``pip install /path/to/clone``, or a
  wheel built there), ``-dirty`` likewise.

A wheel or sdist built outside a git checkout carries no stamp: the commit is then
unknown (None), never guessed from whatever repository the venv happens to sit in.
"""

from __future__ import annotations

import functools
import subprocess
from pathlib import Path

import kvlab

STAMP = "COMMIT"  # file name, next to kvlab/__init__.py in a built package


def git_commit(folder: Path) -> str | None:
    """HEAD of the git work tree holding ``folder`` (``-dirty`` if a tracked file was
    modified); None when ``folder`` is not in one or git is missing."""
    def git(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["git", *args], cwd=folder, capture_output=True, text=True,
                              timeout=5, check=False)

    try:
        head = git("rev-parse", "HEAD")
        if head.returncode != 0:
            return None
        dirty = git("status", "--porcelain", "--untracked-files=no")
    except (OSError, subprocess.TimeoutExpired):
        return None
    return head.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")


def tracked(path: Path) -> bool:
    """True when git tracks the file ``path`` (a checkout's source), False for a copy
    that merely sits in some repository (an installed package in an untracked venv)."""
    try:
        done = subprocess.run(["git", "ls-files", "--error-unmatch", path.name],
                              cwd=path.parent, capture_output=True, timeout=5, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


@functools.cache
def source_commit() -> str | None:
    """The commit of the source this kvlab runs from (see the module docstring); None:
    unknown (a wheel built outside a checkout)."""
    return package_commit(Path(kvlab.__file__).resolve().parent)


def package_commit(package: Path) -> str | None:
    """The commit of the package folder ``package``: git's when it is tracked source,
    else its stamp, else None."""
    if tracked(package / "__init__.py"):
        return git_commit(package)
    stamp = package / STAMP
    if stamp.is_file():
        return stamp.read_text(encoding="utf-8").strip() or None
    return None


def version_line() -> str:
    """``kvlab 0.1.0 (commit 1a2b…)``, or ``kvlab 0.1.0`` when the commit is unknown."""
    commit = source_commit()
    return f"kvlab {kvlab.__version__}" + (f" (commit {commit})" if commit else "")
