"""Orderly pop's per-queue state and ``config/consumerOrderInfo.json``
(5.3.3's ConsumerOrderInfoManager).

For a group that consumes orderly, a pop takes a queue's next batch and the
queue stays blocked for that group until every message of the batch is acked
or its invisible time passes; then the same messages are popped again, in the
same order, with their pop counts (``orderCountInfo``).  The group's offset
moves only with acks.

The state is a config file in 5.3.3's JSON (``{"table":{"topic@group":
{queueId:{OrderInfo}}}}``, OrderInfo with 5.3.3's short names: ``a`` attempt
id, ``cm`` acked bits, ``i`` invisible time, ``l`` last pop, ``o`` offsets (the
first, then distances to it), ``oc`` pop counts, ``ot`` per-offset next visible
time, ``popTime``), so either broker reads the other's.  5.3.3 writes it every
10 s; rmq writes it before answering each orderly pop, ack or change of
invisible time (writes coalesced, see PopContext.persist_order), so that after
a SIGKILL a queue with an unacked batch is still blocked and acked messages
are not delivered again.  A finished batch stays in the table (as in 5.3.3)
until the queue's next pop replaces it: its end is the offset the group has
consumed to, which recovery uses when consumerOffset.json was older.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Any

from rmq.common.config_manager import ConfigManager, dumps, parse_json

TOPIC_GROUP_SEPARATOR = "@"
CLEAN_SPAN_FROM_LAST_MS = 24 * 3600 * 1000  # 5.3.3 forgets queues not popped for a day


def consumer_order_info_path(store_root: str) -> str:
    return os.path.join(store_root, "config", "consumerOrderInfo.json")


@dataclass(slots=True)
class OrderInfo:
    """One queue's last orderly batch (offsets absolute in memory)."""

    pop_time: int
    invisible_time: int
    offsets: list[int]
    commit_bits: int = 0  # bit i: offsets[i] acked
    next_visible: dict[int, int] = field(default_factory=dict)  # offset -> time (changed)
    counts: dict[int, int] = field(default_factory=dict)  # offset -> pops before (> 0 only)
    last_consume: int = 0
    attempt_id: str | None = None

    def acked(self, i: int) -> bool:
        return bool(self.commit_bits >> i & 1)

    def done(self) -> bool:
        return all(self.acked(i) for i in range(len(self.offsets)))

    def needs_block(self, now: int) -> bool:
        """5.3.3's needBlock: an unacked message not yet visible again."""
        for i, o in enumerate(self.offsets):
            if not self.acked(i):
                if now < self.next_visible.get(o, self.pop_time + self.invisible_time):
                    return True
        return False

    def next_offset(self) -> int:
        """The first unacked offset, or past the batch once it is all acked."""
        for i, o in enumerate(self.offsets):
            if not self.acked(i):
                return o
        return self.offsets[-1] + 1

    def unacked(self) -> int:
        return sum(1 for i in range(len(self.offsets)) if not self.acked(i))

    def to_json_obj(self) -> dict[str, Any]:
        first = self.offsets[0]
        rel = [first] + [o - first for o in self.offsets[1:]]
        return {"a": self.attempt_id, "cm": self.commit_bits, "i": self.invisible_time,
                "l": self.last_consume, "o": rel, "oc": dict(self.counts) or None,
                "ot": dict(self.next_visible) or None, "popTime": self.pop_time}

    @classmethod
    def from_json_obj(cls, obj: Any) -> OrderInfo:
        if not isinstance(obj, dict):
            raise ValueError("an OrderInfo is not a JSON object")
        rel = [int(x) for x in obj.get("o") or []]
        if not rel:
            raise ValueError("an OrderInfo without offsets")
        offsets = [rel[0]] + [rel[0] + d for d in rel[1:]]
        attempt = obj.get("a")
        return cls(int(obj.get("popTime", 0)), int(obj.get("i") or 0), offsets,
                   int(obj.get("cm", 0)),
                   {int(k): int(v) for k, v in (obj.get("ot") or {}).items()},
                   {int(k): int(v) for k, v in (obj.get("oc") or {}).items()},
                   int(obj.get("l", 0)), None if attempt is None else str(attempt))


