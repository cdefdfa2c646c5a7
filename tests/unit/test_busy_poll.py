"""BusyPoll keeps the loop turning (polling with no timeout) for its window
after the last read, then lets it sleep again."""

from __future__ import annotations

import asyncio
import time

import pytest

from rmq.remoting.busy_poll import BusyPoll

pytestmark = pytest.mark.timeout(30)


async def test_the_loop_spins_for_the_window_then_sleeps():
    loop = asyncio.get_running_loop()
    turns = 0
    original = loop.call_soon

    poll = BusyPoll(loop, 20_000)  # 20 ms

    def counting(cb, *args, **kw):
        nonlocal turns
        if getattr(cb, "__self__", None) is poll:
            turns += 1
        return original(cb, *args, **kw)

    loop.call_soon = counting  # type: ignore[method-assign]
    try:
        poll.touch()
        poll.touch()  # a second read within the window starts no second spinner
        await asyncio.sleep(0.005)
        assert poll._spinning and turns > 5
        await asyncio.sleep(0.05)
        assert not poll._spinning
        settled = turns
        await asyncio.sleep(0.02)
        assert turns == settled  # asleep: nothing turns the loop
        t0 = time.perf_counter()
        poll.touch()
        await asyncio.sleep(0.005)
        assert poll._spinning and turns > settled and time.perf_counter() - t0 < 1
    finally:
        loop.call_soon = original  # type: ignore[method-assign]
