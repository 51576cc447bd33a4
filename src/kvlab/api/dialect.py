"""The interface of an API dialect: what one HTTP API means, both ways round.

A :class:`Dialect` owns everything kvlab knows about one API:

- the request: the path a client posts to and every route a server answers it on, the
  body asking for ``max_tokens`` tokens after a prompt, and the probe that asks only
  for the server's count of a prompt (:meth:`Dialect.probe_body`);
- the answer, read into :class:`~kvlab.api.facts.AnswerFacts`: stream events one
  network read at a time (:meth:`Dialect.read_events`, the client's hot path: no
  per-event work besides the JSON decode and list appends), a whole answer, the prompt
  tokens its usage states and the tokens one decoded event holds (for a plain client);
- the server's side: the events and whole answers kvlab's own servers write (kvlab
  serve, the synthetic server) for an :class:`AnswerHead` and a :class:`Finish`;
- tokenize: ``POST /tokenize`` is the server's, not the API's (llama-server answers it
  beside its OpenAI routes too), so every dialect shares one body both llama.cpp and
  vLLM read.

:mod:`kvlab.api.dialects` registers one instance per ``ApiKind``; nothing else in
kvlab asks which API a request uses.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, ClassVar

from kvlab.api.facts import AnswerFacts
from kvlab.api.wire import event, json_str

OUTPUT_FIELDS = ("n_predict", "max_tokens")  # the body fields naming an output length

Message = dict[str, str]  # one chat message: {"role": ..., "content": ...}


@dataclass(frozen=True)
class AnswerHead:
    """What every event of one answer repeats (a server's side)."""

    id: str  # the answer's id (OpenAI: "chatcmpl-…", "cmpl-…"); llama.cpp sends none
    created: int  # unix seconds
    model: str
    fingerprint: str | None  # OpenAI's system_fingerprint
    n_prompt: int  # prompt tokens (llama.cpp repeats them in every event)

    @cached_property
    def openai_fields(self) -> bytes:
        """``"id":…,"created":…,"model":…,"system_fingerprint":…`` as JSON, made once."""
        fingerprint = b"null" if self.fingerprint is None else json_str(self.fingerprint)
        return (b'"id":%s,"created":%d,"model":%s,"system_fingerprint":%s'
                % (json_str(self.id), self.created, json_str(self.model), fingerprint))


@dataclass(frozen=True)
class Finish:
    """How a generation ended, as a server states it at the end of an answer."""

    text: str  # the whole answer's text (what a non-streamed answer holds)
    tail: str  # text the stream has not sent yet (a decoder's flush; usually "")
    n_output: int  # tokens generated (EOS included)
    stop_type: str  # llama.cpp's: "eos", "word" or "limit"
    truncated: bool  # stopped because the context was full
    cached: int  # prompt tokens reused from the server's cache
    timings: dict[str, Any]  # llama.cpp-shaped timings (OpenAI answers carry them too)
    token_ids: Sequence[int] = ()  # every token, for a non-streamed llama.cpp answer
    settings: dict[str, Any] = field(default_factory=dict)  # llama.cpp generation_settings
    tokens_cached: int = 0  # llama.cpp: KV cells the slot holds at the end

    @property
    def finish_reason(self) -> str:
        """OpenAI's finish_reason: "stop" at EOS or a stop word, else "length"."""
        return "length" if self.stop_type == "limit" else "stop"


class Dialect(ABC):
    """One HTTP API; see the module's docstring. Subclasses set the class variables."""

    kind: ClassVar[str]  # its ApiKind value, what records and experiment files carry
    path: ClassVar[str]  # where a client posts a request
    routes: ClassVar[tuple[str, ...]]  # every route a server answers it on, path first
    chat: ClassVar[bool] = False  # the prompt is a list of messages (a chat template)
    prompt_field: ClassVar[str] = "prompt"  # the body field of the prompt (chat: messages)
    needs_model: ClassVar[bool] = False  # a request must name the model
    max_tokens_field: ClassVar[str]  # the body field of the output length
    terminator: ClassVar[str]  # what ends its stream, in words for a message
    done: ClassVar[bytes] = b""  # the event after a stream's last (b"": none)
    states_usage: ClassVar[bool] = False  # its stream may carry a usage object
    id_prefix: ClassVar[str] = ""  # of an answer's id
    tokenize_path: ClassVar[str] = "/tokenize"  # at the server's root, not under /v1
    generates: ClassVar[bool] = True  # False: no output tokens, no stream (embeddings)
    # where the API itself counts a request's prompt tokens without generating
    # (Anthropic's /v1/messages/count_tokens); None: it has no such route
    count_path: ClassVar[str | None] = None
    keeps_state: ClassVar[bool] = False  # a request may continue a stored answer

    # -- the request ----------------------------------------------------------------

    @abstractmethod
    def body(self, prompt: str, max_tokens: int, stream: bool,
             model: str | None) -> dict[str, Any]:
        """The JSON body asking for ``max_tokens`` tokens after ``prompt``."""

    def messages_fields(self, messages: Sequence[Message]) -> dict[str, Any]:
        """The body fields carrying a whole conversation (``{role, content}`` messages,
        a session's history and its new turn) instead of one prompt; ValueError for an
        API that takes one prompt (:attr:`chat` False)."""
        raise ValueError(f"the {self.kind} API takes one prompt, not chat messages; a "
                         "conversation needs a chat API (openai-chat)")

    def inputs_fields(self, inputs: Sequence[str]) -> dict[str, Any]:
        """The body fields carrying a batch of texts (an embeddings request's inputs);
        ValueError for a generating API, whose request has one prompt."""
        raise ValueError(f"the {self.kind} API takes one prompt, not a batch of inputs; "
                         "a batch needs openai-embeddings")

    def continue_fields(self, previous_id: str, messages: Sequence[Message]
                        ) -> dict[str, Any]:
        """The body fields continuing the server's stored conversation ending with the
        answer ``previous_id``, with only the new ``messages``; ValueError for an API
        whose servers keep no conversation (:attr:`keeps_state` False)."""
        raise ValueError(f"the {self.kind} API keeps no conversation on the server; "
                         "resend the history (openai-responses can continue one)")

    def headers(self, api_key: str | None) -> dict[str, str]:
        """The request headers of the API's authentication (and version, where it has
        one); ``api_key`` None: none but the version."""
        return {"Authorization": f"Bearer {api_key}"} if api_key else {}

    def count_body(self, prompt: str, model: str | None) -> dict[str, Any]:
        """The body :attr:`count_path` counts ``prompt`` from (one user message)."""
        body = self.body(prompt, 1, False, model)
        body.pop(self.max_tokens_field, None)
        body.pop("stream", None)
        return body

    def counted(self, answer: Any) -> int | None:
        """The prompt tokens a :attr:`count_path` answer states; None: none."""
        if not isinstance(answer, dict):
            return None
        value = answer.get("input_tokens")
        return value if isinstance(value, int) and not isinstance(value, bool) \
            and value > 0 else None

    def probe_body(self, prompt: str, params: dict[str, Any],
                   model: str | None) -> dict[str, Any]:
        """A request for one token, not streamed, with the mode's body fields
        ``params``: its answer states what the server counted of ``prompt``."""
        body = self.body(prompt, 1, False, model)
        body.update(params)
        body["stream"] = False
        for name in OUTPUT_FIELDS:
            body.pop(name, None)
        body[self.max_tokens_field] = 1
        body.pop("stream_options", None)  # OpenAI servers refuse it without stream
        return body

    # -- the answer (a client's side) -------------------------------------------------

    @abstractmethod
    def read_events(self, facts: AnswerFacts, events: list[bytes], t: int) -> bool:
        """Read the stream events (SSE data payloads) of one network read that
        arrived at ``t``; True once the stream's terminator came."""

    @abstractmethod
    def read_answer(self, facts: AnswerFacts, obj: dict[str, Any]) -> None:
        """Read a whole (not streamed) answer."""

    @abstractmethod
    def usage_prompt_tokens(self, answer: dict[str, Any]) -> Any:
        """Where a whole answer states the prompt tokens the server counted (raw)."""

    def prompt_tokens(self, answer: Any) -> int | None:
        """The prompt tokens a whole answer states; None when it states no count."""
        if not isinstance(answer, dict):
            return None
        value = self.usage_prompt_tokens(answer)
        return value if isinstance(value, int) and not isinstance(value, bool) \
            and value > 0 else None

    @abstractmethod
    def event_tokens(self, obj: dict[str, Any]) -> int:
        """Output tokens one decoded stream event holds, as far as it says (0: no
        output), for a plain client that keeps no facts."""

    # -- tokenize ---------------------------------------------------------------------

    def tokenize_body(self, text: str, model: str | None) -> dict[str, Any]:
        """A ``POST /tokenize`` body: llama.cpp and kvlab serve read ``content``, vLLM
        ``model`` and ``prompt``; one body serves both."""
        body: dict[str, Any] = {"content": text, "prompt": text}
        if model:
            body["model"] = model
        return body

    def token_count(self, answer: Any) -> int | None:
        """The count of a /tokenize answer (``{"count"}`` or ``{"tokens": [...]}``)."""
        if not isinstance(answer, dict):
            return None
        if isinstance(answer.get("count"), int):
            return answer["count"]
        tokens = answer.get("tokens")
        return len(tokens) if isinstance(tokens, list) else None

    # -- the request (a server's side) ------------------------------------------------

    def chat_request(self, body: dict[str, Any]) -> dict[str, Any]:
        """The request as OpenAI's chat or completions body (``messages`` or
        ``prompt``, ``max_tokens``...), the shape kvlab serve generates from, as
        llama-server converts the APIs it speaks; ValueError (a 400) for a body its API
        refuses. OpenAI's and llama.cpp's own bodies are that shape already."""
        return body

    # -- the answer (a server's side) -------------------------------------------------

    def error_event(self, error: dict[str, Any]) -> bytes:
        """The event of an error inside a stream (``error``: the error object, its
        ``message`` and ``type``), as llama-server writes it: ``{"error": {...}}``."""
        return event({"error": error})

    def opening(self, head: AnswerHead) -> bytes:
        """The events a stream starts with, before the first token (b"": none)."""
        return b""

    @abstractmethod
    def token_event(self, head: AnswerHead, text: str, token_ids: Sequence[int],
                    n_predicted: int) -> bytes:
        """The event of ``token_ids`` (their ``text``); ``n_predicted``: tokens sent so
        far, these included."""

    @abstractmethod
    def closing(self, head: AnswerHead, finish: Finish, include_usage: bool,
                extra: dict[str, Any] | None = None) -> bytes:
        """The events after the last token, :attr:`done` excluded (a server sends that
        even after an error); ``include_usage``: OpenAI's stream_options asked for a
        usage chunk; ``extra``: fields added to the last event."""

    @abstractmethod
    def whole(self, head: AnswerHead, finish: Finish) -> dict[str, Any]:
        """A whole (not streamed) answer."""
