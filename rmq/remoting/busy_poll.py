"""Busy polling: the event loop keeps polling its sockets for a while after
each read instead of going to sleep in ``epoll_wait``.

A request that arrives while the loop sleeps must wake it: on a virtual
machine whose CPUs go idle between requests that wake-up (an inter-processor
interrupt and an exit from the idle state) costs tens of microseconds, on
both sides of every round trip.  A loop that is still polling when the
request lands picks it up at once, and the peer's write finds nobody to wake.
The price is the CPU the loop spins on: up to ``window_us`` after every read.
Off unless asked for (``rmqBusyPollMicros`` of the broker)."""

from __future__ import annotations

import asyncio
from time import perf_counter


class BusyPoll:
    """Keeps ``loop`` polling without sleeping for ``window_us`` after the
    last ``touch`` (one ready callback per turn of the loop makes uvloop and
    asyncio poll with a zero timeout)."""

    __slots__ = ("_loop", "_window", "_last", "_spinning")

    def __init__(self, loop: asyncio.AbstractEventLoop, window_us: int) -> None:
        self._loop = loop
        self._window = window_us / 1e6
        self._last = 0.0
        self._spinning = False

    def touch(self, frames: int = 1) -> None:
        """A read happened (of ``frames``, whatever their number): keep
        polling for the window from now."""
        self._last = perf_counter()
        if not self._spinning:
            self._spinning = True
            self._loop.call_soon(self._spin)

    def _spin(self) -> None:
        if perf_counter() - self._last < self._window:
            self._loop.call_soon(self._spin)
        else:
            self._spinning = False
