"""Reading one answer: what a response said, accumulated into :class:`ResponseFacts`.

:class:`~kvlab.bench.client.endpoints.HarnessClient` owns the connection and the clock;
the API's dialect (:mod:`kvlab.api`) reads bodies and stream events into the answer's
facts (:class:`~kvlab.api.facts.AnswerFacts`); this module adds what the transport saw
(status, headers, first byte, loop lag, outcome) and names them as a Record does.
Whatever breaks an API raises :class:`MalformedResponse` (the caller records
``Outcome.MALFORMED``); transport failures are recorded with :meth:`ResponseFacts.fail`.
"""

from __future__ import annotations

from typing import Any

from kvlab.api.facts import (
    ERROR_EXCERPT_CHARS,
    AnswerFacts,
    MalformedResponse,
    WrongApi,
    malformed,
)
from kvlab.rundir import Outcome

__all__ = ["ERROR_EXCERPT_CHARS", "MalformedResponse", "ResponseFacts", "WrongApi",
           "malformed"]


class ResponseFacts(AnswerFacts):
    """What one exchange observed; turned into a Record at the end."""

    __slots__ = ("connection_reused", "error", "loop_lag_ns", "outcome", "read_lag_ns",
                 "status", "t_body",
                 "t_connect_start", "t_connected", "t_first_chunk", "t_headers", "t_tls",
                 "t_written")

    def __init__(self) -> None:
        super().__init__()
        self.outcome = Outcome.OK
        self.status: int | None = None
        self.error: str | None = None
        self.t_headers: int | None = None
        self.t_first_chunk: int | None = None
        self.read_lag_ns: int | None = None
        self.t_body: int | None = None  # a whole answer's body fully read (before parsing)
        # connection set-up (run clock ns; None: the request went on a connection opened
        # before it, or not observed), TLS done (None: plain HTTP), the request written
        self.t_connect_start: int | None = None
        self.t_connected: int | None = None
        self.t_tls: int | None = None
        self.t_written: int | None = None
        self.connection_reused: bool | None = None
        self.loop_lag_ns: int | None = None  # the event loop's lag as it was written

    def fail(self, outcome: Outcome, error: str) -> None:
        """Record a failed exchange; the error text is cut to ``ERROR_EXCERPT_CHARS``."""
        self.outcome = outcome
        self.error = error[:ERROR_EXCERPT_CHARS]

    def record_fields(self) -> dict[str, Any]:
        """What the answer said, under the Record's names (the error excepted: the
        client redacts it)."""
        return {
            "t_headers": self.t_headers, "t_first_chunk": self.t_first_chunk,
            "t_first_content": self.t_first_content, "t_first_answer": self.t_first_answer,
            "t_last_content": self.t_last_content,
            "chunk_ns": self.chunk_ns, "chunk_tokens": self.chunk_tokens,
            "reasoning_chunks": self.reasoning_chunks,
            "read_lag_ns": self.read_lag_ns, "t_connect_start": self.t_connect_start,
            "t_connected": self.t_connected, "t_tls": self.t_tls,
            "connection_reused": self.connection_reused, "loop_lag_ns": self.loop_lag_ns,
            "prompt_tokens": self.prompt_tokens,
            "output_tokens": self.output, "cached_tokens": self.cached,
            "stop_type": self.stop_type, "truncated": self.truncated,
            "timings": self.timings, "saw_terminator": self.saw_terminator,
            "saw_usage": self.saw_usage, "usage_reasoning_tokens": self.usage_reasoning,
            "cache_creation_tokens": self.cache_written, "response_id": self.response_id,
            "vectors": self.vectors, "dimensions": self.dimensions,
            "non_finite": self.non_finite,
            "outcome": self.outcome, "http_status": self.status,
            "text": "".join(self.texts), "reasoning_text": "".join(self.reasoning_texts),
            "notes": self.notes(),
        }

    def notes(self) -> list[str]:
        """What the answer said that is odd but no failure (see :meth:`_reasoning_note`),
        and where a stream was cut: inside which content block."""
        out = self._reasoning_note()
        if self.outcome == Outcome.DISCONNECTED and self.open_block is not None:
            out.append(f"the stream was cut inside {self.open_block}")
        return out

    def _reasoning_note(self) -> list[str]:
        """What the answer said that is odd but no failure: a streamed answer whose
        usage counts other reasoning tokens than were streamed. An OpenAI delta does not
        say how many tokens it holds, so the streamed count (one per reasoning chunk) is
        a lower bound: a usage below it is wrong and the streamed count is used; a usage
        above it may be right (vLLM can put two tokens in one delta) and is kept."""
        streamed = len(self.reasoning_chunks)
        usage = self.usage_reasoning
        if self.saw_terminator is None or usage is None or usage == streamed:
            return []
        if usage < streamed:
            return [f"usage says {usage} reasoning tokens, {streamed} were streamed: "
                    "the streamed count is used"]
        return [f"usage says {usage} reasoning tokens, {streamed} reasoning chunks were "
                "streamed (a chunk may hold several tokens): the usage's count is kept"]
