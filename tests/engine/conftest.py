"""Engine tests run torch on one thread: on a shared 2-core machine several threads
make these tiny passes slower, not faster. The real Gemma 3 270M (``gemma_gguf``,
``gemma_model``, ``gemma_tokenizer``) is loaded once per session by tests/conftest.py,
for these tests and those of tests/studies."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch


@pytest.fixture(autouse=True)
def _one_thread() -> Iterator[None]:
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)
