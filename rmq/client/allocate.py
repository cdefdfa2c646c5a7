"""Queue allocation strategies for clustering consumers (RocketMQ's
``AllocateMessageQueueStrategy`` implementations).

Every consumer of a group computes its own share from the same sorted inputs,
so the result must be a pure function of (group, my id, all queues, all ids).
"""

from __future__ import annotations

from typing import Protocol

from rmq.client.message import MessageQueue


class AllocateStrategy(Protocol):
    name: str

    def allocate(self, group: str, current_cid: str, mq_all: list[MessageQueue],
                 cid_all: list[str]) -> list[MessageQueue]: ...


def _check(current_cid: str, mq_all: list[MessageQueue], cid_all: list[str]) -> bool:
    if not current_cid:
        raise ValueError("currentCID is empty")
    if not mq_all or not cid_all:
        return False
    return current_cid in cid_all


class AllocateMessageQueueAveragely:
    """Contiguous blocks: the first ``len(mq) % len(cid)`` consumers get one extra
    queue (``AllocateMessageQueueAveragely``)."""

    name = "AVG"

    def allocate(self, group: str, current_cid: str, mq_all: list[MessageQueue],
                 cid_all: list[str]) -> list[MessageQueue]:
        if not _check(current_cid, mq_all, cid_all):
            return []
        n_mq, n_cid = len(mq_all), len(cid_all)
        index = cid_all.index(current_cid)
        mod = n_mq % n_cid
        if n_mq <= n_cid:
            average = 1
        elif mod > 0 and index < mod:
            average = n_mq // n_cid + 1
        else:
            average = n_mq // n_cid
        start = index * average if (mod > 0 and index < mod) else index * average + mod
        count = min(average, n_mq - start)
        return [mq_all[(start + i) % n_mq] for i in range(max(count, 0))]


class AllocateMessageQueueAveragelyByCircle:
    """Round-robin: consumer i takes queues i, i+n, i+2n, ..."""

    name = "AVG_BY_CIRCLE"

    def allocate(self, group: str, current_cid: str, mq_all: list[MessageQueue],
                 cid_all: list[str]) -> list[MessageQueue]:
        if not _check(current_cid, mq_all, cid_all):
            return []
        index = cid_all.index(current_cid)
        return mq_all[index::len(cid_all)]
