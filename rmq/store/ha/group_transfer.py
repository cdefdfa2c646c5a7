"""GroupTransferService: SYNC_MASTER sends waiting for a slave's acknowledgement.

4.9.8 keeps a list of requests that one thread re-checks every 10 ms and on
each slave ack.  Here each waiting send holds a loop future keyed by the
commit-log offset it needs acknowledged: an ack resolves every future at or
below it in one pass (a heap ordered by offset), and one loop timer, armed
for the earliest deadline, fails the late ones.  Nothing runs while nobody
waits.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools

_seq = itertools.count()


class GroupTransferService:
    """Futures resolved True once some slave acknowledged their offset, False at their deadline."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self.acked = 0  # highest offset any slave reported (push2SlaveMaxOffset)
        self._by_offset: list[tuple[int, int, asyncio.Future]] = []
        self._by_deadline: list[tuple[float, int, asyncio.Future]] = []
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = 0.0

    def __len__(self) -> int:
        """Requests still waiting (resolved ones are dropped lazily from the heaps)."""
        return sum(1 for _, _, f in self._by_offset if not f.done())

    def wait(self, offset: int, timeout_ms: int) -> asyncio.Future:
        """A future for ``offset``: True when acknowledged, False after ``timeout_ms``."""
        fut = self._loop.create_future()
        if offset <= self.acked:
            fut.set_result(True)
            return fut
        n = next(_seq)
        heapq.heappush(self._by_offset, (offset, n, fut))
        deadline = self._loop.time() + timeout_ms / 1000
        heapq.heappush(self._by_deadline, (deadline, n, fut))
        if self._timer is None or deadline < self._timer_at:
            self._arm(deadline)
        return fut

    def notify_transfer_some(self, offset: int) -> None:
        """A slave acknowledged everything below ``offset``."""
        if offset <= self.acked:
            return
        self.acked = offset
        heap = self._by_offset
        while heap and heap[0][0] <= offset:
            fut = heapq.heappop(heap)[2]
            if not fut.done():
                fut.set_result(True)

    def _arm(self, deadline: float) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer_at = deadline
        self._timer = self._loop.call_at(deadline, self._expire)

    def _expire(self) -> None:
        self._timer = None
        now = self._loop.time()
        heap = self._by_deadline
        while heap and heap[0][0] <= now:
            fut = heapq.heappop(heap)[2]
            if not fut.done():
                fut.set_result(False)
        while heap and heap[0][2].done():  # already acknowledged
            heapq.heappop(heap)
        if heap:
            self._arm(heap[0][0])
        # futures that timed out no longer need their place in the offset heap
        if not heap and self._by_offset:
            self._by_offset = [e for e in self._by_offset if not e[2].done()]
            heapq.heapify(self._by_offset)

    def shutdown(self) -> None:
        """Fail every waiting request (the service is stopping)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        for _, _, fut in self._by_offset:
            if not fut.done():
                fut.set_result(False)
        self._by_offset.clear()
        self._by_deadline.clear()
