"""Small result files in each peer's shape, with known numbers (times in seconds)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def vllm_result(n: int = 6, out: int = 64, ttft: float = 0.1, gap: float = 0.01,
                start_gap: float = 1.0, output_lens: list[int] | None = None,
                detailed: bool = True) -> dict[str, Any]:
    """A ``vllm bench serve`` result: request i sent at i·start_gap, TTFT ``ttft``,
    out − 1 gaps of ``gap`` after the first event (chat: a role chunk first)."""
    itls = [[gap] * (out - 1) for _ in range(n)]
    data: dict[str, Any] = {
        "backend": "openai-chat", "max_concurrency": 1, "request_rate": "inf",
        "output_len": str(out), "mean_ttft_ms": ttft * 1000,
    }
    if detailed:
        data |= {
            "ttfts": [ttft] * n, "itls": itls,
            "latencies": [ttft + gap * (out - 1)] * n,
            "start_times": [100.0 + i * start_gap for i in range(n)],
            "input_lens": [250] * n, "output_lens": output_lens or [out] * n,
            "generated_texts": ["x"] * n, "errors": [""] * n,
        }
    return data


def guidellm_report(n: int = 6, out: int = 64, ttft: float = 0.1, gap: float = 0.01,
                    tail: float = 0.05, output_tokens: list[int] | None = None,
                    answer_after: float | None = None) -> dict[str, Any]:
    """A GuideLLM report with one synchronous benchmark of ``n`` successful requests;
    ``answer_after`` (s after the first token): GuideLLM 0.7's first answer token."""
    requests = []
    for i in range(n):
        start = 1_700_000_000.0 + i
        last = start + ttft + gap * (out - 1)
        body = {"prompt": f"query {i}", "max_tokens": out, "stream": True}
        requests.append({
            "request_id": f"req{i}", "request_args": json.dumps({"body": body}),
            "output": "x", "output_tokens": (output_tokens or [out] * n)[i],
            "prompt_tokens": 250,
            "info": {"timings": {
                "request_start": start, "first_request_iteration": start + ttft,
                "first_token_iteration": start + ttft, "last_token_iteration": last,
                "request_end": last + tail,
                **({} if answer_after is None else
                   {"first_output_token_iteration": start + ttft + answer_after}),
            }},
        })
    return {"metadata": {}, "benchmarks": [{
        "type_": "generative_benchmark", "config": {"strategy": {"type_": "synchronous"}},
        "requests": {"successful": requests, "incomplete": [], "errored": []},
    }]}


def aiperf_lines(n: int = 6, out: int = 64, ttft_ms: float = 100.0,
                 gap_ms: float = 10.0) -> list[dict[str, Any]]:
    """AIPerf profile_export.jsonl records, one warm-up first."""
    lines = []
    for i in range(n + 1):
        start = 5_000_000_000 + i * 1_000_000_000
        latency = ttft_ms + gap_ms * (out - 1)
        lines.append({
            "metadata": {"session_num": i, "request_start_ns": start,
                         "request_end_ns": start + int((latency + 5) * 1e6),
                         "benchmark_phase": "warmup" if i == 0 else "profiling"},
            "metrics": {
                "time_to_first_token": {"value": ttft_ms, "unit": "ms"},
                "request_latency": {"value": latency, "unit": "ms"},
                "inter_chunk_latency": {"value": [gap_ms] * (out - 1), "unit": "ms"},
                "output_sequence_length": {"value": out, "unit": "tokens"},
                "input_sequence_length": {"value": 250, "unit": "tokens"},
                "requested_osl": {"value": out, "unit": "tokens"},
            },
            "error": None,
        })
    return lines


def write(path: Path, data: Any) -> Path:
    """Write JSON (a list of records becomes JSONL, as AIPerf writes it)."""
    if isinstance(data, list):
        path.write_text("".join(json.dumps(d) + "\n" for d in data))
    else:
        path.write_text(json.dumps(data))
    return path
