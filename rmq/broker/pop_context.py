"""What the POP processors share: the revive service, the orderly-pop state,
long polling and the queue locks; built once per broker on first use."""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

from rmq.broker.pop_order import OrderInfoManager, now_ms
from rmq.broker.pop_polling import PopPolling
from rmq.broker.pop_revive import PopReviveService


class PopContext:
    # plain slots: the compiled pop reads them at their offsets
    __slots__ = ("c", "revive", "order", "_order_lock", "_order_changes", "_order_saved",
                 "polling", "locks", "_ck_counter")

    def __init__(self, controller: Any) -> None:
        self.c = controller
        self.revive = PopReviveService(controller)
        self.order: OrderInfoManager = controller.consumer_order_info_manager
        self._order_lock = asyncio.Lock()
        self._order_changes = 0  # changes made to the order state ...
        self._order_saved = 0  # ... and how many of them are on disk
        self.polling = PopPolling(controller.broker_config.popPollingMaxWaiters)
        self.locks: set[tuple[str, str, int]] = set()  # (topic, group, queueId) being popped
        self._ck_counter = itertools.count()
        self._recover_order_offsets()
        controller.services.append(self.revive)
        controller.add_arrival_listener(self.polling.notify, self.polling.notify_runs,
                                        waiting=(self.polling, "waiters"))

    def _recover_order_offsets(self) -> None:
        """consumerOffset.json is written every flushConsumerOffsetInterval, the
        order state at every ack: after a SIGKILL the acks of the last batches
        are known from the latter."""
        com = self.c.consumer_offset_manager
        for (topic, group, qid), offset in self.order.consumed_offsets().items():
            if com.query_offset(group, topic, qid) < offset:
                com.commit_offset("recover", group, topic, qid, offset)

    async def persist_order(self) -> None:
        """Put the orderly state on disk before an answer that depends on it.
        Concurrent callers share writes: one that finds its change already
        written by a later caller's write returns at once."""
        self._order_changes += 1
        mine = self._order_changes
        async with self._order_lock:
            if self._order_saved >= mine:
                return
            upto = self._order_changes
            self.order.clean(self._queue_exists, now_ms())
            text = self.order.encode(pretty=True)
            await asyncio.to_thread(self.c.write_config, text, self.order.config_file_path())
            self._order_saved = upto

    def _queue_exists(self, topic: str, group: str, queue_id: int) -> bool:
        tc = self.c.topic_config_manager.select_topic_config(topic)
        return tc is not None and queue_id < tc.readQueueNums and \
            self.c.subscription_group_manager.contains(group)

    def next_revive_qid(self) -> int:
        return next(self._ck_counter) % self.revive.queue_num

    def inflight(self) -> dict[tuple[str, str], int]:
        """Popped, unacknowledged messages per (group, topic)."""
        out = self.revive.inflight_by_group()
        for k, n in self.order.inflight().items():
            out[k] = out.get(k, 0) + n
        return out


def pop_context(controller: Any) -> PopContext:
    ctx = getattr(controller, "pop_context", None)
    if ctx is None:
        ctx = PopContext(controller)
        controller.pop_context = ctx
    return ctx
