"""Hand-built Records for metric, validation and evaluation tests."""

from __future__ import annotations

from typing import Any

from kvlab.rundir import ApiKind, Outcome, Record

MS = 1_000_000  # ns per ms


def row(**overrides: Any) -> Record:
    """A valid streamed llama.cpp row: sent at 0, 64 tokens, 1000 ms end to end.

    First content at 100 ms, last at 730 ms (63 gaps of 10 ms), server timings
    prompt_ms 90, predicted_ms 630.
    """
    fields: dict[str, Any] = {
        "run_id": "r", "mode": "a", "capacity": 512, "query_id": "q01",
        "api": ApiKind.LLAMACPP_COMPLETION, "path": "/completion", "stream": True,
        "prompt_sha256": "s" * 64, "requested_tokens": 64,
        "t_sent": 0, "t_first_content": 100 * MS, "t_last_content": 730 * MS,
        "t_end": 1000 * MS, "chunk_ns": [(100 + 10 * i) * MS for i in range(64)],
        "prompt_tokens": 250, "output_tokens": 64, "truncated": False,
        "timings": {"prompt_ms": 90.0, "predicted_ms": 630.0, "predicted_n": 64},
        "saw_terminator": True, "saw_usage": True, "outcome": Outcome.OK,
    }
    fields.update(overrides)
    return Record(**fields)
