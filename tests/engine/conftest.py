"""Engine tests run torch on one thread: on a shared 2-core machine several threads
make these tiny passes slower, not faster. The real Gemma 3 270M (model and tokenizer)
is loaded once per session."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from kvlab.engine.gemma import Gemma3
from kvlab.engine.gguf_tokenizer import GGUFTokenizer, load_gguf_tokenizer
from kvlab.engine.gguf_weights import load_gemma


@pytest.fixture(autouse=True)
def _one_thread() -> Iterator[None]:
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


def _bundled_gguf() -> tuple[Path | None, str]:
    from kvlab.errors import KvlabError
    from kvlab.servers.fetch import fetch_bundled

    try:
        return fetch_bundled().path, ""
    except KvlabError as exc:
        return None, f"the bundled Gemma 3 270M model is missing: {exc}"


@pytest.fixture(scope="session")
def gemma_gguf() -> Path:
    """The bundled Gemma 3 270M GGUF (the test is skipped, with the reason, without it)."""
    path, reason = _bundled_gguf()
    if path is None:
        pytest.skip(reason)
    return path


@pytest.fixture(scope="session")
def gemma_model(gemma_gguf: Path) -> Gemma3:
    """The engine's Gemma 3 270M in float32, loaded once per session (~20 s)."""
    return load_gemma(gemma_gguf, torch.float32)


@pytest.fixture(scope="session")
def gemma_tokenizer(gemma_gguf: Path) -> GGUFTokenizer:
    """The GGUF's tokenizer (converted once per file, then read from kvlab's cache)."""
    return load_gguf_tokenizer(gemma_gguf)
