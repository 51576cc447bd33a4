"""A real model the engine can load: a Gemma 3 GGUF file, with its tokenizer.

The engine loads the file it is given; which file a name means (``gemma-3-270m``, the
GGUF that ``kvlab fetch`` assembles, or a path) and where its converted vocabulary is
kept are decided above it (:func:`kvlab.servers.fetch.model_file`). The toy presets are
not here: they are built from :data:`kvlab.engine.config.PRESETS` with random weights.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import torch

from kvlab.engine.gemma import Gemma3
from kvlab.engine.gguf_tokenizer import GGUFTokenizer, load_gguf_tokenizer
from kvlab.engine.gguf_weights import load_gemma
from kvlab.engine.weights import to_format, weight_format


class GGUFSource(Protocol):
    """A GGUF file checked for use (:class:`kvlab.servers.fetch.ModelFile` is one)."""

    @property
    def path(self) -> Path: ...

    @property
    def sha256(self) -> str: ...

    @property
    def tokenizer_json(self) -> Path | None:
        """Where its converted tokenizer is kept (None: nowhere, converted each time)."""
        ...


@dataclass
class LoadedModel:
    """A real model with its tokenizer and where it came from."""

    name: str
    path: Path
    sha256: str
    model: Gemma3
    tokenizer: GGUFTokenizer

    @property
    def dtype(self) -> torch.dtype:
        return self.model.embed.weight.dtype


def load_model(source: GGUFSource, dtype: str = "float32", name: str | None = None
               ) -> LoadedModel:
    """Load the GGUF ``source`` in the weight format ``dtype``: "float32", "bfloat16" or
    "int8" (:mod:`kvlab.engine.weights`; the last two are for serving). ``name``: what
    the model is called (None: the file's name).

    About 20 s for Gemma 3 270M: ``gguf.GGUFReader`` parses the 262k-entry vocabulary
    before the tensors can be read.
    """
    fmt = weight_format(dtype)
    tokenizer = load_gguf_tokenizer(source.path, source.tokenizer_json)
    model = load_gemma(source.path, fmt.activations)
    to_format(model, fmt.name)
    return LoadedModel(name=name or source.path.name, path=source.path, sha256=source.sha256,
                       model=model, tokenizer=tokenizer)
