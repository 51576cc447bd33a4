"""Where a run's requests come from: the dataset interface, and what a kind provides.

A :class:`Dataset` gives the queries a run measures (their ids name the rows) and, for
each capacity, the prompt each query is sent with. Every mode at one capacity gets the
same prompts. Each dataset kind has one :class:`DatasetSettings` class (the
``[workload.dataset]`` table of an experiment, ``kind = "..."``) whose
:meth:`~DatasetSettings.build` makes the dataset; :mod:`kvlab.bench.plan.datasets`
lists the kinds.
"""

from __future__ import annotations

from typing import Protocol

from pydantic import BaseModel, ConfigDict

from kvlab.bench.plan.workload import PreparedPrompt, Query, Tokenizer


class Dataset(Protocol):
    """The queries of a run and the prompts they are sent with."""

    def queries(self) -> list[Query]:
        """Every query, in the order rows are planned; ids are unique."""
        ...

    async def prepare(self, counter: Tokenizer, capacity: int, prompt_fraction: float,
                      output_tokens: int) -> tuple[int, list[PreparedPrompt]]:
        """The prompts of one capacity (context tokens), one per query, sized with
        ``counter`` (text -> tokens, see bench.plan.sizing) so that a prompt plus
        ``output_tokens`` fits; and the tokens of padding they share (0: none).

        ``prompt_fraction``: the share of the capacity a prompt should take, for a kind
        that sizes its prompts. Raises ConfigError when a prompt cannot fit."""
        ...


class WorkloadFacts(Protocol):
    """What a dataset kind may read from the experiment's ``[workload]``."""

    queries: int  # how many queries to measure (the first N)
    queries_file: str | None  # a JSONL file of {"id": ..., "text": ...} (absolute path)


class DatasetSettings(BaseModel):
    """The settings of one dataset kind (``[workload.dataset]``).

    A subclass declares ``kind: Literal["<kind>"] = "<kind>"`` and builds its dataset
    with :meth:`build`.
    """

    model_config = ConfigDict(extra="forbid")

    def build(self, workload: WorkloadFacts) -> Dataset:
        """The dataset of an experiment whose ``[workload]`` is ``workload``."""
        raise NotImplementedError

    def prompt_rule(self, prompt_fraction: float) -> str:
        """How this kind makes its prompts, in one paragraph for the reports."""
        kind = type(self).model_fields["kind"].default
        return f"Prompts come from the {kind!r} dataset; the same prompts for every mode " \
               "at a capacity."
