"""Per mode: can the rows be shown free of prefix reuse, and by what."""

from __future__ import annotations

from kvlab.analysis.prefix_reuse import (
    ALLOWED,
    NOT_VERIFIABLE,
    REFUSED_BY_METRICS,
    VERIFIED,
    VERIFIED_BY_METRICS,
    prefix_reuse,
)
from kvlab.analysis.server_counters import Check, PointCounters
from kvlab.rundir import Outcome
from tests.rows import row

OFF = {"cache_prompt": False}


def _point(mode: str, hits: float | None, positions: tuple[int, int]) -> PointCounters:
    unchecked = Check(None, None, "not checkable", "")
    return PointCounters(mode, 512, None, "vllm", 2, {"prefix_cache_hits": hits}, unchecked,
                         unchecked, False, 1.0, positions)


def test_statuses_per_mode() -> None:
    rows = [
        row(mode="llama", body=OFF, cached_tokens=0, position=0),
        row(mode="llama", body=OFF, cached_tokens=120, position=1),
        row(mode="vllm", body=OFF, cached_tokens=None, position=2),
        row(mode="vllm", body=OFF, cached_tokens=None, position=3),
        row(mode="reuse", body={"cache_prompt": True}, cached_tokens=200, position=4),
        row(mode="vllm", body=OFF, warmup=True, position=5),  # warm-ups do not count
        row(mode="vllm", body=OFF, outcome=Outcome.TIMEOUT, position=6),  # nor failures
    ]
    found = {p.mode: p for p in prefix_reuse(rows)}
    assert [p.mode for p in prefix_reuse(rows)] == ["llama", "vllm", "reuse"]
    assert (found["llama"].status, found["llama"].reused) == (VERIFIED, 1)
    assert (found["vllm"].rows, found["vllm"].counted) == (2, 0)
    assert found["vllm"].status == NOT_VERIFIABLE
    assert found["vllm"].describe().startswith("vllm: prefix reuse not verifiable on 2 of 2")
    assert found["reuse"].status == ALLOWED


def test_a_prefix_cache_counter_can_vouch_for_rows_without_counts() -> None:
    rows = [row(mode="vllm", body=OFF, position=p) for p in (3, 4, 9)]
    both = [_point("vllm", 0.0, (3, 5)), _point("vllm", 0.0, (9, 10))]
    (status,) = prefix_reuse(rows, both)
    assert (status.covered, status.metrics_hits, status.status) == (3, 0.0,
                                                                    VERIFIED_BY_METRICS)
    (partly,) = prefix_reuse(rows, both[:1])  # row 9 lies in no point with a counter
    assert (partly.covered, partly.status) == (2, NOT_VERIFIABLE)
    (hit,) = prefix_reuse(rows, [_point("vllm", 896.0, (3, 10))])
    assert hit.status == REFUSED_BY_METRICS
    assert "counted 896 prefix-cache hit tokens" in hit.describe()
    assert "refused as prefix_reuse" in hit.describe()
    (no_counter,) = prefix_reuse(rows, [_point("vllm", None, (3, 10))])
    assert (no_counter.covered, no_counter.metrics_hits) == (0, None)
