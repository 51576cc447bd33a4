"""records.jsonl across Record layouts: a record of schema 1 (before connection set-up
was recorded) still reads, with nothing observed in the new fields."""

from __future__ import annotations

import json
from pathlib import Path

from kvlab.analysis import metrics
from kvlab.rundir import RECORD_SCHEMA, read_records

# One line as kvlab wrote it before schema 2 (its fields exactly: no schema_version,
# no connection set-up), t_sent taken before the pool gave a connection.
OLD_LINE = {
    "run_id": "r1", "mode": "a", "capacity": 512, "query_id": "q01", "repetition": 0,
    "position": 3, "warmup": False, "load": "c=4", "worker": None, "session": None,
    "turn": None, "api": "openai-chat", "path": "/v1/chat/completions", "stream": True,
    "body": {"max_tokens": 8}, "prompt_sha256": "0" * 64, "prompt": "hi",
    "requested_tokens": 8, "t_scheduled": 1000, "t_sent": 2000, "t_headers": 20_000_000,
    "t_first_chunk": 21_000_000, "t_first_content": 21_000_000,
    "t_last_content": 56_000_000, "t_first_answer": 21_000_000, "t_end": 57_000_000,
    "chunk_ns": [21_000_000 + 5_000_000 * i for i in range(8)],
    "chunk_tokens": [None] * 8, "reasoning_chunks": [], "read_lag_ns": 40_000,
    "prompt_tokens": 12, "output_tokens": 8, "cached_tokens": None, "stop_type": "length",
    "truncated": None, "timings": None, "saw_terminator": True, "saw_usage": True,
    "usage_reasoning_tokens": None, "cache_creation_tokens": None, "response_id": None,
    "previous_response_id": None, "inputs": None, "vectors": None, "dimensions": None,
    "non_finite": None, "dimension_expected": None, "imported_from": None,
    "outcome": "ok", "http_status": 200, "error": None, "text": "abcdefgh",
    "reasoning_text": "", "notes": [],
}


def test_a_record_of_schema_1_reads_with_no_set_up_observed(tmp_path: Path) -> None:
    path = tmp_path / "records.jsonl"
    path.write_text(json.dumps(OLD_LINE) + "\n", encoding="utf-8")
    (record,) = read_records(path)
    assert record.schema_version == 1 and RECORD_SCHEMA == 2
    assert (record.t_connect_start, record.t_connected, record.t_tls) == (None, None, None)
    assert record.connection_reused is None and record.loop_lag_ns is None
    assert metrics.setup_ms(record) is None  # not observed, not zero
    assert metrics.ttft_ms(record) == (21_000_000 - 2000) / 1e6
    assert metrics.started_ns(record) == 2000
