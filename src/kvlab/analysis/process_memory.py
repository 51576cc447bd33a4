"""A launched server's resident memory during each load point, against what kvlab predicts
it holds: the KV budget and the weights.

The run samples the resident set size of the server's whole process tree every 0.25 s
of a load point (``process_memory.jsonl``, :mod:`kvlab.run.tree_memory`). Per
point this gives the RSS before its first request, its highest and after its last
answer, beside:

- the **KV bytes** of the server's budget (:meth:`kvlab.memory.served.ServedKv.kv_bytes`:
  vLLM's ``num_gpu_blocks`` blocks and kvlab serve's ``kv_blocks_total`` as their
  ``/metrics`` reported them, llama-server's caches by llama.cpp's allocation rule);
- the **weights' bytes** the server kind recorded (llama-server: the GGUF file, mapped;
  vLLM: the checkpoint's weight files; kvlab serve: the engine's parameters and buffers
  in their serving format);
- the **rest**: RSS − weights − KV, what the runtime itself holds (libraries, the
  allocator's slack, activations, compiled graphs). A process tree's RSS counts shared
  pages once per process, so vLLM's three processes can show more than they hold.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kvlab.analysis.knee_check import CellKey
from kvlab.analysis.server_counters import exposition
from kvlab.errors import KvlabError
from kvlab.memory.served import ServedKv
from kvlab.rundir import GaugeSample, MemorySample


@dataclass(frozen=True)
class PointMemory:
    """One load point's RSS (bytes) with the predicted KV and weights bytes (None: not
    known; ``kv_why`` says why)."""

    mode: str
    capacity: int
    load: str | None
    samples: int
    processes: int  # the most processes one sample summed
    rss_start: int
    rss_max: int
    rss_end: int
    kv_bytes: int | None
    weights_bytes: int | None
    kv_why: str = ""

    @property
    def rest(self) -> int | None:
        """RSS max − weights − KV; None unless both are known."""
        if self.kv_bytes is None or self.weights_bytes is None:
            return None
        return self.rss_max - self.weights_bytes - self.kv_bytes

    def to_dict(self) -> dict[str, Any]:
        return {"mode": self.mode, "capacity": self.capacity, "load": self.load,
                "samples": self.samples, "processes": self.processes,
                "rss_start": self.rss_start, "rss_max": self.rss_max,
                "rss_end": self.rss_end, "kv_bytes": self.kv_bytes,
                "weights_bytes": self.weights_bytes, "rest": self.rest,
                "kv_why": self.kv_why}


def _kv_bytes(served: ServedKv | None, gauges: Sequence[GaugeSample]) -> tuple[int | None, str]:
    if served is None:
        return None, "the server kind records no KV budget"
    try:
        return served.kv_bytes(exposition(gauges[0].samples) if gauges else None), ""
    except KvlabError as exc:
        return None, str(exc)


def point_memory(samples: Sequence[MemorySample], budgets: Mapping[CellKey, ServedKv],
                 weights: Mapping[CellKey, int], gauges: Sequence[GaugeSample]
                 ) -> list[PointMemory]:
    """One row per (mode, capacity, load) sampled, in the order they ran."""
    groups: dict[tuple[str, int, str | None], list[MemorySample]] = {}
    for s in samples:
        groups.setdefault((s.mode, s.capacity, s.load), []).append(s)
    kv: dict[CellKey, tuple[int | None, str]] = {}
    out = []
    for (mode, capacity, load), rows in groups.items():
        cell = (mode, capacity)
        if cell not in kv:
            kv[cell] = _kv_bytes(budgets.get(cell),
                                 [g for g in gauges if (g.mode, g.capacity) == cell])
        starts = [r for r in rows if r.phase == "start"] or rows
        ends = [r for r in rows if r.phase == "end"] or rows
        out.append(PointMemory(
            mode, capacity, load, len(rows), max(r.processes for r in rows),
            starts[0].rss_bytes, max(r.rss_bytes for r in rows), ends[-1].rss_bytes,
            kv[cell][0], weights.get(cell), kv[cell][1]))
    return out
