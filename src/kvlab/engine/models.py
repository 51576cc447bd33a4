"""Named real models the engine can load: today the bundled Gemma 3 270M.

``gemma-3-270m`` is the GGUF that ``kvlab fetch`` assembles (the file llama-server
serves in the harness); a path to another Gemma 3 GGUF works too. The toy presets are
not here: they are built from :data:`kvlab.engine.config.PRESETS` with random weights.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from kvlab.engine.gemma import Gemma3
from kvlab.engine.gguf_tokenizer import GGUFTokenizer, load_gguf_tokenizer
from kvlab.engine.gguf_weights import load_gemma
from kvlab.engine.weights import to_format, weight_format
from kvlab.errors import ConfigError

BUNDLED = "gemma-3-270m"
MODELS = (BUNDLED,)


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


def model_path(name: str) -> tuple[Path, str]:
    """(GGUF path, SHA-256) of ``name``: the bundled model or a GGUF file path."""
    from kvlab.servers.fetch import check_gguf, fetch_bundled

    if name == BUNDLED:
        checked = fetch_bundled()
    elif name.endswith(".gguf") or Path(name).is_file():
        checked = check_gguf(Path(name))
    else:
        raise ConfigError(
            f"unknown model {name!r}; choose {', '.join(MODELS)} or give a GGUF file path"
        )
    return checked.path, checked.sha256


def load_model(name: str, dtype: str = "float32") -> LoadedModel:
    """Load ``name`` (see :func:`model_path`) in the weight format ``dtype``: "float32",
    "bfloat16" or "int8" (:mod:`kvlab.engine.weights`; the last two are for serving).

    About 20 s for Gemma 3 270M: ``gguf.GGUFReader`` parses the 262k-entry vocabulary
    before the tensors can be read.
    """
    fmt = weight_format(dtype)
    path, sha = model_path(name)
    tokenizer = load_gguf_tokenizer(path, sha256=sha)
    model = load_gemma(path, fmt.activations)
    to_format(model, fmt.name)
    return LoadedModel(name=name, path=path, sha256=sha, model=model, tokenizer=tokenizer)
