"""llama.cpp's ``POST /infill``: text between a prefix and a suffix, streamed like
``/completion`` (its events and final object are the same)."""

from __future__ import annotations

from typing import Any

from kvlab.api.llamacpp import LlamaCompletion


class LlamaInfill(LlamaCompletion):
    """llama.cpp's ``/infill``; the prompt is the prefix, the suffix is empty."""

    kind = "llamacpp-infill"
    path = "/infill"
    routes = ("/infill",)
    prompt_field = "input_prefix"

    def body(self, prompt: str, max_tokens: int, stream: bool,
             model: str | None) -> dict[str, Any]:
        return {"input_prefix": prompt, "input_suffix": "", "n_predict": max_tokens,
                "stream": stream}
