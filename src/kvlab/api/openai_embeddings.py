"""OpenAI's embeddings API: ``POST /v1/embeddings``.

Not a generation: a request carries a batch of texts (``input``, one or more) and the
answer one vector per text, whole, never streamed: ``{"object": "list", "data":
[{"object": "embedding", "index": i, "embedding": [floats]}], "usage":
{"prompt_tokens", "total_tokens"}}``. ``encoding_format: "float"`` asks for JSON
numbers (not base64). A request may ask a shorter vector with ``dimensions``.

What a client keeps of an answer is what validation needs, not the vectors: how many
came, their lengths and how many values are not finite numbers (NaN, infinities, and
the ``null`` a C++ server writes for a NaN), and the prompt tokens the usage states
(every input's tokens together).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, ClassVar

from kvlab.api.dialect import AnswerHead, Dialect, Finish
from kvlab.api.facts import SHAPE_ERRORS, AnswerFacts, MalformedResponse, malformed
from kvlab.api.sniff import unreadable


class OpenAIEmbeddings(Dialect):
    """OpenAI's ``/v1/embeddings``."""

    kind = "openai-embeddings"
    path = "/v1/embeddings"
    routes: ClassVar[tuple[str, ...]] = ("/v1/embeddings",)
    prompt_field = "input"
    needs_model = True
    max_tokens_field = "max_tokens"  # not sent: an embedding generates nothing
    terminator = "the whole answer (embeddings are not streamed)"
    generates = False

    # -- the request ----------------------------------------------------------------

    def body(self, prompt: str, max_tokens: int, stream: bool,
             model: str | None) -> dict[str, Any]:
        return {"model": model, "input": [prompt], "encoding_format": "float"}

    def inputs_fields(self, inputs: Sequence[str]) -> dict[str, Any]:
        return {"input": list(inputs)}

    def probe_body(self, prompt: str, params: dict[str, Any],
                   model: str | None) -> dict[str, Any]:
        body = {**self.body(prompt, 0, False, model), **params}
        for name in ("stream", "stream_options", "n_predict", "max_tokens"):
            body.pop(name, None)
        return body

    # -- the answer (a client's side) -------------------------------------------------

    def read_answer(self, facts: AnswerFacts, obj: dict[str, Any]) -> None:
        data = obj.get("data")
        if not isinstance(data, list):
            raise unreadable(obj, self.kind, "the answer has no 'data' list of vectors")
        try:
            lengths: set[int] = set()
            bad = 0
            for item in data:
                vector = item["embedding"]
                if not isinstance(vector, list):
                    raise MalformedResponse(
                        "an embedding is not a list of numbers (ask encoding_format "
                        "\"float\")")
                lengths.add(len(vector))
                bad += sum(1 for v in vector if not _finite(v))
            indexes = sorted(item.get("index", i) for i, item in enumerate(data))
            if indexes != list(range(len(data))):
                raise MalformedResponse(f"the vectors' indexes are {indexes[:8]}, not "
                                        f"0..{len(data) - 1}")
            facts.vectors, facts.dimensions, facts.non_finite = len(data), sorted(lengths), bad
            usage = obj.get("usage")
            if isinstance(usage, dict):
                facts.prompt_tokens = usage.get("prompt_tokens")
        except SHAPE_ERRORS as exc:
            raise malformed(exc) from exc

    def read_events(self, facts: AnswerFacts, events: list[bytes], t: int) -> bool:
        raise MalformedResponse("an embeddings answer is not a stream")

    def usage_prompt_tokens(self, answer: dict[str, Any]) -> Any:
        usage = answer.get("usage")
        return usage.get("prompt_tokens") if isinstance(usage, dict) else None

    def event_tokens(self, obj: dict[str, Any]) -> int:
        return 0

    # -- the answer (a server's side): kvlab serve writes it whole, from vectors ------

    def token_event(self, head: AnswerHead, text: str, token_ids: Sequence[int],
                    n_predicted: int) -> bytes:
        raise ValueError("an embeddings answer has no token events")

    def closing(self, head: AnswerHead, finish: Finish, include_usage: bool,
                extra: dict[str, Any] | None = None) -> bytes:
        raise ValueError("an embeddings answer is not streamed")

    def whole(self, head: AnswerHead, finish: Finish) -> dict[str, Any]:
        raise ValueError("an embeddings answer is made from vectors: use vectors_answer")


def vectors_answer(model: str, vectors: Sequence[Sequence[float]],
                   prompt_tokens: int) -> dict[str, Any]:
    """The whole answer a server writes holding ``vectors`` (one per input, in order)
    and the prompt tokens of every input together."""
    return {"object": "list", "model": model,
            "data": [{"object": "embedding", "index": i, "embedding": list(v)}
                     for i, v in enumerate(vectors)],
            "usage": {"prompt_tokens": prompt_tokens, "total_tokens": prompt_tokens}}


def _finite(value: Any) -> bool:
    """A finite JSON number (not a boolean, not null)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) \
        and math.isfinite(value)
