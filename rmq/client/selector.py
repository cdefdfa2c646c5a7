"""Message queue selectors for ``Producer.send(..., selector=...)``
(``SelectMessageQueueByHash`` / ``ByRandom``): orderly messages go to the queue
chosen from a sharding key, so one key's messages keep their order."""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import Any

from rmq.client.message import Message, MessageQueue
from rmq.common.java import object_hash

QueueSelector = Callable[[Sequence[MessageQueue], Message, Any], MessageQueue]


def select_by_hash(mqs: Sequence[MessageQueue], msg: Message, arg: Any) -> MessageQueue:
    """``abs(arg.hashCode()) % len(mqs)``: same key, same queue (orderly by hash)."""
    value = abs(object_hash(arg))
    return mqs[value % len(mqs)]


def select_by_random(mqs: Sequence[MessageQueue], msg: Message, arg: Any) -> MessageQueue:
    return mqs[random.randrange(len(mqs))]