Key = tuple[str, str, int]  # (topic, group, queueId)


def now_ms() -> int:
    return time.time_ns() // 1_000_000


class OrderInfoManager(ConfigManager):
    def __init__(self, store_root: str = "") -> None:
        self.store_root = store_root
        self.table: dict[Key, OrderInfo] = {}

    def blocked(self, key: Key, now: int) -> bool:
        info = self.table.get(key)
        return info is not None and info.needs_block(now)

    def on_pop(self, key: Key, offsets: list[int], pop_time: int, invisible: int) -> dict[int, int]:
        """Record a new batch; answers each offset's pop count before this pop."""
        old = self.table.get(key)
        counts: dict[int, int] = {}
        if old is not None:
            before = set(old.offsets)
            counts = {o: old.counts.get(o, 0) + 1 for o in offsets if o in before}
        self.table[key] = OrderInfo(pop_time, invisible, list(offsets), 0, {}, counts,
                                    now_ms())
        return {o: counts.get(o, 0) for o in offsets}

    def ack(self, key: Key, offset: int, pop_time: int) -> int | None:
        """Mark ``offset`` acked; the offset to commit when the acked prefix of
        the batch grew (the first unacked offset, or past the batch once done)."""
        info = self.table.get(key)
        if info is None or offset not in info.offsets or pop_time != info.pop_time:
            return None  # not this batch, or an ack of an older pop of it
        before = info.next_offset()
        info.commit_bits |= 1 << info.offsets.index(offset)
        after = info.next_offset()
        return after if after != before else None

    def change_invisible(self, key: Key, offset: int, pop_time: int, visible_at: int) -> bool:
        """5.3.3's updateNextVisibleTime: only for the batch popped at ``pop_time``."""
        info = self.table.get(key)
        if info is None or offset not in info.offsets or pop_time != info.pop_time:
            return False
        info.next_visible[offset] = visible_at
        return True

    def inflight(self) -> dict[tuple[str, str], int]:
        out: dict[tuple[str, str], int] = {}
        for (topic, group, _q), info in self.table.items():
            out[(group, topic)] = out.get((group, topic), 0) + info.unacked()
        return out

    def consumed_offsets(self) -> dict[Key, int]:
        """Where each queue's group has consumed to, by its last batch's acks."""
        return {k: info.next_offset() for k, info in self.table.items()}

    def clean(self, exists: Any, now: int) -> None:
        """5.3.3's autoClean: queues of gone topics/groups/queues or idle a day.
        ``exists(topic, group, queueId)`` says whether the queue still is."""
        for key in [k for k, info in self.table.items()
                    if not exists(*k) or now - info.last_consume > CLEAN_SPAN_FROM_LAST_MS]:
            del self.table[key]

    # ---- ConfigManager --------------------------------------------------
    def config_file_path(self) -> str:
        return consumer_order_info_path(self.store_root)

    def encode(self, pretty: bool = False) -> str:
        table: dict[str, dict[int, Any]] = {}
        for (topic, group, qid), info in self.table.items():
            table.setdefault(topic + TOPIC_GROUP_SEPARATOR + group, {})[qid] = info.to_json_obj()
        return dumps({"table": table}, pretty)

    def decode(self, text: str) -> None:
        obj = parse_json(text)
        raw = obj.get("table") or {}
        if not isinstance(raw, dict):
            raise ValueError("table is not a JSON object")
        table: dict[Key, OrderInfo] = {}
        for key, queues in raw.items():
            topic, sep, group = str(key).partition(TOPIC_GROUP_SEPARATOR)
            if not sep or not isinstance(queues, dict):
                raise ValueError(f"bad order info entry {key!r}")
            for qid, info in queues.items():
                table[(topic, group, int(qid))] = OrderInfo.from_json_obj(info)
        self.table = table
