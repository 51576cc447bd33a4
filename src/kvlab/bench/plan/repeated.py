"""The ``repeated`` dataset kind: one text repeated a given number of times per capacity.

The seed notebook measures its vLLM endpoint with one sentence repeated 4, 16 and 48
times (section 6). ``times`` maps each capacity to its repetition count, so each
capacity of the run is one prompt length, reported on its own::

    [workload.dataset]
    kind = "repeated"
    text = "Explain in one sentence why a key-value cache speeds up decoding. "
    times = { 512 = 4, 1024 = 16, 2048 = 48 }

No padding is added; the prompt must fit its capacity with the output tokens.
"""

from __future__ import annotations

import hashlib
from typing import Literal

from pydantic import Field, field_validator

from kvlab.bench.plan.dataset import DatasetSettings, WorkloadFacts
from kvlab.bench.plan.workload import PreparedPrompt, Query, Tokenizer
from kvlab.errors import ConfigError

QUERY_ID = "repeated"


class RepeatedDataset(DatasetSettings):
    """``[workload.dataset] kind = "repeated"``: ``text`` x ``times[capacity]``."""

    kind: Literal["repeated"] = "repeated"
    text: str = Field(min_length=1)
    times: dict[int, int] = Field(min_length=1)  # capacity -> repetitions of text

    @field_validator("times")
    @classmethod
    def _positive(cls, value: dict[int, int]) -> dict[int, int]:
        for capacity, count in value.items():
            if count < 1:
                raise ValueError(f"times[{capacity}] must be at least 1, got {count}")
        return value

    def capacity_problem(self, capacity: int) -> str | None:
        if capacity in self.times:
            return None
        known = ", ".join(str(c) for c in sorted(self.times))
        return (f"times: no entry for capacity {capacity} (it has {known}); add one, e.g. "
                f"{capacity} = 4")

    def prompt_rule(self, prompt_fraction: float) -> str:
        """The prompt of each capacity, in words."""
        times = ", ".join(f"× {n} at {c}" for c, n in sorted(self.times.items()))
        return (f"Prompt = one text repeated ({times}), no padding: {self.text!r}. The "
                "same prompt for every mode at a capacity.")

    def build(self, workload: WorkloadFacts) -> RepeatedText:
        return RepeatedText(self.text, self.times)


class RepeatedText:
    """One query: the text repeated, as many times as its capacity says."""

    def __init__(self, text: str, times: dict[int, int]) -> None:
        self.text = text
        self.times = times

    def queries(self) -> list[Query]:
        return [Query(QUERY_ID, self.text)]

    async def prepare(self, counter: Tokenizer, capacity: int, prompt_fraction: float,
                      output_tokens: int) -> tuple[int, list[PreparedPrompt]]:
        if capacity not in self.times:
            known = ", ".join(str(c) for c in sorted(self.times))
            raise ConfigError(f"workload.dataset.times has no entry for capacity {capacity} "
                              f"(it has {known}); add one, e.g. {capacity} = 4")
        prompt = self.text * self.times[capacity]
        tokens = await counter(prompt)
        if tokens + output_tokens > capacity:
            raise ConfigError(f"workload.dataset: the text x {self.times[capacity]} is "
                              f"{tokens} tokens, which with {output_tokens} output tokens "
                              f"does not fit capacity {capacity}; raise the capacity or "
                              "lower times")
        sha = hashlib.sha256(prompt.encode()).hexdigest()
        return 0, [PreparedPrompt(QUERY_ID, self.text, prompt, sha, tokens)]
