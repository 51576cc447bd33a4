"""What an embeddings load measures instead of tokens generated: inputs and their tokens
per second.

An embeddings request sends a batch of texts and gets one vector per text back, whole:
there is no first token, no inter-token latency and no KV cache kept past the request
(``kvlab memory``'s figures say nothing about it). Its figures are the request latency
(``e2e_ms``), and the rates of the whole group as one benchmark: inputs embedded per
second and input tokens per second (the servers' usage counts), over the span of every
request the group sent. Both are None for a group of generations (no row had inputs).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from kvlab.analysis.metric import VALUE, Metric
from kvlab.analysis.valid_rows import ValidRows
from kvlab.rundir import Record


def _rate(count: Callable[[Record], int | None]) -> Callable[[ValidRows], float | None]:
    """Σ ``count`` of the valid embeddings rows / (last end − first sent) of every
    request the group sent, per second; None without a counted row or a span."""

    def rate(group: ValidRows) -> float | None:
        counted = [c for c in (count(r) for r in group.rows if r.inputs is not None)
                   if c is not None]
        return per_second(sum(counted), group.sent) if counted else None

    return rate


def per_second(total: float, sent: Iterable[Record]) -> float | None:
    """``total`` over the span of ``sent`` (last end − first sent), per second."""
    rows = list(sent)
    span_s = (max(r.t_end for r in rows) - min(r.t_sent for r in rows)) / 1e9 if rows else 0
    return total / span_s if span_s > 0 else None


INPUTS_PER_SECOND = Metric(
    "inputs_per_s", "inputs/s", "embeddings: Σ inputs of the valid rows / (last end - "
    "first sent) of every request of the group", group=_rate(lambda r: r.inputs),
    keys=(("inputs_per_s", VALUE),))
INPUT_TOKENS_PER_SECOND = Metric(
    "input_tokens_per_s", "tokens/s", "embeddings: Σ prompt tokens the server counted "
    "(usage.prompt_tokens, every input of a request) of the valid rows / (last end - "
    "first sent) of every request of the group", group=_rate(lambda r: r.prompt_tokens),
    keys=(("input_tokens_per_s", VALUE),))
