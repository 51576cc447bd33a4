"""The metrics a summary reports, each declared once, and their registry.

:data:`SUMMARY_METRICS` lists every :class:`~kvlab.analysis.metric.Metric` in
the order the summary table shows them; summaries, summaries.csv and records.csv, the
reports' tables and definitions, evaluation.json's ``metric_definitions`` and the
comparisons all follow it. A new metric is one declaration (here or in a module of its
own) and one line in :data:`SUMMARY_METRICS`. The row functions are
:mod:`kvlab.analysis.metrics`.
"""

from __future__ import annotations

from kvlab.analysis import metrics as m
from kvlab.analysis.embedding_metrics import INPUT_TOKENS_PER_SECOND, INPUTS_PER_SECOND
from kvlab.analysis.metric import DIST, VALUE, Column, Metric
from kvlab.analysis.percentiles import describe
from kvlab.analysis.valid_rows import ValidRows
from kvlab.rundir import Record


def _mean_prompt_tokens(group: ValidRows) -> float | None:
    present = [float(r.prompt_tokens) for r in group.rows if r.prompt_tokens is not None]
    return describe(present).mean if present else None


def _streamed_deltas(row: Record) -> int | None:
    return m.content_deltas(row) if row.stream else None


PROMPT_TOKENS = Metric(
    "mean_prompt_tokens", "tokens", "mean of the prompt tokens the server counted "
    "(tokens_evaluated / usage.prompt_tokens) over the valid rows",
    group=_mean_prompt_tokens, columns=(Column("prompt tok", VALUE, 0),),
    keys=(("mean_prompt_tokens", VALUE),))
E2E = Metric(
    "e2e_ms", "ms", "end - sent: the client's whole wait for one request", row=m.e2e_ms,
    compared=True, interval=True,
    columns=(Column("e2e mean ms"), Column("e2e p95 ms", "p95")),
    keys=(("mean_ms", "mean"), ("e2e_ms", DIST)))
TOKENS_PER_SECOND = Metric(
    "tokens_per_second", "tokens/s",
    "sum of output tokens / sum of e2e seconds (not a mean of rates)",
    group=lambda g: m.e2e_tokens_per_s(g.rows), columns=(Column("tok/s", VALUE),),
    keys=(("tokens_per_second", VALUE),), csv_name="e2e_tokens_per_s")
PREFILL = Metric(
    "prefill_ms", "ms", "llama.cpp timings.prompt_ms (server side; includes the first "
    "token)", row=m.prefill_ms, compared=True, columns=(Column("prefill ms"),),
    keys=(("mean_prompt_ms", "mean"),))
DECODE = Metric(
    "decode_ms", "ms", "llama.cpp timings.predicted_ms (first token to last, server side)",
    row=m.decode_ms, compared=True, columns=(Column("decode ms"),),
    keys=(("mean_decode_ms", "mean"),))
DECODE_PER_TOKEN = Metric(
    "decode_per_token_ms", "ms", "decode_ms / (output tokens - 1)",
    row=m.decode_per_token_ms, columns=(Column("decode ms/tok", digits=3),),
    keys=(("mean_decode_per_token_ms", "mean"),))
TTFT = Metric(
    "ttft_ms", "ms", "first output token of any kind (a reasoning model's thinking "
    "included) - sent", row=m.ttft_ms, compared=True, interval=True,
    columns=(Column("TTFT mean ms"), Column("TTFT p95 ms", "p95")),
    keys=(("ttft_ms", DIST),))
ITL = Metric(
    "itl_effective_ms", "ms", "(last output - first output) / (output tokens - 1), "
    "output tokens as the server reports them (reasoning included)",
    row=m.itl_effective_ms, compared=True, interval=True,
    columns=(Column("ITL mean ms", digits=3), Column("ITL p95 ms", "p95", 3)),
    keys=(("itl_effective_ms", DIST),))
