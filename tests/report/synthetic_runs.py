"""Hand-made run directories for report tests: Records with known timings.

Each row's times are set directly (ns since run start) so metrics are known exactly:
e2e = prefill + decode + overhead_ms, TTFT = prefill + 1 ms, and so on.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from kvlab.rundir import ApiKind, Outcome, Record, RecordStore
from tests.experiments import embedded, experiment

MS = 1_000_000  # ns per ms


def prompt_of(query: str, capacity: int) -> str:
    return f"padding-{capacity} " + query


def make_row(mode: str, capacity: int, query: int, *, prefill: float, decode: float,
             overhead: float = 2.0, start_ms: float = 0.0, tokens: int = 8,
             load: str | None = None, warmup: bool = False, prompt: str | None = None,
             **over: Any) -> Record:
    """One ok streamed llama.cpp row with the given phase times (ms)."""
    qid = f"q{query:02d}"
    text = prompt if prompt is not None else prompt_of(qid, capacity)
    sent = int(start_ms * MS)
    first = sent + int((prefill + 1.0) * MS)
    last = first + int(decode * MS)
    end = sent + int((prefill + decode + overhead) * MS)
    chunks = [first + int(i * decode * MS / (tokens - 1)) for i in range(tokens)]
    fields: dict[str, Any] = dict(
        run_id="r1", mode=mode, capacity=capacity, query_id=qid, warmup=warmup, load=load,
        api=ApiKind.LLAMACPP_COMPLETION, path="/completion", stream=True,
        body={"n_predict": tokens}, prompt_sha256=hashlib.sha256(text.encode()).hexdigest(),
        prompt=text, requested_tokens=tokens, t_sent=sent, t_headers=sent + MS,
        t_first_chunk=first, t_first_content=first, t_last_content=last, t_end=end,
        chunk_ns=chunks, chunk_tokens=[1] * tokens, prompt_tokens=100 + 10 * query + capacity // 8,
        output_tokens=tokens, stop_type="limit", truncated=False,
        timings={"prompt_ms": prefill, "predicted_ms": decode, "predicted_n": tokens,
                 "prompt_n": 100 + query},
        saw_terminator=True, saw_usage=None, outcome=Outcome.OK, text="x" * tokens,
    )
    fields.update(over)
    return Record(**fields)


def two_mode_rows(n: int = 8, capacities: tuple[int, ...] = (256, 1024), *,
                  speedup: float = 2.0) -> list[Record]:
    """Modes "slow" and "fast" (fast's prefill ``speedup`` times shorter), plus warm-ups."""
    rows: list[Record] = []
    t = 0.0
    for capacity in capacities:
        for mode, factor in (("slow", 1.0), ("fast", 1.0 / speedup)):
            rows.append(make_row(mode, capacity, 0, prefill=50, decode=40, warmup=True,
                                 start_ms=t))
            t += 100
            for q in range(n):
                base = 20.0 + 3.0 * q + capacity / 32
                rows.append(make_row(mode, capacity, q, prefill=base * factor,
                                     decode=30.0 + q % 3, start_ms=t))
                t += 100
    return rows


EXPERIMENT_TOML = experiment(
    "synthetic", embedded("slow"), embedded("fast"), description="hand-made records",
    workload=dict(queries=8, capacities=[256, 1024], output_tokens=8),
    compare=[("slow", "fast")]).text()


def write_run(path: Path, rows: list[Record], manifest: dict[str, Any] | None = None,
              experiment: str | None = EXPERIMENT_TOML) -> Path:
    """A run directory: records.jsonl, manifest.json and (unless None) experiment.toml."""
    path.mkdir(parents=True, exist_ok=True)
    if experiment is not None:
        (path / "experiment.toml").write_text(experiment, encoding="utf-8")
    with RecordStore(path / "records.jsonl") as store:
        for row in rows:
            store.append(row)
    doc = manifest if manifest is not None else {"run_id": "r1", "kvlab_version": "test"}
    (path / "manifest.json").write_text(json.dumps(doc), encoding="utf-8")
    return path
