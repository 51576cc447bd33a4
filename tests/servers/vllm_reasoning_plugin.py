"""A vLLM reasoning-parser plugin that makes any model a "reasoning" model, for tests.

vLLM loads it with ``--reasoning-parser-plugin <this file> --reasoning-parser
first-k-tokens``: the first :data:`THINKING_TOKENS` generated tokens of every chat
answer are its reasoning (streamed as ``delta.reasoning``, counted in the usage's
``completion_tokens_details.reasoning_tokens``), the rest its answer. vLLM's built-in
parsers do not fit the bundled Gemma 3 270M (``deepseek_r1`` wants think tokens the
tokenizer lacks, ``olmo3`` a byte-level BPE vocabulary); this one looks at token
counts only. Written against vLLM 0.32's :class:`vllm.reasoning.ReasoningParser`; it
runs inside vLLM's own environment, so it imports nothing of kvlab's.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from vllm.entrypoints.generate.base.protocol import DeltaMessage
from vllm.reasoning import ReasoningParser, ReasoningParserManager

THINKING_TOKENS = 4  # generated tokens that are reasoning


@ReasoningParserManager.register_module("first-k-tokens")
class FirstTokensReasoningParser(ReasoningParser):
    """The first THINKING_TOKENS generated tokens are reasoning, the rest content."""

    def is_reasoning_end(self, input_ids: Sequence[int]) -> bool:
        # vLLM asks this of the prompt first: the reasoning of an answer never ends there
        return False

    def is_reasoning_end_streaming(self, input_ids: Sequence[int],
                                   delta_ids: Iterable[int]) -> bool:
        return len(input_ids) >= THINKING_TOKENS  # input_ids: the tokens generated so far

    def extract_content_ids(self, input_ids: list[int]) -> list[int]:
        return input_ids[THINKING_TOKENS:]

    def count_reasoning_tokens(self, token_ids: Sequence[int]) -> int:
        return min(len(token_ids), THINKING_TOKENS)

    def extract_reasoning(self, model_output: str, request: Any
                          ) -> tuple[str | None, str | None]:
        ids = self.model_tokenizer.encode(model_output, add_special_tokens=False)
        reasoning = self.model_tokenizer.decode(ids[:THINKING_TOKENS])
        return reasoning or None, self.model_tokenizer.decode(ids[THINKING_TOKENS:]) or None

    def extract_reasoning_streaming(self, previous_text: str, current_text: str,
                                    delta_text: str, previous_token_ids: Sequence[int],
                                    current_token_ids: Sequence[int],
                                    delta_token_ids: Sequence[int]) -> DeltaMessage | None:
        if not delta_text:
            return None
        if len(previous_token_ids) < THINKING_TOKENS:  # a delta that straddles: reasoning
            return DeltaMessage(reasoning=delta_text)
        return DeltaMessage(content=delta_text)
