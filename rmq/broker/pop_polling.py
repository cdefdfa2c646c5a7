"""Long polling of POP_MESSAGE and NOTIFICATION (5.3.3's PopLongPollingService).

A pop (or notification) that finds nothing and carries a pollTime waits here
until a message reaches one of the topics it reads (the store's arrival
listener, as the pull hold service in ``rmq.broker.longpolling`` is woken),
a revive puts one into its retry topic, an ack unblocks an orderly queue, or
its time is up; it then reads again.  Waiters are futures keyed by topic.
"""

from __future__ import annotations

import asyncio
from typing import Any


class PopPolling:
    # ``waiters`` slotted: each put's arrival notice (rmq._fast.arrival) reads
    # it at its slot to tell whether anybody waits; the rest in the dict
    __slots__ = ("waiters", "__dict__", "__weakref__")

    def __init__(self, max_waiters: int) -> None:
        self.max_waiters = max_waiters
        self.waiters: dict[str, set[asyncio.Future]] = {}
        self.count = 0

    def full(self) -> bool:
        return self.count >= self.max_waiters

    def polling_num(self, topic: str) -> int:
        return len(self.waiters.get(topic, ()))

    async def wait(self, topics: list[str], timeout_s: float) -> bool:
        """Wait until one of ``topics`` gets a message or ``timeout_s`` passes;
        True when woken by a message."""
        if timeout_s <= 0:
            return False
        fut = asyncio.get_running_loop().create_future()
        for t in topics:
            self.waiters.setdefault(t, set()).add(fut)
        self.count += 1
        try:
            await asyncio.wait_for(asyncio.shield(fut), timeout_s)
            return True
        except TimeoutError:
            return False
        finally:
            self.count -= 1
            for t in topics:
                s = self.waiters.get(t)
                if s is not None:
                    s.discard(fut)
                    if not s:
                        del self.waiters[t]

    def notify(self, topic: str, *_args: Any) -> None:
        """The store's arrival listener (also called after acks and revives)."""
        s = self.waiters.get(topic)
        if not s:
            return
        for fut in list(s):
            if not fut.done():
                fut.set_result(True)

    def notify_runs(self, runs: list[tuple]) -> None:
        """``notify`` for a read's runs of messages (``RunQueue.summary``)."""
        if self.waiters:
            for run in runs:
                self.notify(run[0])
