"""The ``builtin`` dataset kind: short queries behind a padding text sized per capacity.

The queries are kvlab's 30 built-in questions (the first ``[workload] queries``) or
those of a JSONL file (``queries_file``); each prompt is the padding of its capacity,
then the query (:func:`kvlab.bench.plan.workload.prepare_capacity`), so every query
of a capacity shares the padding and the prompt grows with the capacity.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from kvlab.bench.plan.dataset import DatasetSettings, WorkloadFacts
from kvlab.bench.plan.workload import (
    PreparedPrompt,
    Query,
    Tokenizer,
    builtin_queries,
    load_queries,
    prepare_capacity,
)


class BuiltinDataset(DatasetSettings):
    """``[workload.dataset] kind = "builtin"`` (the default): queries plus padding."""

    kind: Literal["builtin"] = "builtin"

    def prompt_rule(self, prompt_fraction: float) -> str:
        """The padding rule in words, for prompt fraction ``prompt_fraction`` (f)."""
        return (f"Prompt = padding + \"\\n\\n\" + one query. The padding is the longest "
                f"word-aligned prefix of kvlab's text within f·C − max(query tokens) − 2 "
                f"tokens (f = {prompt_fraction:g}, C = capacity), so the longest query's "
                f"prompt is about {prompt_fraction:.0%} of the capacity and the others a few "
                "tokens less; the same prompts for every mode at a capacity.")

    def build(self, workload: WorkloadFacts) -> PaddedQueries:
        if workload.queries_file:
            return PaddedQueries(load_queries(Path(workload.queries_file)))
        return PaddedQueries(builtin_queries(workload.queries))


class PaddedQueries:
    """Queries sent behind a shared padding sized per capacity."""

    def __init__(self, queries: list[Query]) -> None:
        self._queries = queries

    def queries(self) -> list[Query]:
        return list(self._queries)

    async def prepare(self, counter: Tokenizer, capacity: int, prompt_fraction: float,
                      output_tokens: int) -> tuple[int, list[PreparedPrompt]]:
        return await prepare_capacity(counter, self._queries, capacity, prompt_fraction,
                                      output_tokens)
