"""The registry of API dialects: :class:`ApiKind` and the one dialect of each.

An experiment's ``api = "..."``, a Record's ``api`` and ``kvlab calibrate --api`` name
an :class:`ApiKind`; :func:`dialect_of` gives its :class:`~kvlab.api.dialect.Dialect`,
and :func:`dialect_at` the dialect a server answers at a route. A new dialect is one
module and, here, its value in :class:`ApiKind` and its instance in :data:`DIALECTS`.
"""

from __future__ import annotations

from enum import StrEnum

from kvlab.api.anthropic_messages import AnthropicMessages
from kvlab.api.dialect import Dialect
from kvlab.api.llamacpp import LlamaCompletion
from kvlab.api.openai_chat import OpenAIChat
from kvlab.api.openai_completion import OpenAICompletion
from kvlab.api.openai_embeddings import OpenAIEmbeddings
from kvlab.api.openai_responses import OpenAIResponses


class ApiKind(StrEnum):
    """Which HTTP API a request used (the value records and experiment files carry)."""

    LLAMACPP_COMPLETION = "llamacpp-completion"  # llama.cpp POST /completion
    OPENAI_CHAT = "openai-chat"  # POST /v1/chat/completions
    OPENAI_COMPLETION = "openai-completion"  # POST /v1/completions
    OPENAI_RESPONSES = "openai-responses"  # POST /v1/responses
    ANTHROPIC_MESSAGES = "anthropic-messages"  # POST /v1/messages
    OPENAI_EMBEDDINGS = "openai-embeddings"  # POST /v1/embeddings (not a generation)


DIALECTS: dict[ApiKind, Dialect] = {ApiKind(d.kind): d for d in (
    LlamaCompletion(),
    OpenAIChat(),
    OpenAICompletion(),
    OpenAIResponses(),
    AnthropicMessages(),
    OpenAIEmbeddings(),
)}
if set(DIALECTS) != set(ApiKind):
    raise RuntimeError(f"ApiKind without a dialect: {sorted(set(ApiKind) - set(DIALECTS))}")
_AT_ROUTE: dict[str, Dialect] = {r: d for d in DIALECTS.values() for r in d.routes}
_COUNTING: dict[str, Dialect] = {d.count_path: d for d in DIALECTS.values() if d.count_path}


def dialect_of(kind: ApiKind | str) -> Dialect:
    """The dialect of an API kind (its value works too); ValueError for an unknown one."""
    return DIALECTS[ApiKind(kind)]


def dialect_at(route: str) -> Dialect | None:
    """The dialect a server answers at ``route`` (a URL path); None: none does."""
    return _AT_ROUTE.get(route)


def counting_at(route: str) -> Dialect | None:
    """The dialect whose API counts a request's prompt tokens at ``route``
    (``/v1/messages/count_tokens``); None: none does."""
    return _COUNTING.get(route)
