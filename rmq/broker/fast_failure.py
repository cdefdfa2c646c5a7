"""Request queues and BrokerFastFailure (RocketMQ ``BrokerFixedThreadPoolExecutor`` queues
and ``BrokerFastFailure``).

Java runs each group of request codes on a thread pool with a bounded queue;
a request that waits in a queue too long, or any queued send while the page
cache is busy, is taken off the queue and answered SYSTEM_BUSY by a task
that runs every 10 ms -- the request itself never runs, so a client retry
cannot store it twice.

rmq keeps the same shape on the event loop.  A ``RequestQueue`` has
``workers`` slots (the 4.9.8 ``*ThreadPoolNums``); a worker is busy while it
runs the synchronous part of a processor (and, with the rmq test setting
``rmqTestPutDelayMillis``, while a send holds the simulated commit-log lock,
see ``put_delay``).  A request that finds a free worker and nobody waiting
runs at once, inside the read callback, exactly as before; otherwise it
waits in the queue, oldest first, until a worker takes it.  Fast failure
only ever answers waiting requests.

Queue sizes and the wait of the head request are what the water mark prints
every second and what GET_BROKER_RUNTIME_INFO reports.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import Any

from rmq.common.codes import ResponseCode
from rmq.common.logging import BROKER_LOGGER_NAME
from rmq.common.periodic import PeriodicService
from rmq.remoting import Channel, RemotingCommand

log = logging.getLogger(BROKER_LOGGER_NAME)

PCBUSY_REMARK = ("[PCBUSY_CLEAN_QUEUE]broker busy, start flow control for a while, "
                 "period in queue: {}ms, size of queue: {}")
TIMEOUT_REMARK = ("[TIMEOUT_CLEAN_QUEUE]broker busy, start flow control for a while, "
                  "period in queue: {}ms, size of queue: {}")
CHECK_INTERVAL_S = 0.010

Run = Callable[[Channel, RemotingCommand], Any]


def _now_ms() -> float:
    return time.monotonic() * 1000.0


class _Waiting:
    """A request in the queue; ``future`` carries its response to the remoting layer
    (None: already answered by fast failure, or no response)."""

    __slots__ = ("channel", "request", "run", "future", "arrived_ms")

    def __init__(self, channel: Channel, request: RemotingCommand, run: Run,
                 future: asyncio.Future) -> None:
        self.channel = channel
        self.request = request
        self.run = run
        self.future = future
        self.arrived_ms = _now_ms()


class RequestQueue:
    """One processor pool: ``workers`` slots and the requests waiting for one.

    ``capacity`` is the admission limit the remoting server enforces for the
    pool.  ``before_run`` (optional) is awaited by a worker before it runs a
    request while ``before_run_active()`` is true; the broker uses it for the
    simulated slow store put.
    """

    # plain slots: the compiled pop lane reads ``runs_at_once``'s at their offsets
    __slots__ = ("name", "capacity", "workers", "busy", "before_run", "before_run_active",
                 "_waiting", "_tasks", "on_queued")

    def __init__(self, name: str, capacity: int | None, workers: int = 1,
                 before_run: Callable[[], Awaitable[None]] | None = None,
                 before_run_active: Callable[[], bool] | None = None) -> None:
        self.name = name
        self.capacity = capacity
        self.workers = max(1, workers)
        self.busy = 0
        self.before_run = before_run
        self.before_run_active = before_run_active
        self._waiting: OrderedDict[int, _Waiting] = OrderedDict()
        self._tasks: set[asyncio.Task] = set()
        # told each time a request is queued (BrokerFastFailure: its checks
        # sleep while every queue is empty)
        self.on_queued: Callable[[], None] | None = None

    def __len__(self) -> int:
        return len(self._waiting)

    def head_wait_ms(self) -> int:
        """How long the oldest waiting request has waited (0 when none waits)."""
        for w in self._waiting.values():
            return int(_now_ms() - w.arrived_ms)
        return 0

    def _delayed(self) -> bool:
        active = self.before_run_active
        return active is not None and active()

    # ---- submission and workers ------------------------------------------------
    def runs_at_once(self) -> bool:
        """Whether a request submitted now runs at once (a free worker, nobody
        waiting, no simulated delay): a lane serving requests of this pool
        straight from the receive buffer takes one only then."""
        if self._waiting or self.busy >= self.workers:
            return False
        active = self.before_run_active  # _delayed, inline: asked by a lane every read
        return active is None or not active()

    def submit(self, run: Run, channel: Channel, request: RemotingCommand) -> Any:
        """Run ``request`` now when a worker is free and nobody waits; else queue it
        and return an awaitable of its response."""
        if self.runs_at_once():
            return run(channel, request)
        loop = asyncio.get_running_loop()
        w = _Waiting(channel, request, run, loop.create_future())
        self._waiting[id(w)] = w
        if self.on_queued is not None:
            self.on_queued()
        if self.busy < self.workers:
            self.busy += 1
            self._spawn(self._work())
        return w.future

    def _spawn(self, coro: Awaitable[None]) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _take(self) -> _Waiting | None:
        while self._waiting:
            _, w = self._waiting.popitem(last=False)
            if not w.future.done():  # done: cancelled by a server stop
                return w
        return None

    async def _work(self) -> None:
        """One worker: take the oldest waiting request, run it, repeat."""
        try:
            while True:
                w = self._take()
                if w is None:
                    return
                if self._delayed() and self.before_run is not None:
                    await self.before_run()
                self._run(w)
                await asyncio.sleep(0)  # let reads and fast failure in between
        finally:
            self.busy -= 1

    def _run(self, w: _Waiting) -> None:
        if w.future.done():
            return
        try:
            result = w.run(w.channel, w.request)
        except Exception as exc:  # the remoting layer answers SYSTEM_ERROR
            w.future.set_exception(exc)
            return
        if inspect.isawaitable(result):
            self._spawn(self._finish(w.future, result))
        else:
            w.future.set_result(result)

    @staticmethod
    async def _finish(future: asyncio.Future, awaitable: Awaitable[Any]) -> None:
        try:
            result = await awaitable
        except Exception as exc:
            if not future.done():
                future.set_exception(exc)
            return
        if not future.done():
            future.set_result(result)

    # ---- fast failure ---------------------------------------------------------------
    def answer_busy(self, w: _Waiting, template: str) -> None:
        """Take ``w`` off the queue and answer it SYSTEM_BUSY; it never runs."""
        self._waiting.pop(id(w), None)
        if w.future.done():
            return
        w.future.set_result(None)
        if w.request.is_oneway() or not w.channel.is_active():
            return
        waited = int(_now_ms() - w.arrived_ms)
        response = RemotingCommand.create_response(ResponseCode.SYSTEM_BUSY,
                                                   template.format(waited, len(self)))
        response.opaque = w.request.opaque
        response.serialize_type = w.request.serialize_type
        w.channel.send_response(response)

    def clean_all(self, template: str) -> None:
        for w in list(self._waiting.values()):
            self.answer_busy(w, template)

    def clean_expired(self, max_wait_ms: float, template: str) -> None:
        now = _now_ms()
        while self._waiting:
            w = next(iter(self._waiting.values()))
            if now - w.arrived_ms < max_wait_ms:
                return
            self.answer_busy(w, template)


class QueuedProcessor:
    """A processor whose requests go through a RequestQueue."""

    def __init__(self, inner: Any, queue: RequestQueue) -> None:
        self.inner = inner
        self.queue = queue
        reject = getattr(inner, "reject_request", None)
        if reject is not None:
            self.reject_request = reject

    def process_request(self, channel: Channel, request: RemotingCommand) -> Any:
        return self.queue.submit(self.inner.process_request, channel, request)


class BrokerFastFailure(PeriodicService):
    """Every 10 ms: page cache busy -> clear the send queue; then expire the
    heads of the send, pull, heartbeat and transaction queues.

    Only a waiting request is ever answered, so while every queue is empty
    the checks sleep until a request is queued (``RequestQueue.on_queued``)
    and then go on every 10 ms as 4.9.8's do.  Ticking through empty queues
    woke the loop a hundred times a second for nothing: about 2 % of a core
    on an idle broker, and on a loaded one whose requests the lanes serve
    (they never queue) a loop wake-up every 10 ms beside the sends."""

    interval_s = CHECK_INTERVAL_S
    failure_message = "BrokerFastFailure clean expired request failed"

    def __init__(self, queues: dict[str, RequestQueue],
                 wait_limits_ms: dict[str, Callable[[], float]],
                 page_cache_busy: Callable[[], bool], enabled: Callable[[], bool]) -> None:
        super().__init__(logger=log)
        self.queues = queues
        self.wait_limits_ms = wait_limits_ms
        self.page_cache_busy = page_cache_busy
        self.enabled = enabled
        self._queued = asyncio.Event()
        for queue in queues.values():
            queue.on_queued = self._queued.set

    def idle(self) -> bool:
        """No request waits in any queue: nothing for a check to answer."""
        return not any(len(q) for q in self.queues.values())

    def idle_wait(self) -> Awaitable[None] | None:
        """While ``idle``, the wait for a request to be queued (an earlier
        request's signal is stale by then); the checks go on one period
        after it."""
        if not self.idle():
            return None
        self._queued.clear()
        return self._queued.wait()

    def run_once(self) -> None:
        if self.enabled():
            self.clean_expired_request()

    def clean_expired_request(self) -> None:
        send = self.queues.get("send")
        if send is not None and len(send) and self.page_cache_busy():
            send.clean_all(PCBUSY_REMARK)
        for name, limit in self.wait_limits_ms.items():
            queue = self.queues.get(name)
            if queue is not None and len(queue):
                queue.clean_expired(limit(), TIMEOUT_REMARK)
