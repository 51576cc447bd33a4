"""OpenAI's completions API: ``POST /v1/completions``.

The prompt is the body's ``prompt``; each stream chunk's choice holds its ``text``, and
so does a whole answer's. The rest is OpenAI's common ground (:mod:`kvlab.api.openai`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from kvlab.api.dialect import AnswerHead, Finish
from kvlab.api.openai import OpenAIDialect
from kvlab.api.wire import json_str


class OpenAICompletion(OpenAIDialect):
    """OpenAI's ``/v1/completions``."""

    kind = "openai-completion"
    path = "/v1/completions"
    routes: ClassVar[tuple[str, ...]] = ("/v1/completions",)
    id_prefix = "cmpl-"
    part_key = None
    answer_key = None
    text_key = "text"
    chunk_object = "text_completion"
    answer_object = "text_completion"

    def token_event(self, head: AnswerHead, text: str, token_ids: Sequence[int],
                    n_predicted: int) -> bytes:
        return (b'data: {%s,"object":"text_completion","choices":[{"index":0,"text":%s,'
                b'"logprobs":null,"finish_reason":null}]}\n\n'
                % (head.openai_fields, json_str(text)))

    def finish_choices(self, finish: Finish) -> list[dict[str, Any]]:
        return [self.whole_choice(finish) | {"text": finish.tail}]

    def whole_choice(self, finish: Finish) -> dict[str, Any]:
        return {"index": 0, "text": finish.text, "logprobs": None,
                "finish_reason": finish.finish_reason}
