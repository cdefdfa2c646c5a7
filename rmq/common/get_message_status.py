"""``GetMessageStatus``: how a store read of one queue ended (4.9.8's
``org.apache.rocketmq.store.GetMessageStatus``).

Kept below the store because the compiled queue walk (``rmq._fast.store_read``)
sets it on the result; ``rmq.store.results`` re-exports it beside the other
result types."""

from __future__ import annotations

import enum


class GetMessageStatus(enum.Enum):
    FOUND = 0
    NO_MATCHED_MESSAGE = 1
    MESSAGE_WAS_REMOVING = 2
    OFFSET_FOUND_NULL = 3
    OFFSET_OVERFLOW_BADLY = 4
    OFFSET_OVERFLOW_ONE = 5
    OFFSET_TOO_SMALL = 6
    NO_MATCHED_LOGIC_QUEUE = 7
    NO_MESSAGE_IN_QUEUE = 8
