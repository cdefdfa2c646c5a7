"""Message queue selectors for ``Producer.send(..., selector=...)``
(``SelectMessageQueueByHash`` / ``ByRandom``): orderly messages go to the queue
chosen from a sharding key, so one key's messages keep their order."""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import Any

from rmq.client.message import Message, MessageQueue
from rmq.common.message import java_string_hash

QueueSelector = Callable[[Sequence[MessageQueue], Message, Any], MessageQueue]


def _java_hash(arg: Any) -> int:
    """Java ``Object.hashCode`` for the argument types users pass: String, Integer, Long."""
    if isinstance(arg, str):
        return java_string_hash(arg)
    if isinstance(arg, bool):
        return 1231 if arg else 1237
    if isinstance(arg, int):
        if -(1 << 31) <= arg < (1 << 31):
            return arg
        v = arg & 0xFFFF_FFFF_FFFF_FFFF
        h = (v ^ (v >> 32)) & 0xFFFF_FFFF
        return h - (1 << 32) if h & 0x8000_0000 else h
    return hash(arg)


def select_by_hash(mqs: Sequence[MessageQueue], msg: Message, arg: Any) -> MessageQueue:
    """``abs(arg.hashCode()) % len(mqs)``: same key, same queue (orderly by hash)."""
    value = abs(_java_hash(arg))
    return mqs[value % len(mqs)]


def select_by_random(mqs: Sequence[MessageQueue], msg: Message, arg: Any) -> MessageQueue:
    return mqs[random.randrange(len(mqs))]
