"""``process_memory.jsonl``: a launched server's process-tree memory during each load
point, one :class:`MemorySample` a line (written by
:class:`kvlab.run.tree_memory.TreeMemoryRecorder` through
:class:`~kvlab.rundir.jsonl.JsonlAppender`, read back by :func:`read_memory_samples`)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict

from kvlab.rundir.jsonl import read_jsonl


class MemorySample(BaseModel):
    """The resident memory of a launched server's whole process tree (the process kvlab
    started and every descendant: vLLM's engine core and workers) at one moment of a
    load point, beside the point's ``/metrics`` readings (``process_memory.jsonl``).

    ``rss_bytes``: the sum of the processes' resident set sizes (pages they share, such
    as one library mapped by two of them, count in each); ``processes``: how many were
    summed; ``phase``: "start" (before the point's first request), "during" (polled),
    "end" (after its last answer)."""

    model_config = ConfigDict(extra="forbid")

    mode: str
    capacity: int
    load: str | None
    t_ns: int  # run clock
    rss_bytes: int
    processes: int
    phase: Literal["start", "during", "end"] = "during"


def read_memory_samples(path: Path) -> list[MemorySample]:
    """Every sample of a ``process_memory.jsonl`` ([] when it does not exist); a torn
    final line is skipped."""
    return read_jsonl(path, MemorySample)
