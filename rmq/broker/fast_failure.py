"""Request queues and BrokerFastFailure (RocketMQ ``BrokerFixedThreadPoolExecutor`` queues
and ``BrokerFastFailure``).

Java runs send, pull, heartbeat and end-transaction requests on thread pools
with bounded queues; a request that waits in a queue too long, or any queued
send while the page cache is busy, is answered SYSTEM_BUSY by a task that
runs every 10 ms.  rmq runs processors as coroutines on the loop, so a
``RequestQueue`` is the set of requests of one pool that arrived and are not
answered yet, in arrival order.  ``QueuedProcessor`` wraps a processor to keep
that set; ``BrokerFastFailure`` answers the expired ones early with the
4.9.8 remarks and drops the late response.  (The coroutine itself still
completes: a send answered SYSTEM_BUSY may be stored anyway, which the
client's retry turns into an at-least-once duplicate.)

Queue sizes and the wait of the head request are what the water mark prints
every second and what GET_BROKER_RUNTIME_INFO reports.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from rmq.common.codes import ResponseCode
from rmq.common.logging import BROKER_LOGGER_NAME
from rmq.remoting import Channel, RemotingCommand

log = logging.getLogger(BROKER_LOGGER_NAME)

PCBUSY_REMARK = ("[PCBUSY_CLEAN_QUEUE]broker busy, start flow control for a while, "
                 "period in queue: {}ms, size of queue: {}")
TIMEOUT_REMARK = ("[TIMEOUT_CLEAN_QUEUE]broker busy, start flow control for a while, "
                  "period in queue: {}ms, size of queue: {}")
CHECK_INTERVAL_S = 0.010


def _now_ms() -> float:
    return time.monotonic() * 1000.0


class _Pending:
    __slots__ = ("channel", "request", "arrived_ms", "answered")

    def __init__(self, channel: Channel, request: RemotingCommand) -> None:
        self.channel = channel
        self.request = request
        self.arrived_ms = _now_ms()
        self.answered = False


class RequestQueue:
    """Unanswered requests of one pool, oldest first (``capacity`` is the admission limit)."""

    def __init__(self, name: str, capacity: int) -> None:
        self.name = name
        self.capacity = capacity
        self._pending: OrderedDict[int, _Pending] = OrderedDict()

    def __len__(self) -> int:
        return len(self._pending)

    def add(self, p: _Pending) -> None:
        self._pending[id(p)] = p

    def remove(self, p: _Pending) -> None:
        self._pending.pop(id(p), None)

    def head_wait_ms(self) -> int:
        """How long the oldest unanswered request has waited (0 when empty)."""
        for p in self._pending.values():
            return int(_now_ms() - p.arrived_ms)
        return 0

    def answer_busy(self, p: _Pending, template: str) -> None:
        """Answer ``p`` SYSTEM_BUSY now; its processor's late response is dropped."""
        self.remove(p)
        p.answered = True
        if p.request.is_oneway() or not p.channel.is_active():
            return
        waited = int(_now_ms() - p.arrived_ms)
        response = RemotingCommand.create_response(ResponseCode.SYSTEM_BUSY,
                                                   template.format(waited, len(self)))
        response.opaque = p.request.opaque
        response.serialize_type = p.request.serialize_type
        try:
            p.channel.send_response(response)
        except Exception as exc:  # a closed connection: nothing more to do
            log.debug("fast failure answer to %s lost: %s", p.channel.remote_addr, exc)

    def clean_all(self, template: str) -> None:
        for p in list(self._pending.values()):
            self.answer_busy(p, template)

    def clean_expired(self, max_wait_ms: float, template: str) -> None:
        now = _now_ms()
        while self._pending:
            p = next(iter(self._pending.values()))
            if now - p.arrived_ms < max_wait_ms:
                return
            self.answer_busy(p, template)


class QueuedProcessor:
    """A processor whose unanswered requests are tracked in a RequestQueue."""

    def __init__(self, inner: Any, queue: RequestQueue) -> None:
        self.inner = inner
        self.queue = queue
        reject = getattr(inner, "reject_request", None)
        if reject is not None:
            self.reject_request = reject

    def process_request(self, channel: Channel, request: RemotingCommand) -> Any:
        result = self.inner.process_request(channel, request)
        if not inspect.isawaitable(result):
            return result
        return self._track(channel, request, result)

    async def _track(self, channel: Channel, request: RemotingCommand, awaitable: Any) -> Any:
        p = _Pending(channel, request)
        self.queue.add(p)
        try:
            response = await awaitable
        finally:
            self.queue.remove(p)
        return None if p.answered else response


class BrokerFastFailure:
    """Every 10 ms: page cache busy -> clear the send queue; then expire the
    heads of the send, pull, heartbeat and transaction queues."""

    def __init__(self, queues: dict[str, RequestQueue],
                 wait_limits_ms: dict[str, Callable[[], float]],
                 page_cache_busy: Callable[[], bool], enabled: Callable[[], bool]) -> None:
        self.queues = queues
        self.wait_limits_ms = wait_limits_ms
        self.page_cache_busy = page_cache_busy
        self.enabled = enabled
        self._task: asyncio.Task | None = None

    async def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def shutdown(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
            self._task = None

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(CHECK_INTERVAL_S)
            if not self.enabled():
                continue
            try:
                self.clean_expired_request()
            except Exception:
                log.exception("BrokerFastFailure clean expired request failed")

    def clean_expired_request(self) -> None:
        send = self.queues.get("send")
        if send is not None and len(send) and self.page_cache_busy():
            send.clean_all(PCBUSY_REMARK)
        for name, limit in self.wait_limits_ms.items():
            queue = self.queues.get(name)
            if queue is not None and len(queue):
                queue.clean_expired(limit(), TIMEOUT_REMARK)
