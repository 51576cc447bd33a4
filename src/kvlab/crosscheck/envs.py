"""The peers' own environments: GuideLLM and AIPerf pinned, vLLM's ``bench serve``.

GuideLLM and AIPerf are programs kvlab runs, like ``llama-server`` and vLLM, not
libraries it imports: each pins its own torch, Transformers, aiohttp or pydantic, and
those pins must never reach kvlab's environment. So each lives in a virtual environment
of its own under the user's cache directory, one folder per pinned version
(``~/.cache/kvlab/peers/guidellm-0.8.1``, ``.../aiperf-0.13.0``), made once by
:func:`create_peer_env` (``kvlab peers setup``, ``make test``) and then only probed.
vLLM's benchmark client is ``vllm bench serve`` from kvlab's vLLM environment
(:mod:`kvlab.servers.vllm_env`); its tokenizer, which AIPerf shares, is the bundled
Gemma 3 270M's, from the checkpoint kvlab converts for vLLM.

Which executable, in this order: ``$KVLAB_GUIDELLM`` / ``$KVLAB_AIPERF`` (a peer
installed elsewhere, used as it is), then kvlab's environment for the pinned version.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from kvlab.errors import ConfigError, ServerLaunchError
from kvlab.servers.binary import cache_dir

Progress = Callable[[str], None]


@dataclass(frozen=True)
class PeerPin:
    """One peer as kvlab installs it: its PyPI package at one version, what must be
    installed before it (GuideLLM needs torch: the CPU build first, so pip never
    resolves a CUDA one), its console script and the variable that names another."""

    name: str
    package: str
    version: str
    script: str
    env_var: str
    first: tuple[str, ...] = ()


PINS: dict[str, PeerPin] = {
    "guidellm": PeerPin("guidellm", "guidellm", "0.8.1", "guidellm", "KVLAB_GUIDELLM",
                        first=("torch==2.13.0",)),
    "aiperf": PeerPin("aiperf", "aiperf", "0.13.0", "aiperf", "KVLAB_AIPERF"),
}


@dataclass(frozen=True)
class PeerEnv:
    """A peer that can run: its executable, its version and where it came from
    ("env": the variable named it; "kvlab": kvlab's pinned environment)."""

    name: str
    executable: Path
    version: str
    source: str


def env_dir(pin: PeerPin) -> Path:
    """Where kvlab makes ``pin``'s environment (one folder per pinned version)."""
    return cache_dir() / "peers" / f"{pin.name}-{pin.version}"


def _version(python: Path, package: str) -> str | None:
    """``package``'s version as ``python`` sees it; None when it is not installed."""
    if not python.is_file():
        return None
    probe = f"import importlib.metadata as m; print(m.version({package!r}))"
    try:
        done = subprocess.run([str(python), "-c", probe], capture_output=True, text=True,
                              timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    lines = done.stdout.strip().splitlines()
    return lines[-1] if done.returncode == 0 and lines else None


def find_peer(name: str) -> PeerEnv:
    """The peer ``name`` runs from: ``$KVLAB_<NAME>``, else kvlab's pinned environment.
    ConfigError with the command that makes it when there is none."""
    pin = PINS[name]
    named = os.environ.get(pin.env_var)
    if named:
        exe = Path(named).expanduser()
        if not (exe.is_file() and os.access(exe, os.X_OK)):
            raise ConfigError(f"${pin.env_var} names {exe}, which is not an executable; "
                              f"unset it to use kvlab's {pin.name} {pin.version}")
        python = exe.parent / "python"
        return PeerEnv(name, exe, _version(python, pin.package) or "unknown", "env")
    target = env_dir(pin)
    version = _version(target / "bin" / "python", pin.package)
    if version != pin.version:
        raise ConfigError(f"{pin.name} {pin.version} is not installed for kvlab "
                          f"({target}); run `kvlab peers setup` (about 2 min), or set "
                          f"{pin.env_var} to a {pin.name} executable")
    return PeerEnv(name, target / "bin" / pin.script, version, "kvlab")


def _run(argv: list[str], what: str) -> None:
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        lines = [line for line in (done.stderr or done.stdout).strip().splitlines()
                 if not line.startswith("WARNING:")] or ["(no output)"]
        raise ServerLaunchError(f"peers set-up failed while {what} "
                                f"(exit {done.returncode}): {lines[-1]}")


def uv_binary() -> str | None:
    """uv beside kvlab's Python (the dev extra has it), else on PATH: it installs a peer
    in seconds where pip takes minutes (150 packages for AIPerf); None: pip does it."""
    beside = Path(sys.executable).parent / "uv"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    return shutil.which("uv")


def create_peer_env(name: str, progress: Progress = lambda _: None) -> tuple[PeerEnv, float]:
    """Make (or keep) kvlab's environment of the pinned peer ``name``; the environment
    and the seconds it took (about 0 when it already worked: only probed)."""
    pin = PINS[name]
    target = env_dir(pin)
    python = target / "bin" / "python"
    started = time.monotonic()
    if _version(python, pin.package) == pin.version:
        progress(f"{pin.name} {pin.version} already installed in {target}")
        return PeerEnv(name, target / "bin" / pin.script, pin.version, "kvlab"), 0.0
    # a half-made one (an interrupted set-up) fails the probe above: made again whole
    shutil.rmtree(target, ignore_errors=True)
    target.parent.mkdir(parents=True, exist_ok=True)
    progress(f"creating {target}")
    base = getattr(sys, "_base_executable", sys.executable)
    _run([base, "-m", "venv", str(target)], "creating the environment")
    # --no-compile: byte-compiling every module of torch and Transformers is a good part
    # of the install; Python compiles what a run imports, once
    pip = [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
           "--no-compile"]
    for first in pin.first:  # pip: its configuration knows where the CPU build is
        progress(f"installing {first} (the CPU build) for {pin.name}")
        _run([*pip, first], f"installing {first}")
    uv = uv_binary()
    installer = [uv, "pip", "install", "--quiet", "--python", str(python)] if uv else pip
    progress(f"installing {pin.package}=={pin.version} with {'uv' if uv else 'pip'}")
    _run([*installer, f"{pin.package}=={pin.version}"],
         f"installing {pin.package}=={pin.version}")
    if _version(python, pin.package) != pin.version:
        raise ServerLaunchError(f"peers set-up: {python} still cannot see {pin.package} "
                                f"{pin.version}; delete {target} and run it again")
    seconds = time.monotonic() - started
    progress(f"{pin.name} {pin.version} ready in {target} ({seconds:.0f} s)")
    return PeerEnv(name, target / "bin" / pin.script, pin.version, "kvlab"), seconds


def create_peer_envs(names: Sequence[str] = tuple(PINS), progress: Progress = lambda _: None
                     ) -> dict[str, tuple[PeerEnv, float]]:
    """:func:`create_peer_env` for each of ``names``, side by side (their downloads and
    unpacking overlap): each environment and its seconds."""
    with ThreadPoolExecutor(max_workers=max(1, len(names))) as pool:
        futures = {name: pool.submit(create_peer_env, name, progress) for name in names}
        return {name: future.result() for name, future in futures.items()}
