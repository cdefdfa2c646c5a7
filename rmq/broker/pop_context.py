"""What the POP processors share: the revive service, the orderly-pop state,
long polling and the queue locks; built once per broker on first use."""

from __future__ import annotations

import itertools
from typing import Any

from rmq.broker.pop_order import OrderInfoManager
from rmq.broker.pop_polling import PopPolling
from rmq.broker.pop_revive import PopReviveService


class PopContext:
    def __init__(self, controller: Any) -> None:
        self.c = controller
        self.revive = PopReviveService(controller)
        self.order = OrderInfoManager()
        self.polling = PopPolling(controller.broker_config.popPollingMaxWaiters)
        self.locks: set[tuple[str, str, int]] = set()  # (topic, group, queueId) being popped
        self._ck_counter = itertools.count()
        controller.services.append(self.revive)
        controller.message_arriving_listeners.append(self.polling.notify)

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
