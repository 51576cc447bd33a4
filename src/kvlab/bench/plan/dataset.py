"""Where a run's requests come from: the dataset interface, and what a kind provides.

A :class:`Dataset` gives the queries a run measures (their ids name the rows) and, for
each capacity, the prompt each query is sent with. Every mode at one capacity gets the
same prompts. Each dataset kind has one :class:`DatasetSettings` class (the
``[workload.dataset]`` table of an experiment, ``kind = "..."``) whose
:meth:`~DatasetSettings.build` makes the dataset; :mod:`kvlab.bench.plan.datasets`
lists the kinds.
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar, Protocol, Self

from pydantic import BaseModel, ConfigDict, Field

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
    with :meth:`build`. ``timed``: its rows carry arrival times (``arrival_ms``), which a
    load that replays them needs. ``session_turns``: its rows are the turns of sessions
    (:mod:`kvlab.bench.plan.sessions`), which only a sessions load sends.
    """

    model_config = ConfigDict(extra="forbid")
    timed: ClassVar[bool] = False
    session_turns: ClassVar[bool] = False

    def build(self, workload: WorkloadFacts) -> Dataset:
        """The dataset of an experiment whose ``[workload]`` is ``workload``."""
        raise NotImplementedError

    def prompt_rule(self, prompt_fraction: float) -> str:
        """How this kind makes its prompts, in one paragraph for the reports."""
        kind = type(self).model_fields["kind"].default
        return f"Prompts come from the {kind!r} dataset; the same prompts for every mode " \
               "at a capacity."

    def capacity_problem(self, capacity: int) -> str | None:
        """Why this kind cannot make prompts for ``capacity``, as ``key: what to fix``
        (None: it can); checked when the experiment is read, before any server starts."""
        return None

    def data_file(self) -> str | None:
        """The file the rows are read from (None: the kind reads none)."""
        return None

    def resolved(self, base: Path) -> Self:
        """This table with a relative file path made absolute against ``base`` (the
        experiment file's folder)."""
        return self

    def with_file(self, path: str) -> Self:
        """This table reading ``path`` instead (a resumed run reads the file as resolved
        when the run began); unchanged for a kind that reads no file."""
        return self


class FileDatasetSettings(DatasetSettings):
    """A kind whose rows come from a file: ``path`` (relative to the experiment file)
    and ``rows``, how many of them to measure (the first N; default all)."""

    path: str = Field(min_length=1)
    rows: int | None = Field(default=None, ge=1)

    def data_file(self) -> str | None:
        return self.path

    def resolved(self, base: Path) -> Self:
        path = Path(self.path).expanduser()
        if path.is_absolute():
            return self
        return self.model_copy(update={"path": str((base / path).resolve())})

    def with_file(self, path: str) -> Self:
        return self.model_copy(update={"path": path})
