"""Records of several workers merged in completion order, released only when safe."""

from __future__ import annotations

import random

from hypothesis import given
from hypothesis import strategies as st

from kvlab.bench.workers.merge import Merger
from kvlab.rundir import ApiKind, Outcome, Record


def rec(worker: int, t_end: int, position: int = 0) -> Record:
    return Record(run_id="r", mode="m", capacity=1, query_id="q", position=position,
                  worker=worker, api=ApiKind.OPENAI_CHAT, path="/", stream=True,
                  prompt_sha256="", requested_tokens=1, t_sent=0, t_end=t_end,
                  outcome=Outcome.OK)


def test_a_record_waits_until_every_running_worker_is_past_it() -> None:
    merger = Merger([0, 1])
    assert merger.add(0, [rec(0, 10), rec(0, 30)], watermark_ns=40, done=False) == []
    assert merger.held == 2  # worker 1 has not said anything yet
    out = merger.add(1, [rec(1, 20)], watermark_ns=25, done=False)
    assert [r.t_end for r in out] == [10, 20]
    out = merger.add(1, [], watermark_ns=35, done=True)  # done: no longer holds anyone back
    assert [r.t_end for r in out] == [30]
    assert merger.flush() == []


def test_flush_gives_the_rest_in_order() -> None:
    merger = Merger([0, 1])
    merger.add(0, [rec(0, 9), rec(0, 3)], 1, False)
    merger.add(1, [rec(1, 5)], 2, False)
    assert [r.t_end for r in merger.flush()] == [3, 5, 9]


@given(st.integers(min_value=1, max_value=4), st.integers(min_value=0, max_value=2**31))
def test_any_interleaving_of_honest_batches_comes_out_in_completion_order(workers,
                                                                          seed) -> None:
    """Each worker's records end at increasing times and each batch's watermark is no
    later than its next record: whatever order the batches arrive in, the output is the
    sorted whole."""
    rng = random.Random(seed)
    batches = []
    for w in range(workers):
        ends = sorted(rng.sample(range(1000), 12))
        cuts = sorted(rng.sample(range(1, 12), 3))
        parts = [ends[a:b] for a, b in zip([0, *cuts], [*cuts, 12], strict=True)]
        for k, part in enumerate(parts):
            nxt = parts[k + 1][0] if k + 1 < len(parts) else None
            watermark = nxt if nxt is not None else 1000
            batches.append((w, k, [rec(w, t, t) for t in part], watermark,
                            k == len(parts) - 1))
    # batches of one worker stay in order; workers interleave at random
    queues = {w: [b for b in batches if b[0] == w] for w in range(workers)}
    merger, out = Merger(list(range(workers))), []
    while any(queues.values()):
        w = rng.choice([w for w, q in queues.items() if q])
        _, _, records, watermark, done = queues[w].pop(0)
        out += merger.add(w, records, watermark, done)
    out += merger.flush()
    assert [r.t_end for r in out] == sorted(r.t_end for r in out)
    assert len(out) == 12 * workers
