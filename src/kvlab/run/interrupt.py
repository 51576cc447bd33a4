"""Ctrl-C ends a run, always.

``asyncio.run`` turns a SIGINT into a cancellation of the main task, and raises
KeyboardInterrupt only if that cancellation comes back out of the task. A cancellation
that some await swallows on its way (Python 3.11's ``wait_for`` can, when its inner
future completes at the same moment) leaves the run going, and it then ends with exit
status 0 as if nobody had asked it to stop. :func:`run_interruptibly` takes SIGINT
itself: it cancels the main task, cancels it again every ``RECANCEL_S`` seconds until
the task is done, and raises KeyboardInterrupt whenever a SIGINT arrived, however the
task ended.
"""

from __future__ import annotations

import asyncio
import signal
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")
RECANCEL_S = 0.5  # a cancellation lost on the way is sent again after this long


def run_interruptibly(main: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run(main)``, where a SIGINT received while it runs always ends in
    KeyboardInterrupt (off the main thread, where signals cannot be taken, it is
    ``asyncio.run``)."""
    if threading.current_thread() is not threading.main_thread():
        return asyncio.run(main)
    return asyncio.run(_until_interrupted(main))


async def _until_interrupted(main: Coroutine[Any, Any, T]) -> T:
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    assert task is not None
    received: list[bool] = []

    def cancel_until_done() -> None:
        if not task.done():
            task.cancel()
            loop.call_later(RECANCEL_S, cancel_until_done)

    def on_sigint() -> None:
        received.append(True)
        cancel_until_done()

    loop.add_signal_handler(signal.SIGINT, on_sigint)
    try:
        result = await main
    except asyncio.CancelledError:
        if received:
            raise KeyboardInterrupt from None
        raise
    finally:
        loop.remove_signal_handler(signal.SIGINT)
    if received:  # the cancellation was swallowed and the run went on to its end
        raise KeyboardInterrupt
    return result
