"""Receipt handles of push consumers kept invisible by the endpoint while the
client consumes them (5.3.3's ``DefaultReceiptHandleManager``).

A receive with ``auto_renew`` (the PushConsumer's) pops with
``defaultInvisibleTimeMills`` and each message's handle is tracked under its
client and group.  Every ``renewSchedulePeriodMillis`` the handles whose
invisible time ends within ``renewAheadTimeMillis`` are renewed with
CHANGE_MESSAGE_INVISIBLETIME, for 1, 3, 5, 10, 30 minutes, then 1 hour each
time (``RenewStrategyPolicy``).  Tracking ends with:

* the client's ack, nack (ChangeInvisibleDuration) or forward to the DLQ:
  the call uses the newest handle, so an ack after a renewal sticks;
* ``renewMaxTimeMillis`` after the receive: the message goes back, visible
  again after the group's retry delay for its reconsume count;
* the client going away (NotifyClientTermination, or gone silent): its
  messages go back after ``invisibleTimeMillisWhenClear``;
* ``maxRenewRetryTimes`` failed renewals in a row, or a refused one.

5.3.3 renews on a thread pool (``renewThreadPoolNums``..``renewMaxThreadPoolNums``);
here the renewals are tasks on the broker's loop, at most
``renewMaxThreadPoolNums`` in flight.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

log = logging.getLogger("rmq.proxy")

# 5.3.3's RenewStrategyPolicy: the invisible time of the n-th renewal
RENEW_STEPS_MS = (60_000, 180_000, 300_000, 600_000, 1_800_000, 3_600_000)


def renew_step_ms(renew_times: int) -> int:
    return RENEW_STEPS_MS[min(max(renew_times, 0), len(RENEW_STEPS_MS) - 1)]


def retry_delay_ms(levels: dict[int, int], reconsume_times: int) -> int:
    """The group's retry delay after ``reconsume_times`` attempts (5.3.3's
    default ``CustomizedRetryPolicy``: the delay levels from the third on)."""
    ordered = [levels[k] for k in sorted(levels)]
    if not ordered:
        return 10_000
    return ordered[min(max(reconsume_times, 0) + 2, len(ordered) - 1)]


def next_visible_ms(handle: str) -> int:
    """Pop time + invisible time of a receipt handle (``ReceiptHandle``)."""
    fields = handle.split(" ")
    return int(fields[1]) + int(fields[2])


@dataclass(slots=True)
class TrackedHandle:
    """One received message the endpoint keeps invisible."""

    session: Any  # rmq.proxy.clients.ClientSession
    group: str
    topic: str
    message_id: str
    first: str  # the handle as received: the client acks with it
    handle: str  # the newest one
    received_ms: int
    reconsume_times: int
    renew_times: int = 0
    retry_times: int = 0
    busy: asyncio.Future | None = None  # the renewal in flight


# (client id, group) -> (message id, handle as received) -> TrackedHandle
Groups = dict[tuple[str, str], dict[tuple[str, str], TrackedHandle]]
Change = Callable[[TrackedHandle, int], Awaitable[str]]


class ReceiptHandleManager:
    """``change(tracked, invisible_ms)`` runs CHANGE_MESSAGE_INVISIBLETIME for
    a tracked handle and returns the new handle (rmq.proxy.consumer)."""

    def __init__(self, config: Any, change: Change, levels: Callable[[], dict[int, int]],
                 online: Callable[[str], bool]) -> None:
        self.cfg = config
        self.change = change
        self.levels = levels
        self.online = online
        self.groups: Groups = {}
        self._limit = asyncio.Semaphore(max(1, config.renewMaxThreadPoolNums))
        self._tasks: set[asyncio.Task] = set()

    @property
    def enabled(self) -> bool:
        return bool(self.cfg.enableProxyAutoRenew)

    def add(self, session: Any, group: str, topic: str, message_id: str, handle: str,
            reconsume_times: int) -> None:
        key = (session.client_id, group)
        self.groups.setdefault(key, {})[(message_id, handle)] = TrackedHandle(
            session, group, topic, message_id, handle, handle, int(time.time() * 1000), reconsume_times)

    def count(self, client_id: str, group: str) -> int:
        return len(self.groups.get((client_id, group), ()))

    async def take(self, client_id: str, group: str, message_id: str, handle: str) -> str:
        """Stop renewing the message (the client acks, nacks or forwards it);
        the handle to use for that: the newest one, once a renewal in flight
        is done."""
        handles = self.groups.get((client_id, group))
        tracked = None if handles is None else handles.pop((message_id, handle), None)
        if tracked is None:
            return handle
        if not handles:
            self.groups.pop((client_id, group), None)
        if tracked.busy is not None:
            await asyncio.shield(tracked.busy)
        return tracked.handle

    # ---- the scan ------------------------------------------------------------------
    async def run(self) -> None:
        """Scan every ``renewSchedulePeriodMillis`` until cancelled."""
        while True:
            await asyncio.sleep(max(self.cfg.renewSchedulePeriodMillis, 10) / 1000)
            try:
                self.scan()
            except Exception:  # noqa: BLE001 - one bad scan must not stop the renewals
                log.exception("receipt handle scan failed")

    def scan(self) -> None:
        now = int(time.time() * 1000)
        for key in list(self.groups):
            if not self.online(key[0]):
                self.clear(key[0])
                continue
            for tracked in list(self.groups.get(key, {}).values()):
                if tracked.busy is None and \
                        next_visible_ms(tracked.handle) - now <= self.cfg.renewAheadTimeMillis:
                    self._spawn(self._renew(key, tracked))

    def clear(self, client_id: str) -> None:
        """The client is gone: each of its messages goes back shortly."""
        for key in [k for k in self.groups if k[0] == client_id]:
            for tracked in self.groups.pop(key).values():
                self._spawn(self._give_back(tracked, self.cfg.invisibleTimeMillisWhenClear))

    async def close(self, timeout_s: float = 1.0) -> None:
        """Give every tracked message back (5.3.3 does so at shutdown), waiting
        at most ``timeout_s`` for the broker's answers."""
        for client_id in {k[0] for k in self.groups}:
            self.clear(client_id)
        if self._tasks:
            await asyncio.wait(list(self._tasks), timeout=timeout_s)
        for task in list(self._tasks):
            task.cancel()

    def _spawn(self, work: Awaitable[None]) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _forget(self, key: tuple[str, str], tracked: TrackedHandle) -> None:
        handles = self.groups.get(key)
        if handles is not None and handles.get((tracked.message_id, tracked.first)) is tracked:
            del handles[(tracked.message_id, tracked.first)]
            if not handles:
                del self.groups[key]

    async def _renew(self, key: tuple[str, str], tracked: TrackedHandle) -> None:
        done = asyncio.get_running_loop().create_future()
        tracked.busy = done
        try:
            async with self._limit:
                await self._renew_once(key, tracked)
        finally:
            tracked.busy = None
            done.set_result(None)

    async def _renew_once(self, key: tuple[str, str], tracked: TrackedHandle) -> None:
        now = int(time.time() * 1000)
        if now - tracked.received_ms >= self.cfg.renewMaxTimeMillis:
            self._forget(key, tracked)
            delay = retry_delay_ms(self.levels(), tracked.reconsume_times)
            log.info("message %s of %s consumed for longer than renewMaxTimeMillis: it goes "
                     "back in %d ms", tracked.message_id, tracked.group, delay)
            await self._give_back(tracked, delay)
            return
        try:
            tracked.handle = await self.change(tracked, renew_step_ms(tracked.renew_times))
        except Exception as exc:  # noqa: BLE001 - a refused renewal ends it, a failed one retries
            tracked.retry_times += 1
            if tracked.retry_times >= self.cfg.maxRenewRetryTimes or not _retryable(exc):
                self._forget(key, tracked)
                log.warning("renewal of message %s of %s given up: %s", tracked.message_id,
                            tracked.group, exc)
            return
        tracked.renew_times += 1
        tracked.retry_times = 0

    async def _give_back(self, tracked: TrackedHandle, invisible_ms: int) -> None:
        try:
            await self.change(tracked, invisible_ms)
        except Exception as exc:  # noqa: BLE001 - the message comes back anyway when its time ends
            log.info("message %s of %s not given back early: %s", tracked.message_id,
                     tracked.group, exc)


def _retryable(exc: Exception) -> bool:
    """A timeout or a broker error is tried again; a refusal (an expired or
    unknown handle, a bad request) is not (5.3.3's ``renewExceptionNeedRetry``)."""
    code = getattr(exc, "code", None)
    return code is None or int(code) >= 50000
