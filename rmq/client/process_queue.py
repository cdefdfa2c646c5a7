"""``ProcessQueue``: the messages pulled from one queue and not yet consumed.

It is the flow-control gauge (count and bytes cached) and decides the offset
that may be committed: the smallest offset still in flight, or one past the
largest pulled once everything is consumed.
"""

from __future__ import annotations

import time
from itertools import repeat
from operator import attrgetter

from rmq.client.message import MessageExt

_offset_of = attrgetter("queue_offset")
_body_of = attrgetter("body")


def _bytes_of(msgs) -> int:
    return sum(map(len, map(_body_of, msgs)))


class ProcessQueue:
    __slots__ = ("msgs", "msg_size", "queue_offset_max", "dropped", "locked",
                 "last_lock_ts", "last_pull_ts", "last_consume_ts", "consuming", "in_order")

    def __init__(self) -> None:
        self.msgs: dict[int, MessageExt] = {}  # queue offset -> message, insertion = offset order
        self.msg_size = 0
        self.queue_offset_max = -1
        self.dropped = False
        self.locked = False
        self.last_lock_ts = 0.0
        self.last_pull_ts = time.monotonic()
        self.last_consume_ts = time.monotonic()
        self.consuming = False
        self.in_order: dict[int, MessageExt] = {}  # orderly: taken but not committed

    def put(self, msgs: list[MessageExt]) -> None:
        """Add a pulled batch (offsets ascending); offsets already held are kept.
        The table work runs in C (map/zip), not once per message in Python."""
        if not msgs:
            return
        table = self.msgs
        offsets = list(map(_offset_of, msgs))
        if table and not table.keys().isdisjoint(offsets):  # a re-pulled offset: keep the first
            fresh = [m for o, m in zip(offsets, msgs, strict=True) if o not in table]
            offsets = list(map(_offset_of, fresh))
            msgs = fresh
        table.update(zip(offsets, msgs, strict=True))
        self.msg_size += _bytes_of(msgs)
        if offsets:
            self.queue_offset_max = max(self.queue_offset_max, offsets[-1])

    def remove(self, msgs: list[MessageExt]) -> int:
        """Drop consumed messages; returns the offset safe to commit, or -1."""
        table = self.msgs
        gone = list(filter(None, map(table.pop, map(_offset_of, msgs), repeat(None))))
        self.msg_size -= _bytes_of(gone)
        self.last_consume_ts = time.monotonic()
        if table:
            return next(iter(table))  # insertion order is offset order
        return self.queue_offset_max + 1 if self.queue_offset_max >= 0 else -1

    @property
    def count(self) -> int:
        return len(self.msgs) + len(self.in_order)

    def max_span(self) -> int:
        if not self.msgs:
            return 0
        return max(self.msgs) - min(self.msgs)

    # --- orderly ---------------------------------------------------------------
    def take(self, n: int) -> list[MessageExt]:
        """Take the ``n`` lowest offsets for orderly consumption."""
        out = []
        for off in sorted(self.msgs)[:n]:
            m = self.msgs.pop(off)
            self.in_order[off] = m
            out.append(m)
        return out

    def commit(self) -> int:
        """Orderly: the taken messages are consumed; next offset or -1."""
        if not self.in_order:
            return -1
        nxt = max(self.in_order) + 1
        for m in self.in_order.values():
            self.msg_size -= len(m.body)
        self.in_order.clear()
        return nxt

    def rollback(self) -> None:
        """Orderly: give the taken messages back (consume them again later)."""
        self.msgs.update(self.in_order)
        self.msgs = dict(sorted(self.msgs.items()))
        self.in_order.clear()

    def info(self, commit_offset: int) -> dict:
        """``ProcessQueueInfo``: its times are epoch milliseconds (the queue keeps
        monotonic seconds; a lock never taken stays 0)."""
        offs = list(self.msgs)
        skew = time.time() - time.monotonic()

        def epoch_ms(ts: float) -> int:
            return int((ts + skew) * 1000) if ts else 0

        return {
            "cachedMsgCount": len(offs), "cachedMsgMaxOffset": max(offs) if offs else 0,
            "cachedMsgMinOffset": min(offs) if offs else 0,
            "cachedMsgSizeInMiB": self.msg_size // (1024 * 1024), "commitOffset": commit_offset,
            "droped": self.dropped, "lastConsumeTimestamp": epoch_ms(self.last_consume_ts),
            "lastLockTimestamp": epoch_ms(self.last_lock_ts),
            "lastPullTimestamp": epoch_ms(self.last_pull_ts), "locked": self.locked,
            "transactionMsgCount": 0, "transactionMsgMaxOffset": 0, "transactionMsgMinOffset": 0,
            "tryUnlockTimes": 0,
        }
