"""The tokenizer stored in a GGUF file, read by Transformers, run by ``tokenizers``.

Transformers' GGUF support (``AutoTokenizer.from_pretrained(..., gguf_file=...)``)
turns the file's vocabulary, scores and token types into a ``tokenizers`` tokenizer.
That conversion reads the whole 262,144-entry vocabulary and takes tens of seconds,
so its result (the tokenizer's own JSON) can be kept in a file the caller names (kvlab
keeps one per GGUF, named by its SHA-256: ``kvlab.servers.fetch.ModelFile
.tokenizer_json``). Nothing here tokenizes by hand.

:class:`GGUFTokenizer` has the byte tokenizer's interface (``encode``, ``decode``,
``incremental_decoder``, ``vocab_size``, ``eos_id``); ``encode`` adds the BOS token,
as llama.cpp does for a prompt, and parses special tokens written in the text.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from kvlab.errors import EngineError, ModelFileError


class IncrementalDecoder:
    """Turns a stream of token ids into text, never splitting a character."""

    def __init__(self, tokenizer: Any) -> None:
        from tokenizers.decoders import DecodeStream

        self._tokenizer = tokenizer
        self._stream = DecodeStream(skip_special_tokens=False)

    def push(self, token_id: int) -> str:
        """Text completed by this token ("" while a character is still incomplete)."""
        return self._stream.step(self._tokenizer, token_id) or ""

    def flush(self) -> str:
        """Whatever is left at the end of the stream (nothing: pieces are whole)."""
        return ""


class GGUFTokenizer:
    """A ``tokenizers.Tokenizer`` with the engine's tokenizer interface."""

    def __init__(self, tokenizer: Any, bos_id: int, eos_id: int) -> None:
        self.tokenizer = tokenizer
        self.vocab_size: int = tokenizer.get_vocab_size(with_added_tokens=True)
        self.bos_id = bos_id
        self.eos_id = eos_id

    def encode(self, text: str, add_bos: bool = True) -> list[int]:
        """Token ids of ``text``, starting with BOS unless ``add_bos`` is False."""
        ids: list[int] = self.tokenizer.encode(text, add_special_tokens=False).ids
        return [self.bos_id, *ids] if add_bos else ids

    def decode(self, ids: Iterable[int]) -> str:
        """Text of ``ids``, special tokens included as their text."""
        ids = list(ids)
        if any(not isinstance(i, int) or not 0 <= i < self.vocab_size for i in ids):
            raise EngineError(f"token ids must be integers in 0..{self.vocab_size - 1}")
        return str(self.tokenizer.decode(ids, skip_special_tokens=False))

    def incremental_decoder(self) -> IncrementalDecoder:
        """A fresh decoder for one streamed generation."""
        return IncrementalDecoder(self.tokenizer)


def _convert(path: Path) -> Any:
    """The ``tokenizers`` tokenizer Transformers builds from the GGUF (slow)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # a local file; never ask the Hub
    from transformers import AutoTokenizer

    try:
        hf = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
    except (OSError, ValueError, KeyError, IndexError) as exc:
        raise ModelFileError(
            f"GGUF file {str(path)!r}: Transformers could not read its tokenizer "
            f"({type(exc).__name__}: {str(exc)[:120]})"
        ) from None
    return hf.backend_tokenizer


def load_gguf_tokenizer(path: str | Path, cache: Path | None = None) -> GGUFTokenizer:
    """The tokenizer of the GGUF file at ``path``.

    ``cache``: the JSON file the converted tokenizer is read from, or written to once
    (None: converted every time, kept nowhere).
    """
    from tokenizers import Tokenizer

    from kvlab.engine.gemma_config import read_gemma_config

    p = Path(path)
    config = read_gemma_config(p)  # refuses other architectures and broken files first
    if cache is not None and cache.is_file():
        tokenizer = Tokenizer.from_file(str(cache))
    else:
        tokenizer = _convert(p)
        if cache is not None:
            cache.parent.mkdir(parents=True, exist_ok=True)
            partial = cache.with_suffix(".part")
            tokenizer.save(str(partial))
            partial.replace(cache)  # never a half-written tokenizer
    return GGUFTokenizer(tokenizer, bos_id=config.bos_id, eos_id=config.eos_ids[0])
