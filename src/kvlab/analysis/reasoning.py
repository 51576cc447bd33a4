"""Reasoning streams: the time to first token and the time to first answer token, apart.

A reasoning model streams its thinking (``delta.reasoning`` in vLLM,
``reasoning_content`` in llama-server) before its answer. kvlab counts that thinking as
output: TTFT runs to the first token of any kind, ITL and the chunk counts cover every
output token, and the time to first answer token (:func:`~kvlab.analysis.
metrics.answer_ttft_ms`) is its own number. For each (mode, capacity, load) whose valid
rows carried any reasoning, :class:`ReasoningCell` puts both times side by side with the
reasoning tokens: streamed (one per reasoning chunk, the count kvlab uses) and as the
server's usage reported them (``completion_tokens_details.reasoning_tokens``), and how
many rows' usage disagreed with the stream (their records' ``notes`` say so).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from kvlab.analysis import metrics
from kvlab.analysis.percentiles import Distribution, describe, percentile
from kvlab.analysis.valid_rows import RowCount, ValidRows
from kvlab.rundir import Record


@dataclass(frozen=True)
class ReasoningCell:
    """One (mode, capacity, load)'s valid rows, where some carried reasoning (ms)."""

    mode: str
    capacity: int
    load: str | None
    count: RowCount  # what it stands on: n valid of m
    reasoning_rows: int  # valid rows that carried reasoning
    ttft_ms: Distribution  # first token of any kind − sent
    answer_ttft_ms: Distribution  # first answer token − sent
    p90_ms: tuple[float | None, float | None]  # (TTFT, first answer token) p90s
    reasoning_tokens: Distribution  # streamed (one per reasoning chunk)
    usage_reasoning_tokens: Distribution  # as the usage reported them (rows that did)
    disagreeing: int  # rows whose usage's count differs from the stream's

    def to_dict(self) -> dict[str, Any]:
        return {"mode": self.mode, "capacity": self.capacity, "load": self.load,
                "rows": self.count.to_dict(), "reasoning_rows": self.reasoning_rows,
                "ttft_ms": {**self.ttft_ms.to_dict(), "p90": self.p90_ms[0]},
                "answer_ttft_ms": {**self.answer_ttft_ms.to_dict(), "p90": self.p90_ms[1]},
                "reasoning_tokens": self.reasoning_tokens.to_dict(),
                "usage_reasoning_tokens": self.usage_reasoning_tokens.to_dict(),
                "usage_disagrees": self.disagreeing}


def _reasoned(row: Record) -> bool:
    return bool(row.reasoning_chunks or row.reasoning_text)


def _present(values: Iterable[float | int | None]) -> list[float]:
    return [float(v) for v in values if v is not None]


def reasoning_cells(valid: ValidRows) -> list[ReasoningCell]:
    """The cells whose valid rows carried reasoning, in report order ([] when none)."""
    out = []
    for (mode, capacity, load), group in valid.groups().items():
        good = group.rows
        if not any(_reasoned(r) for r in good):
            continue
        ttft = _present(metrics.ttft_ms(r) for r in good)
        answer = _present(metrics.answer_ttft_ms(r) for r in good)
        out.append(ReasoningCell(
            mode, capacity, load, group.count, sum(1 for r in good if _reasoned(r)),
            describe(ttft), describe(answer), (percentile(ttft, 90), percentile(answer, 90)),
            describe(_present(metrics.reasoning_tokens(r) for r in good)),
            describe(_present(r.usage_reasoning_tokens for r in good)),
            sum(1 for r in good if r.stream and r.usage_reasoning_tokens is not None
                and r.usage_reasoning_tokens != len(r.reasoning_chunks))))
    return out
