"""RebalanceLockManager: which client of a consumer group holds each queue
(orderly consumption, PROTOCOL.md 3.3.10).

A lock lives ``rebalanceLockMaxLiveTime`` ms after its last renewal (60 s in
4.9.8, the Java system property ``rocketmq.broker.rebalance.lockMaxLiveTime``;
here the environment variable ``RMQ_REBALANCE_LOCK_MAX_LIVE_TIME`` overrides
it).  The owner renews by locking again; another client gets the queue only
after expiry or unlock.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable

from rmq.client.message import MessageQueue

DEFAULT_LOCK_MAX_LIVE_TIME_MS = 60_000


def lock_max_live_time_ms() -> int:
    text = os.environ.get("RMQ_REBALANCE_LOCK_MAX_LIVE_TIME")
    try:
        return int(text) if text else DEFAULT_LOCK_MAX_LIVE_TIME_MS
    except ValueError:
        return DEFAULT_LOCK_MAX_LIVE_TIME_MS


def _now_ms() -> int:
    return time.monotonic_ns() // 1_000_000


class LockEntry:
    __slots__ = ("client_id", "last_update")

    def __init__(self, client_id: str, now: int) -> None:
        self.client_id = client_id
        self.last_update = now


class RebalanceLockManager:
    def __init__(self, max_live_ms: int | None = None,
                 clock: Callable[[], int] = _now_ms) -> None:
        self.max_live_ms = lock_max_live_time_ms() if max_live_ms is None else max_live_ms
        self.clock = clock
        self.table: dict[str, dict[MessageQueue, LockEntry]] = {}

    def _expired(self, entry: LockEntry, now: int) -> bool:
        return now - entry.last_update > self.max_live_ms

    def try_lock(self, group: str, mq: MessageQueue, client_id: str, now: int) -> bool:
        """Lock (or renew) one queue for ``client_id``; False if another holds it."""
        locks = self.table.setdefault(group, {})
        entry = locks.get(mq)
        if entry is None or self._expired(entry, now):
            locks[mq] = LockEntry(client_id, now)
            return True
        if entry.client_id == client_id:
            entry.last_update = now
            return True
        return False

    def try_lock_batch(self, group: str, mqs: Iterable[MessageQueue],
                       client_id: str) -> list[MessageQueue]:
        now = self.clock()
        return [mq for mq in mqs if self.try_lock(group, mq, client_id, now)]

    def unlock_batch(self, group: str, mqs: Iterable[MessageQueue], client_id: str) -> None:
        locks = self.table.get(group)
        if not locks:
            return
        for mq in mqs:
            entry = locks.get(mq)
            if entry is not None and entry.client_id == client_id:
                del locks[mq]
        if not locks:
            del self.table[group]

    def is_locked(self, group: str, mq: MessageQueue, client_id: str) -> bool:
        entry = self.table.get(group, {}).get(mq)
        return entry is not None and entry.client_id == client_id and \
            not self._expired(entry, self.clock())
