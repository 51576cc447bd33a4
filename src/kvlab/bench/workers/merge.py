"""Every worker's records as one stream, in completion order on the run's time axis.

One process appends each record as its request ends, so ``records.jsonl`` is in
completion order. Workers return their records in batches, each with a watermark (no
later record of that worker ends before it; :class:`~kvlab.bench.workers.worker.Batch`).
A record can be written once every worker still running has passed its end (its
watermark is later): then no record still to come can end before it. Records are
released in ``(t_end, worker, position)`` order; ``flush`` releases the rest (the
point's end, or a Ctrl-C).

Across workers the order is as good as the clock offsets (their error bounds); within
one worker it is exact.
"""

from __future__ import annotations

import heapq

from kvlab.rundir import Record

_Key = tuple[int, int, int]


def _key(record: Record) -> _Key:
    return (record.t_end, record.worker if record.worker is not None else -1, record.position)


class Merger:
    """Records of ``workers`` workers in, records out in completion order."""

    def __init__(self, workers: list[int]) -> None:
        self._watermarks: dict[int, int | None] = {w: None for w in workers}  # None: none yet
        self._done: set[int] = set()
        self._heap: list[tuple[_Key, int, Record]] = []
        self._count = 0  # ties never compare two Records

    def add(self, worker: int, records: list[Record], watermark_ns: int,
            done: bool) -> list[Record]:
        """Take one batch of ``worker``; return the records now safe to write, in order."""
        for record in records:
            self._count += 1
            heapq.heappush(self._heap, (_key(record), self._count, record))
        if done:
            self._done.add(worker)
        else:
            self._watermarks[worker] = watermark_ns
        return self._release()

    def flush(self) -> list[Record]:
        """Every record still held, in order (the point ended or was stopped)."""
        return [heapq.heappop(self._heap)[2] for _ in range(len(self._heap))]

    @property
    def held(self) -> int:
        """Records taken but not released yet."""
        return len(self._heap)

    def _release(self) -> list[Record]:
        running = [w for w in self._watermarks if w not in self._done]
        if any(self._watermarks[w] is None for w in running):
            return []  # a worker not heard from yet may still return an early record
        limit = min((self._watermarks[w] or 0 for w in running), default=None)
        out = []
        while self._heap and (limit is None or self._heap[0][0][0] < limit):
            out.append(heapq.heappop(self._heap)[2])
        return out
