"""Ctrl-C ends a run even where a cancellation is lost on the way."""

from __future__ import annotations

import asyncio
import signal

import pytest

from kvlab.run.interrupt import run_interruptibly


async def _ticks(total: int, swallow: int, done: list[int]) -> str:
    """``total`` short sleeps after raising SIGINT in this process; the first
    ``swallow`` cancellations are caught and dropped, as a buggy await would."""
    signal.raise_signal(signal.SIGINT)
    for _ in range(total):
        try:
            await asyncio.sleep(0.02)
        except asyncio.CancelledError:
            if swallow == 0:
                raise
            swallow -= 1
        done.append(1)
    return "ran to its end"


def test_a_sigint_is_a_keyboard_interrupt() -> None:
    done: list[int] = []
    with pytest.raises(KeyboardInterrupt):
        run_interruptibly(_ticks(500, 0, done))
    assert len(done) < 500


def test_a_lost_cancellation_is_sent_again_until_the_run_stops() -> None:
    done: list[int] = []
    with pytest.raises(KeyboardInterrupt):
        run_interruptibly(_ticks(500, 1, done))
    assert len(done) < 500  # the second cancellation, half a second later, ended it


def test_a_run_that_drops_every_cancellation_still_ends_interrupted() -> None:
    done: list[int] = []
    with pytest.raises(KeyboardInterrupt):
        run_interruptibly(_ticks(40, 10**6, done))
    assert len(done) == 40


def test_without_a_sigint_it_is_asyncio_run() -> None:
    async def answer() -> int:
        await asyncio.sleep(0)
        return 42

    assert run_interruptibly(answer()) == 42
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
