"""What one answer said, as a dialect reads it: :class:`AnswerFacts`.

A dialect (:mod:`kvlab.api.dialect`) fills these from a whole answer or from stream
events; the benchmark client adds the transport's facts (status, headers, outcome) and
turns them into a Record. Whatever breaks an API raises :class:`MalformedResponse`.
Clock values are whatever the caller passes (the client: ns since the run started).
"""

from __future__ import annotations

from typing import Any

ERROR_EXCERPT_CHARS = 300

# What reading JSON of the wrong shape raises: invalid JSON or UTF-8 (ValueError), a
# list where an object belongs (AttributeError), a number where a list belongs
# (TypeError), a missing key (KeyError). Caught around a dialect's parsing only, and
# turned into MalformedResponse: a fault of the answer, never of kvlab's other code.
SHAPE_ERRORS = (ValueError, AttributeError, TypeError, KeyError)


class MalformedResponse(Exception):
    """A body or event that breaks its API (the client records Outcome.MALFORMED)."""


class WrongApi(MalformedResponse):
    """A body or event of another API than the one asked (a server or proxy answering
    ``/v1/messages`` in OpenAI's chat shape, say): the client records
    Outcome.WRONG_API."""


def malformed(exc: Exception) -> MalformedResponse:
    """The MalformedResponse of a shape error met while parsing an answer."""
    return MalformedResponse(f"{type(exc).__name__}: {exc}"[:ERROR_EXCERPT_CHARS])


class AnswerFacts:
    """The output an answer carried (its pieces, the time of each output chunk) and
    what the server said about it (token counts, stop, timings, terminator)."""

    __slots__ = (
        "cache_written",
        "cached",
        "chunk_ns",
        "chunk_tokens",
        "dimensions",
        "non_finite",
        "open_block",
        "output",
        "prompt_tokens",
        "reasoning_chunks",
        "reasoning_texts",
        "response_id",
        "saw_terminator",
        "saw_usage",
        "stop_type",
        "t_first_answer",
        "t_first_content",
        "t_last_content",
        "texts",
        "timings",
        "truncated",
        "usage_reasoning",
        "vectors",
    )

    def __init__(self) -> None:
        self.t_first_content: int | None = None  # first output chunk, reasoning or answer
        self.t_first_answer: int | None = None  # first answer chunk
        self.t_last_content: int | None = None
        self.chunk_ns: list[int] = []  # arrival of each output chunk
        self.chunk_tokens: list[int | None] = []  # tokens in it; None: the API says not
        self.reasoning_chunks: list[int] = []  # indexes into chunk_ns
        self.texts: list[str] = []  # the answer's pieces
        self.reasoning_texts: list[str] = []
        self.usage_reasoning: int | None = None  # usage's reasoning tokens, verbatim
        self.prompt_tokens: int | None = None
        self.output: int | None = None
        self.cached: int | None = None  # prompt tokens reused from the server's cache
        self.stop_type: str | None = None
        self.truncated: bool | None = None
        self.timings: dict[str, Any] | None = None
        self.saw_terminator: bool | None = None  # None: not streamed
        self.saw_usage: bool | None = None  # None: not applicable
        # prompt tokens the server wrote into its cache (Anthropic's
        # cache_creation_input_tokens); None: not stated
        self.cache_written: int | None = None
        self.response_id: str | None = None  # the answer's id, where a later request
        # may name it (OpenAI Responses' previous_response_id)
        self.open_block: str | None = None  # the content block a stream is inside
        # (Anthropic's content_block_start without its stop yet); None: none
        # an embeddings answer: vectors, their distinct lengths, non-finite values
        self.vectors: int | None = None
        self.dimensions: list[int] | None = None
        self.non_finite: int | None = None

    def saw_output(self, t: int, answer: bool) -> None:
        """Output (reasoning or answer) arrived at ``t``; ``answer``: some of it answer."""
        if self.t_first_content is None:
            self.t_first_content = t
        if answer and self.t_first_answer is None:
            self.t_first_answer = t
        self.t_last_content = t
