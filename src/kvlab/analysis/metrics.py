"""Metrics: pure functions of one Record (or a list of them), per design.md.

Each function returns a number in the unit its name says, or ``None`` when a fact it
needs was not observed (no stream, no server timings, fewer than two tokens...).
Clock fields are nanoseconds since the run start; results are milliseconds.
"""

from __future__ import annotations

from collections.abc import Iterable
from itertools import pairwise

from kvlab.rundir import Record

_NS_PER_MS = 1_000_000.0


def e2e_ms(row: Record) -> float:
    """End minus sent: the client's whole wait (the tutorial's "seconds", in ms), from
    the request written (a connection's set-up is :func:`setup_ms`, apart)."""
    return (row.t_end - row.t_sent) / _NS_PER_MS


def ttft_ms(row: Record) -> float | None:
    """Time to first token: the first output chunk of any kind (a reasoning model's
    thinking included) minus sent; None if none arrived."""
    if row.t_first_content is None:
        return None
    return (row.t_first_content - row.t_sent) / _NS_PER_MS


def setup_ms(row: Record) -> float | None:
    """Connection set-up the request paid: connected (TLS done over ``https://``) minus
    connect start when it opened its own connection; 0 on a connection opened before it
    (kept alive, or by the point's warm-up). None: not observed (a record of schema 1,
    a peer's), or a connection that never opened. Never part of TTFT or e2e."""
    if row.connection_reused is None:
        return None
    if row.connection_reused:
        return 0.0
    done = row.t_tls if row.t_tls is not None else row.t_connected
    if row.t_connect_start is None or done is None:
        return None
    return (done - row.t_connect_start) / _NS_PER_MS


def started_ns(row: Record) -> int:
    """When the request left the client's hands (ns): its connection's set-up start
    where it opened one, else when it was written. A schedule's lag counts from here."""
    return row.t_connect_start if row.t_connect_start is not None else row.t_sent


def answer_ttft_ms(row: Record) -> float | None:
    """Time to first answer token: the first chunk of the answer itself (not reasoning)
    minus sent; equal to :func:`ttft_ms` when nothing was reasoning. None if no answer
    chunk arrived (a stream that was all reasoning, no stream, an older record)."""
    if row.t_first_answer is None:
        return None
    return (row.t_first_answer - row.t_sent) / _NS_PER_MS


def reasoning_tokens(row: Record) -> int | None:
    """A row's reasoning tokens. Streamed: one per reasoning chunk is a lower bound (a
    delta may hold several tokens), so the usage's ``reasoning_tokens`` is kept when it
    is at least that, and the streamed count is used when the usage says fewer (vLLM 0.32
    reports 0 with a reasoning parser); the row's notes say which. Not streamed: the
    usage's count. None when neither is known."""
    if row.stream:
        streamed = len(row.reasoning_chunks)
        usage = row.usage_reasoning_tokens
        return streamed if usage is None else max(streamed, usage)
    return row.usage_reasoning_tokens


def decode_span_ms(row: Record) -> float | None:
    """Last output chunk minus the first (ms): the client's view of the decode phase
    (vLLM's ``request_decode_time_seconds`` on the server). None without both."""
    if row.t_first_content is None or row.t_last_content is None:
        return None
    return (row.t_last_content - row.t_first_content) / _NS_PER_MS


def itl_effective_ms(row: Record) -> float | None:
    """(last output - first output) / (output tokens - 1), server-counted tokens (a
    reasoning model's thinking is output on both sides).

    None without a stream's first/last content or with fewer than two output tokens.
    """
    if row.t_first_content is None or row.t_last_content is None:
        return None
    if row.output_tokens is None or row.output_tokens < 2:
        return None
    return (row.t_last_content - row.t_first_content) / _NS_PER_MS / (row.output_tokens - 1)


def inter_delta_gaps_ms(row: Record) -> list[float]:
    """Gaps between successive output chunks (ms); a chunk may hold several tokens."""
    times = row.chunk_ns
    return [(b - a) / _NS_PER_MS for a, b in pairwise(times)]


def content_deltas(row: Record) -> int:
    """Number of output chunks received, reasoning included (not a token count)."""
    return len(row.chunk_ns)


def _timing(row: Record, key: str) -> float | None:
    if not row.timings:
        return None
    value = row.timings.get(key)
    return float(value) if isinstance(value, int | float) else None


def prefill_ms(row: Record) -> float | None:
    """llama.cpp ``timings.prompt_ms`` (includes the first token); None without timings."""
    return _timing(row, "prompt_ms")


def decode_ms(row: Record) -> float | None:
    """llama.cpp ``timings.predicted_ms`` (first token to last); None without timings."""
    return _timing(row, "predicted_ms")


def decode_per_token_ms(row: Record) -> float | None:
    """predicted_ms / (predicted_n - 1): decode time per generated token after the first."""
    decode = decode_ms(row)
    n = _timing(row, "predicted_n")
    if decode is None or n is None or n < 2:
        return None
    return decode / (n - 1)


def overhead_ms(row: Record) -> float | None:
    """e2e - (prefill + decode): HTTP, queueing and client time; None without timings."""
    prefill, decode = prefill_ms(row), decode_ms(row)
    if prefill is None or decode is None:
        return None
    return e2e_ms(row) - (prefill + decode)


def decode_tokens_per_s(row: Record) -> float | None:
    """(predicted_n - 1) / predicted_ms, llama.cpp's own generation rate (tokens/s)."""
    decode = decode_ms(row)
    n = _timing(row, "predicted_n")
    if decode is None or n is None or n < 2 or decode <= 0:
        return None
    return (n - 1) / (decode / 1000.0)


def e2e_tokens_per_s(rows: Iterable[Record]) -> float | None:
    """Σ output tokens / Σ e2e seconds over rows (not the mean of per-row rates).

    Two rows of 64 tokens in 0.5 s and 1.5 s give 128 / 2.0 = 64 tokens/s. None if no
    row has a token count or the total time is not positive.
    """
    tokens = 0
    seconds = 0.0
    for row in rows:
        if row.output_tokens is None:
            continue
        tokens += row.output_tokens
        seconds += e2e_ms(row) / 1000.0
    if seconds <= 0:
        return None
    return tokens / seconds


def system_tokens_per_s(rows: Iterable[Record], within: Iterable[Record] | None = None
                        ) -> float | None:
    """Σ output tokens of ``rows`` / (last end − first sent), tokens/s: the rate of the
    whole group as one benchmark. The span is over ``within`` when given (every request
    the group sent, refused ones included: they took their time too), else over the
    rows that counted tokens; None when no row counted tokens or the span is empty."""
    counted = [r for r in rows if r.output_tokens is not None]
    if not counted:
        return None
    spanned = counted if within is None else list(within)
    span_s = (max(r.t_end for r in spanned) - min(r.t_sent for r in spanned)) / 1e9
    if span_s <= 0:
        return None
    return sum(r.output_tokens or 0 for r in counted) / span_s
