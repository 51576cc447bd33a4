"""Rows whose prompt text a file gives (``jsonl``, ``csv``, ``sharegpt``): sent as written.

Each row keeps what it asks for: its prompt, counted per capacity by the run's token
counter, and its output length: the row's own (a column), the token count of an
answer the file gives (ShareGPT), or the workload's ``output_tokens``. Nothing is
padded; a row whose prompt plus output does not fit a capacity is refused with its
``file:line``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field

from kvlab.bench.plan.rows import FileRow, unique_ids
from kvlab.bench.plan.workload import PreparedPrompt, Query, Tokenizer, sha256
from kvlab.errors import ConfigError

QUERY_CHARS = 120  # a row's query label: the first characters of its prompt


@dataclass(frozen=True)
class TextRow:
    """One row to send as written.

    ``output_tokens``: the row's own output length (None: see ``answer``); ``answer``:
    a text whose token count is the output length (ShareGPT's reply); ``conversation``
    and ``turn``: where a multi-turn row sits (turn 1, 2, ...)."""

    id: str
    prompt: str
    source: str  # file:line
    output_tokens: int | None = None
    answer: str | None = None
    conversation: str | None = None
    turn: int | None = None


@dataclass(frozen=True)
class OutputBounds:
    """Bounds on an output length counted from an answer (tokens); None: unbounded."""

    low: int = 2
    high: int | None = None

    def clip(self, tokens: int) -> int:
        tokens = max(self.low, tokens)
        return tokens if self.high is None else min(self.high, tokens)


class TextRows:
    """A dataset of :class:`TextRow` (the :class:`~kvlab.bench.plan.dataset.Dataset`
    interface)."""

    def __init__(self, rows: Sequence[TextRow], bounds: OutputBounds | None = None) -> None:
        self._rows = list(rows)
        self._bounds = bounds or OutputBounds()

    def queries(self) -> list[Query]:
        return [Query(r.id, r.prompt[:QUERY_CHARS]) for r in self._rows]

    async def prepare(self, counter: Tokenizer, capacity: int, prompt_fraction: float,
                      output_tokens: int) -> tuple[int, list[PreparedPrompt]]:
        """Every row counted; ConfigError (its ``file:line``) for one that does not fit.
        ``prompt_fraction`` does not apply: prompts are sent as written."""
        prompts = []
        for row in self._rows:
            tokens = await counter(row.prompt)
            output = await self._output(counter, row, output_tokens)
            if tokens + output > capacity:
                raise ConfigError(
                    f"{row.source}: row {row.id}: {tokens} prompt tokens + {output} output "
                    f"tokens exceed the capacity {capacity}; drop the row or raise the "
                    "capacity")
            prompts.append(PreparedPrompt(
                row.id, row.prompt[:QUERY_CHARS], row.prompt, sha256(row.prompt), tokens,
                output_tokens=output, source=row.source, conversation=row.conversation,
                turn=row.turn))
        return 0, prompts

    async def _output(self, counter: Tokenizer, row: TextRow, default: int) -> int:
        if row.output_tokens is not None:
            return row.output_tokens
        if row.answer is not None:
            return self._bounds.clip(await counter(row.answer))
        return default


class Columns(BaseModel):
    """Which column holds what (``[workload.dataset.columns]``)."""

    model_config = ConfigDict(extra="forbid")

    prompt: str = Field(default="prompt", min_length=1)  # the prompt text
    id: str | None = None  # the row's id; None: "line<N>", its line in the file
    output_tokens: str | None = None  # the row's output length; None: the workload's

    def output_rule(self) -> str:
        """Where each row's output length comes from, in words."""
        if self.output_tokens:
            return f"each row's output length from {self.output_tokens!r}"
        return "every row's output length is [workload] output_tokens"


def mapped_rows(rows: Sequence[FileRow], columns: Columns, limit: int | None) -> list[TextRow]:
    """The first ``limit`` rows (all when None) read through ``columns``; ConfigError
    (``file:line``) for a row with no prompt, a negative or zero output length, or an
    id given twice."""
    out = []
    for row in rows[:limit]:
        row_id = str(row.data.get(columns.id, "")) if columns.id else f"line{row.line}"
        if not row_id:
            raise row.error(f"no id: column {columns.id!r} is missing or empty")
        output = row.length(columns.output_tokens, "the output length") \
            if columns.output_tokens else None
        if output == 0:
            raise row.error("the output length is 0; a row asks for at least 1 token")
        out.append(TextRow(row_id, row.text(columns.prompt), row.where, output_tokens=output))
    unique_ids([(r.id, row) for r, row in zip(out, rows, strict=False)])
    return out
