"""Which kvlab runs: ``kvlab --version`` and the commit a package knows (kvlab.version).

The installed (stamped) case is covered by tests/test_client_install.py, which builds
kvlab from this checkout into a fresh venv."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import kvlab
from kvlab.version import STAMP, package_commit, source_commit

ROOT = Path(__file__).resolve().parents[1]


def git(*args: str, cwd: Path) -> str:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True,
                          check=True).stdout.strip()


def test_kvlab_version_prints_the_version_and_this_checkouts_commit() -> None:
    done = subprocess.run([sys.executable, "-m", "kvlab", "--version"], capture_output=True,
                          text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    head = git("rev-parse", "HEAD", cwd=ROOT)
    line = done.stdout.strip()
    assert line.startswith(f"kvlab {kvlab.__version__} (commit {head}"), line
    assert line in (f"kvlab {kvlab.__version__} (commit {head})",
                    f"kvlab {kvlab.__version__} (commit {head}-dirty)")
    assert source_commit() == line.split("(commit ")[1].rstrip(")")


def test_a_checkout_says_dirty_when_a_tracked_file_changed(tmp_path: Path) -> None:
    package = tmp_path / "src" / "kvlab"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    git("init", "-q", cwd=tmp_path)
    git("add", ".", cwd=tmp_path)
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "one", cwd=tmp_path)
    head = git("rev-parse", "HEAD", cwd=tmp_path)
    (package / STAMP).write_text("f" * 40)  # a checkout's own HEAD wins over any stamp
    assert package_commit(package) == head
    (package / "__init__.py").write_text("x = 1\n")
    assert package_commit(package) == f"{head}-dirty"


def test_an_installed_copy_reads_its_stamp_never_the_repository_around_it(
        tmp_path: Path) -> None:
    git("init", "-q", cwd=tmp_path)
    (tmp_path / "tracked.txt").write_text("")
    git("add", ".", cwd=tmp_path)
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "one", cwd=tmp_path)
    # a venv inside a clone: site-packages is not tracked there
    package = tmp_path / ".venv" / "lib" / "site-packages" / "kvlab"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    assert package_commit(package) is None  # no stamp: unknown, not the clone's HEAD
    (package / STAMP).write_text("0123abcd-dirty\n")
    assert package_commit(package) == "0123abcd-dirty"


def test_a_package_outside_any_repository(tmp_path: Path) -> None:
    package = tmp_path / "kvlab"
    package.mkdir()
    (package / "__init__.py").write_text("")
    assert package_commit(package) is None
    (package / STAMP).write_text("0123abcd\n")
    assert package_commit(package) == "0123abcd"
