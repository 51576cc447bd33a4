"""One load point's schedule, computed once, shared out over N workers.

The coordinator plans the point exactly as one process would (the same requests, the
same positions, the same arrival deadlines) and gives each worker a :class:`Shard`:

- ``rate`` (open loop): arrival ``i`` goes to worker ``i mod N``; every worker sends its
  arrivals at the planned deadlines (ns from the point's common start), so together they
  offer exactly the planned arrivals. A ``max_concurrency`` cap is split over the workers
  (each holds its share; a cap below N is refused).
- ``concurrency`` (closed loop): the N users are split as evenly as possible over the
  workers (at most one worker per user); request ``i`` belongs to user ``i mod users``,
  so each worker's users share the requests of their own, in order.

Sequential points are not sharded: they have one request in flight, which one process sends.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

from kvlab.bench.client.endpoints import RequestSpec
from kvlab.bench.plan.schedule import LoadKind, LoadPoint, arrival_offsets_ns


@dataclass(frozen=True)
class Shard:
    """One worker's share of a load point.

    ``specs`` are sent in order, each stamped with the worker's index; ``offsets_ns``
    (rate) holds their send deadlines, ns after the point's start; ``users`` (concurrency)
    is how many of the point's users this worker runs, ``duration_s`` when they stop
    taking requests; ``max_concurrency`` (rate) its share of the in-flight cap.
    """

    worker: int
    kind: LoadKind
    label: str | None
    specs: tuple[RequestSpec, ...]
    offsets_ns: tuple[int, ...] = ()
    users: int = 0
    duration_s: float | None = None
    max_concurrency: int | None = None

    def max_in_flight(self) -> int:
        """The most requests this shard can have in flight (sizes the worker's pool)."""
        if self.kind == "concurrency":
            return max(1, self.users)
        return max(1, min(self.max_concurrency or len(self.specs), len(self.specs)))


def split_evenly(total: int, parts: int) -> list[int]:
    """``total`` split into ``parts`` whole shares differing by at most one, largest first."""
    return [total // parts + (1 if k < total % parts else 0) for k in range(parts)]


def shard_point(point: LoadPoint, specs: Sequence[RequestSpec], workers: int) -> list[Shard]:
    """The shards of ``point`` over ``workers`` workers (only those with work: a point of
    3 users over 4 workers has 3 shards). ``specs`` are the point's requests in run order,
    as :func:`kvlab.bench.plan.schedule.run_point` would take them. ValueError for a
    sequential point, or a ``max_concurrency`` below the number of workers."""
    if workers < 1:
        raise ValueError("a load needs at least one worker")
    if point.kind == "sequential":
        raise ValueError("a sequential point has one request in flight; it is not sharded")
    label = point.label
    if point.kind == "concurrency":
        assert point.value is not None
        users = int(point.value)
        n = point.requests if point.requests is not None else len(specs)
        active = min(users, workers)
        share: list[list[RequestSpec]] = [[] for _ in range(active)]
        for i, spec in enumerate(specs[:n]):
            k = (i % users) % active
            share[k].append(dataclasses.replace(spec, worker=k))
        return [Shard(worker=k, kind="concurrency", label=label, specs=tuple(share[k]),
                      users=u, duration_s=point.duration_s)
                for k, u in enumerate(split_evenly(users, active))]
    count = point.requests if point.requests is not None or point.duration_s else len(specs)
    offsets = arrival_offsets_ns(point, count)
    if len(offsets) > len(specs):
        raise ValueError(f"{len(offsets)} arrivals but only {len(specs)} requests")
    caps: list[int | None] = [None] * workers
    if point.max_concurrency is not None:
        if point.max_concurrency < workers:
            raise ValueError(f"max_concurrency {point.max_concurrency} cannot be split over "
                             f"{workers} workers (each needs a place)")
        caps = list(split_evenly(point.max_concurrency, workers))
    active = min(workers, len(offsets))
    shards = []
    for k in range(active):
        mine = range(k, len(offsets), workers)
        shards.append(Shard(
            worker=k, kind="rate", label=label,
            specs=tuple(dataclasses.replace(specs[i], worker=k) for i in mine),
            offsets_ns=tuple(offsets[i] for i in mine), max_concurrency=caps[k]))
    return shards
