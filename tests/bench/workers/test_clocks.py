"""Clock offsets by ping-pong: the estimate is within its bound whatever the delays."""

from __future__ import annotations

import asyncio
import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kvlab.bench.workers.clocks import estimate_offset, measure_offset

delays = st.integers(min_value=0, max_value=50_000_000)  # ns, each way


@given(offset=st.integers(min_value=-10**15, max_value=10**15),
       trips=st.lists(st.tuples(st.integers(0, 10**12), delays, delays), min_size=1,
                      max_size=20))
def test_the_true_offset_is_within_the_bound_whatever_the_delays(offset, trips) -> None:
    """A worker whose clock reads ``offset`` ahead, reached after ``out`` ns and heard
    back ``back`` ns later (any asymmetry): the estimate is off by at most its bound."""
    exchanges = [(sent, sent + out + offset, sent + out + back) for sent, out, back in trips]
    found = estimate_offset(exchanges)
    assert abs(found.offset_ns - offset) <= found.error_ns
    assert found.rtt_ns == min(out + back for _, out, back in trips)
    assert found.error_ns * 2 >= found.rtt_ns and found.exchanges == len(trips)


def test_the_shortest_round_trip_is_kept() -> None:
    # the slow exchange (1 ms out, 9 ms back) would put the offset 4 ms off
    found = estimate_offset([(0, 1_000_000 + 500, 10_000_000), (20_000_000, 20_050_500,
                                                                  20_100_000)])
    assert (found.offset_ns, found.error_ns, found.rtt_ns) == (500, 50_000, 100_000)


@pytest.mark.parametrize("exchanges", [[], [(10, 5, 9)]])
def test_no_exchange_or_one_back_before_it_left_is_refused(exchanges) -> None:
    with pytest.raises(ValueError):
        estimate_offset(exchanges)


def test_one_clock_measured_against_itself_has_no_offset_beyond_the_bound() -> None:
    async def ping() -> int:
        await asyncio.sleep(0)
        return time.perf_counter_ns()

    found = asyncio.run(measure_offset(ping, exchanges=8))
    assert found.exchanges == 8 and abs(found.offset_ns) <= found.error_ns