INTER_DELTA = Metric(
    "inter_delta_ms", "ms", "gaps between successive output chunks (a chunk may hold "
    "several tokens); median and p95 show client-side jitter",
    pooled=m.inter_delta_gaps_ms,
    columns=(Column("Δ gap p50 ms", "p50", 3), Column("Δ gap p95 ms", "p95", 3)),
    keys=(("inter_delta_median_ms", "p50"), ("inter_delta_p95_ms", "p95")))
CONTENT_DELTAS = Metric(
    "content_deltas", "chunks", "output chunks received per row, reasoning included "
    "(not a token count); none when not streamed", row=_streamed_deltas,
    columns=(Column("deltas/row", digits=1),), keys=(("mean_content_deltas", "mean"),))
ANSWER_TTFT = Metric(
    "answer_ttft_ms", "ms", "first answer token (not reasoning) - sent; ttft_ms when "
    "nothing was reasoning", row=m.answer_ttft_ms)
OVERHEAD = Metric(
    "overhead_ms", "ms", "e2e - (prefill + decode): HTTP, queueing, client",
    row=m.overhead_ms, keys=(("mean_overhead_ms", "mean"),))
DECODE_TPS = Metric(
    "decode_tokens_per_s", "tokens/s", "(predicted_n - 1) / predicted_ms (llama.cpp's own "
    "rate)", row=m.decode_tokens_per_s)
SYSTEM_TPS = Metric(
    "system_tokens_per_s", "tokens/s", "sum of output tokens of valid rows / (last end - "
    "first sent) of every request of the group: what the server delivered under that load",
    group=lambda g: m.system_tokens_per_s(g.rows, within=g.sent),
    keys=(("system_tokens_per_s", VALUE),))
SETUP = Metric(
    "setup_ms", "ms", "connection set-up a request paid: connected (TLS done over "
    "https) - connect start where it opened its own connection, 0 on one opened before it "
    "(kept alive, or by the point's warm-up); not part of TTFT or e2e", row=m.setup_ms,
    columns=(Column("set-up mean ms", digits=3),), keys=(("mean_setup_ms", "mean"),))

SUMMARY_METRICS: tuple[Metric, ...] = (
    PROMPT_TOKENS,
    E2E,
    TOKENS_PER_SECOND,
    PREFILL,
    DECODE,
    DECODE_PER_TOKEN,
    TTFT,
    ITL,
    INTER_DELTA,
    CONTENT_DELTAS,
    ANSWER_TTFT,
    OVERHEAD,
    DECODE_TPS,
    SYSTEM_TPS,
    INPUTS_PER_SECOND,
    INPUT_TOKENS_PER_SECOND,
    SETUP,
)

# The views each kind of metric has, in registry order.
ROW_METRICS = tuple(x for x in SUMMARY_METRICS if x.row is not None)  # records.csv
DISTRIBUTED = tuple(x for x in SUMMARY_METRICS if x.distributed)  # a distribution each
INTERVAL_METRICS = tuple(x for x in SUMMARY_METRICS if x.interval)
COMPARED_METRICS = tuple(x for x in SUMMARY_METRICS if x.compared)  # times only

# What a comparison's figures mean (they are of two summaries, not metrics of one).
COMPARISON_TERMS: dict[str, str] = {
    "ratio": "mean_A / mean_B of one metric at equal capacity; > 1 means B took less time",
    "reduction": "1 - 1/ratio = 1 - B/A: the share of A's time that B saves",
}


def metric_definitions() -> dict[str, str]:
    """Every metric's definition and the comparison terms, by name (evaluation.json's
    ``metric_definitions``, the reports' definitions)."""
    return {**{x.name: x.definition for x in SUMMARY_METRICS}, **COMPARISON_TERMS}


_names = [x.name for x in SUMMARY_METRICS]
if len(_names) != len(set(_names)):  # a name is a key of every view
    raise RuntimeError(f"two metrics share a name: {sorted(_names)}")
