"""OpenAI's chat API: ``POST /v1/chat/completions`` (``/chat/completions`` too).

The prompt is one user message (or a whole conversation: :meth:`OpenAIChat.messages_fields`,
a session's history and its new turn); a server renders the messages with the model's chat
template. A stream opens with a chunk whose ``delta`` is ``{role: "assistant",
content: null}``, then one ``delta.content`` per token; a whole answer's text is
``choices[0].message.content``. The rest is OpenAI's common ground
(:mod:`kvlab.api.openai`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from kvlab.api.dialect import AnswerHead, Finish, Message
from kvlab.api.openai import OpenAIDialect
from kvlab.api.wire import event, json_str


class OpenAIChat(OpenAIDialect):
    """OpenAI's ``/v1/chat/completions``."""

    kind = "openai-chat"
    path = "/v1/chat/completions"
    routes: ClassVar[tuple[str, ...]] = ("/v1/chat/completions", "/chat/completions")
    chat = True
    prompt_field = "messages"
    id_prefix = "chatcmpl-"
    part_key = "delta"
    answer_key = "message"
    text_key = "content"
    chunk_object = "chat.completion.chunk"
    answer_object = "chat.completion"

    def prompt_fields(self, prompt: str) -> dict[str, Any]:
        return {"messages": [{"role": "user", "content": prompt}]}

    def messages_fields(self, messages: Sequence[Message]) -> dict[str, Any]:
        return {"messages": [dict(m) for m in messages]}

    def opening(self, head: AnswerHead) -> bytes:
        return event(self._chunk(head, {"index": 0, "delta": {"role": "assistant",
                                                              "content": None},
                                        "finish_reason": None}))

    def token_event(self, head: AnswerHead, text: str, token_ids: Sequence[int],
                    n_predicted: int) -> bytes:
        return (b'data: {%s,"object":"chat.completion.chunk","choices":[{"index":0,'
                b'"delta":{"content":%s},"finish_reason":null}]}\n\n'
                % (head.openai_fields, json_str(text)))

    def finish_choices(self, finish: Finish) -> list[dict[str, Any]]:
        tail = [{"index": 0, "delta": {"content": finish.tail}, "finish_reason": None}] \
            if finish.tail else []
        return [*tail, {"index": 0, "delta": {}, "finish_reason": finish.finish_reason}]

    def whole_choice(self, finish: Finish) -> dict[str, Any]:
        return {"index": 0, "finish_reason": finish.finish_reason,
                "message": {"role": "assistant", "content": finish.text}}
