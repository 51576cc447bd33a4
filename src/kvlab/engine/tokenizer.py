"""A byte-level tokenizer: one token per UTF-8 byte, vocabulary 256.

A character of several bytes spans several tokens, so streamed text must be decoded
incrementally: :class:`IncrementalDecoder` holds back an incomplete character until
its last byte arrives.
"""

from __future__ import annotations

import codecs
from collections.abc import Iterable

from kvlab.errors import EngineError

VOCAB_SIZE = 256
EOS_ID = 0  # the NUL byte; ends generation when EOS is not ignored


def _check_ids(ids: Iterable[int]) -> bytes:
    try:
        return bytes(ids)
    except (ValueError, TypeError):
        raise EngineError(
            f"token ids must be integers in 0..{VOCAB_SIZE - 1} for the byte tokenizer"
        ) from None


class IncrementalDecoder:
    """Turns a stream of byte tokens into text, never splitting a character."""

    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def push(self, token_id: int) -> str:
        """Text completed by this token ("" while a multi-byte character is incomplete)."""
        return self._decoder.decode(_check_ids([token_id]))

    def flush(self) -> str:
        """Whatever is left at the end of the stream (U+FFFD for a truncated character)."""
        return self._decoder.decode(b"", final=True)


class ByteTokenizer:
    """UTF-8 bytes as token ids."""

    vocab_size = VOCAB_SIZE
    eos_id = EOS_ID

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text``: its UTF-8 bytes."""
        return list(text.encode("utf-8"))

    def decode(self, ids: Iterable[int]) -> str:
        """Text of ``ids``; invalid UTF-8 becomes U+FFFD."""
        return _check_ids(ids).decode("utf-8", errors="replace")

    def incremental_decoder(self) -> IncrementalDecoder:
        """A fresh decoder for one streamed generation."""
        return IncrementalDecoder()
