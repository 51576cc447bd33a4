"""Sharding a load point (each strategy's shard): the workers together send exactly the
one-process schedule."""

from __future__ import annotations

import pytest

from kvlab.bench.client.endpoints import RequestSpec
from kvlab.bench.plan.loads.base import split_evenly
from kvlab.bench.plan.loads.concurrency import ConcurrencyPoint
from kvlab.bench.plan.loads.rate import RatePoint
from kvlab.bench.plan.loads.sequential import SequentialPoint
from kvlab.bench.plan.schedule import ClosedLoopShare, OpenLoopShare


def specs(n: int) -> list[RequestSpec]:
    return [RequestSpec(prompt=f"p{i}", max_tokens=4, query_id=f"q{i % 3}", position=100 + i)
            for i in range(n)]


@pytest.mark.parametrize("workers", [1, 2, 3, 5])
@pytest.mark.parametrize("arrival", ["poisson", "constant"])
def test_rate_shards_together_are_the_planned_arrivals(workers, arrival) -> None:
    point = RatePoint(rate=25.0, requests=17, arrival=arrival)
    shards = point.shard(specs(20), workers)
    planned = list(zip(range(100, 117), point.arrivals_ns(17), strict=True))
    sent = sorted((s.position, t) for sh in shards for s, t in
                  zip(sh.specs, sh.share.offsets_ns, strict=True))
    assert sent == planned  # every arrival once, at its deadline, no spare spec sent
    for shard in shards:
        assert all(s.worker == shard.worker for s in shard.specs)
        assert isinstance(shard.share, OpenLoopShare)
        assert list(shard.share.offsets_ns) == sorted(shard.share.offsets_ns)
        assert shard.label == "rate=25.0"
    assert [len(sh.specs) for sh in shards] == split_evenly(17, workers)


def test_rate_by_duration_shards_the_arrivals_before_its_end() -> None:
    point = RatePoint(rate=40.0, duration_s=1.0, arrival="constant")
    shards = point.shard(specs(100), 3)
    assert sum(len(s.specs) for s in shards) == 40
    assert max(t for s in shards for t in s.share.offsets_ns) < 1_000_000_000


def test_a_rate_cap_is_split_and_must_give_each_worker_a_place() -> None:
    point = RatePoint(rate=10.0, requests=9, max_concurrency=5)
    assert [s.share.max_concurrency for s in point.shard(specs(9), 2)] == [3, 2]
    with pytest.raises(ValueError, match="cannot be split over 6 workers"):
        point.shard(specs(9), 6)


@pytest.mark.parametrize(("users", "workers", "expected"),
                         [(4, 2, [2, 2]), (5, 2, [3, 2]), (2, 4, [1, 1]), (1, 3, [1])])
def test_concurrency_splits_the_users_and_each_user_keeps_its_requests(users, workers,
                                                                       expected) -> None:
    point = ConcurrencyPoint(users=users, requests=13)
    shards = point.shard(specs(20), workers)
    assert all(isinstance(s.share, ClosedLoopShare) for s in shards)
    assert [s.share.users for s in shards] == expected  # never a worker without a user
    assert sorted(s.position for sh in shards for s in sh.specs) == list(range(100, 113))
    for shard in shards:
        # request i is user (i mod users)'s; a worker holds whole users
        mine = {(s.position - 100) % users for s in shard.specs}
        assert mine <= {u for u in range(users) if u % len(shards) == shard.worker}
        assert [s.position for s in shard.specs] == sorted(s.position for s in shard.specs)
        assert shard.max_in_flight() == shard.share.users


def test_a_sequential_point_is_not_sharded() -> None:
    with pytest.raises(ValueError, match="sequential"):
        SequentialPoint().shard(specs(3), 2)
