"""The client's whole wait per generated token, a metric of every summary."""

from __future__ import annotations

from kvlab.bench.analysis.metric import Column, Metric
from kvlab.bench.analysis.metrics import e2e_ms
from kvlab.bench.records import Record


def e2e_per_token_ms(row: Record) -> float | None:
    """e2e / output tokens (ms); None without a server count of output tokens."""
    return e2e_ms(row) / row.output_tokens if row.output_tokens else None


E2E_PER_TOKEN = Metric(
    "e2e_per_token_ms", "ms", "e2e / output tokens: the whole wait per generated token",
    row=e2e_per_token_ms, columns=(Column("e2e ms/tok", digits=3),),
    keys=(("mean_e2e_per_token_ms", "mean"),))
