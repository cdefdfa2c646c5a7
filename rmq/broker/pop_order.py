"""Orderly pop's per-queue state (5.3.3's ConsumerOrderInfoManager).

For a group that consumes orderly, a pop takes a queue's next batch and the
queue stays blocked for that group until every message of the batch is acked
or the batch's invisible time passes; then the same messages are popped again,
in the same order, with their pop counts (``orderCountInfo``).  The group's
offset moves only with acks, so nothing here needs to survive a restart: after
one, the unacked batch is simply available again at once.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(slots=True)
class OrderInfo:
    pop_time: int
    invisible_time: int
    offsets: list[int]
    acked: set[int] = field(default_factory=set)
    counts: dict[int, int] = field(default_factory=dict)
    changed_until: int = 0  # a CHANGE_MESSAGE_INVISIBLETIME's new visible time

    def done(self) -> bool:
        return all(o in self.acked for o in self.offsets)

    def visible_at(self) -> int:
        return self.changed_until or self.pop_time + self.invisible_time


Key = tuple[str, str, int]  # (topic, group, queueId)


class OrderInfoManager:
    def __init__(self) -> None:
        self.table: dict[Key, OrderInfo] = {}

    def blocked(self, key: Key, now: int) -> bool:
        info = self.table.get(key)
        return info is not None and not info.done() and now < info.visible_at()

    def on_pop(self, key: Key, offsets: list[int], pop_time: int, invisible: int) -> dict[int, int]:
        """Record a new batch; answers each offset's pop count before this pop."""
        old = self.table.get(key)
        counts: dict[int, int] = {}
        for o in offsets:
            counts[o] = (old.counts.get(o, -1) + 1) if old is not None else 0
        self.table[key] = OrderInfo(pop_time, invisible, list(offsets), set(), counts)
        return counts

    def ack(self, key: Key, offset: int, pop_time: int) -> int | None:
        """Mark ``offset`` acked; the offset to commit when the acked prefix of
        the batch grew (the first unacked offset, or past the batch once done)."""
        info = self.table.get(key)
        if info is None or offset not in info.offsets:
            return None
        if pop_time < info.pop_time:
            return None  # an ack of an older pop of these messages
        before = self._commit_point(info)
        info.acked.add(offset)
        if info.done():
            del self.table[key]
            return max(info.offsets) + 1
        after = self._commit_point(info)
        return after if after != before else None

    @staticmethod
    def _commit_point(info: OrderInfo) -> int:
        for o in sorted(info.offsets):
            if o not in info.acked:
                return o
        return max(info.offsets) + 1

    def change_invisible(self, key: Key, offset: int, pop_time: int, invisible: int) -> bool:
        info = self.table.get(key)
        if info is None or offset not in info.offsets:
            return False
        info.changed_until = pop_time + invisible
        return True

    def inflight(self) -> dict[tuple[str, str], int]:
        out: dict[tuple[str, str], int] = {}
        for (topic, group, _q), info in self.table.items():
            n = len([o for o in info.offsets if o not in info.acked])
            out[(group, topic)] = out.get((group, topic), 0) + n
        return out
