"""PullRequestHoldService: pulls that found nothing wait here (4.9.8
``PullRequestHoldService``, PROTOCOL.md 3.3.5 "Long polling").

A held pull is answered as soon as a message that its filter accepts is
dispatched to its topic-queue (the store's arrival notification), when its
suspend time is over, or by the periodic re-check (every 5 s, 1 s in
short-polling mode) that compares the queue's max offset with the pull's.
Answering re-runs the pull without suspension and writes the result with the
request's opaque.  Unlike Java, the suspend timeout has its own timer so an
empty pull returns at its timeout and not up to 5 s later.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

from rmq.common.logging import BROKER_LOGGER_NAME
from rmq.remoting import Channel, RemotingCommand
from rmq.remoting.rpc_latency import SUCCESS, RpcLatency

log = logging.getLogger(BROKER_LOGGER_NAME)

LONG_POLLING_CHECK_S = 5.0
SHORT_POLLING_CHECK_S = 1.0


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class PullRequest:
    """A suspended pull (``PullRequest``)."""

    __slots__ = ("request", "channel", "timeout_ms", "suspend_ts", "pull_from_offset",
                 "matches", "timer")

    def __init__(self, request: RemotingCommand, channel: Channel, timeout_ms: int,
                 suspend_ts: int, pull_from_offset: int,
                 matches: Callable[[int], bool] | None) -> None:
        self.request = request
        self.channel = channel
        self.timeout_ms = timeout_ms
        self.suspend_ts = suspend_ts
        self.pull_from_offset = pull_from_offset
        self.matches = matches
        self.timer: asyncio.TimerHandle | None = None


class PullRequestHoldService:
    """Held pulls by (topic, queueId); ``wakeup`` re-runs a pull and answers it."""

    # ``table`` slotted: each put's arrival notice (rmq._fast.arrival) reads it
    # at its slot to tell whether anybody waits; the rest in the dict
    __slots__ = ("table", "__dict__", "__weakref__")

    def __init__(self, store: Any, long_polling: Callable[[], bool],
                 wakeup: Callable[[Channel, RemotingCommand], RemotingCommand | None]) -> None:
        self.store = store
        self.long_polling = long_polling
        self.wakeup = wakeup
        self.table: dict[tuple[str, int], list[PullRequest]] = {}
        self.rpc_latency: RpcLatency | None = None  # set while the metrics exporter is on
        self._task: asyncio.Task | None = None

    # ---- life cycle ------------------------------------------------------------
    async def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="pullHold")

    async def shutdown(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
        for reqs in self.table.values():
            for pr in reqs:
                if pr.timer is not None:
                    pr.timer.cancel()
        self.table.clear()

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(LONG_POLLING_CHECK_S if self.long_polling()
                                else SHORT_POLLING_CHECK_S)
            try:
                self.check_hold_requests()
            except Exception:
                log.exception("PullRequestHoldService check failed")

    # ---- suspend / notify --------------------------------------------------------
    def suspend(self, topic: str, queue_id: int, pr: PullRequest) -> None:
        key = (topic, queue_id)
        self.table.setdefault(key, []).append(pr)
        loop = asyncio.get_running_loop()
        pr.timer = loop.call_later(pr.timeout_ms / 1000, self._expire, key, pr)

    def _expire(self, key: tuple[str, int], pr: PullRequest) -> None:
        reqs = self.table.get(key)
        if reqs is None or pr not in reqs:
            return
        reqs.remove(pr)
        if not reqs:
            del self.table[key]
        self._answer(pr)

    def check_hold_requests(self) -> None:
        for topic, queue_id in list(self.table):
            offset = self.store.get_max_offset_in_queue(topic, queue_id)
            self.notify_message_arriving(topic, queue_id, offset)

    def notify_message_arriving(self, topic: str, queue_id: int, max_offset: int,
                                tags_code: int | None = None, *_rest: Any) -> None:
        """A message reached ``topic``/``queue_id`` (or a re-check): answer every
        held pull that now has something it wants, or whose time is up."""
        key = (topic, queue_id)
        reqs = self.table.get(key)
        if not reqs:
            return
        keep: list[PullRequest] = []
        now = _now_ms()
        for pr in reqs:
            newest = max_offset
            if newest <= pr.pull_from_offset:
                newest = self.store.get_max_offset_in_queue(topic, queue_id)
            if newest > pr.pull_from_offset:
                if tags_code is None or pr.matches is None or pr.matches(tags_code):
                    self._answer(pr)
                    continue
            if now >= pr.suspend_ts + pr.timeout_ms:
                self._answer(pr)
                continue
            keep.append(pr)
        if keep:
            self.table[key] = keep
        else:
            del self.table[key]

    def on_message_arriving(self, topic: str, queue_id: int, logic_offset: int,
                            tags_code: int, *_rest: Any) -> None:
        """The controller's message arriving listener (``NotifyMessageArrivingListener``),
        called for every stored message: with no pull held (a produce-only load)
        it returns before building the key."""
        if self.table and (topic, queue_id) in self.table:
            self.notify_message_arriving(topic, queue_id, logic_offset, tags_code)

    def on_message_runs(self, runs: list[tuple]) -> None:
        """``on_message_arriving`` for a read's runs (``RunQueue.summary``):
        every put of a run that lists them, else the run's last offset."""
        for topic, queue_id, qoff, tags, _ts, _n, _s, _e, each in runs:
            if not self.table:
                return
            if (topic, queue_id) not in self.table:
                continue
            if each is None:
                self.notify_message_arriving(topic, queue_id, qoff, tags)
            else:
                for next_offset, last_tags, *_rest in each:
                    self.on_message_arriving(topic, queue_id, next_offset, last_tags)

    def _answer(self, pr: PullRequest) -> None:
        if pr.timer is not None:
            pr.timer.cancel()
            pr.timer = None
        if not pr.channel.is_active():
            return
        try:
            response = self.wakeup(pr.channel, pr.request)
        except Exception:
            log.exception("execute request when wakeup run")
            return
        if response is None or pr.request.is_oneway():
            return
        response.opaque = pr.request.opaque
        response.serialize_type = pr.request.serialize_type
        pr.channel.send_response(response)
        if self.rpc_latency is not None:  # timed from the suspension, as 5.3 marks it
            self.rpc_latency.record(pr.request.code, response.code, True, SUCCESS,
                                    max(0, _now_ms() - pr.suspend_ts))
