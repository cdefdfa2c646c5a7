"""Multi-dispatch and LMQ (light message queues) as 4.9.8 stores them
(``MultiDispatch``, ``ConsumeQueue.multiDispatchLmqQueue``).

With ``enableMultiDispatch``, a message whose INNER_MULTI_DISPATCH property
names more queues ("%LMQ%a,%LMQ%b") is stored once in the commit log and
gets an entry in the consume queue of each of them as well as its own.  Under
the put lock the store reads each queue's next offset and writes them, in the
same order, into the stored INNER_MULTI_QUEUE_OFFSET property; after the
append each of those queues moves on by one.  Dispatch reads both properties
back and writes the extra consume-queue entries (same commit-log offset,
size and tags code).  An LMQ (a name with the %LMQ% prefix, with
``enableLmq``) always has a single queue, id 0; any other name uses the
message's queue id.
"""

from __future__ import annotations

from rmq.common import message as mc
from rmq.store import message_codec as codec

LMQ_PREFIX = "%LMQ%"
SPLITTER = ","


def is_lmq(name: str | None) -> bool:
    return name is not None and name.startswith(LMQ_PREFIX)


class MultiDispatch:
    """The multi-dispatch rules of one store (its two switches)."""

    __slots__ = ("enabled", "lmq")  # (the send lane reads ``enabled`` at its slot every read)

    def __init__(self, enable_multi_dispatch: bool, enable_lmq: bool) -> None:
        self.enabled = enable_multi_dispatch
        self.lmq = enable_lmq

    def queue_key(self, name: str, queue_id: int) -> tuple[str, int]:
        return (name, 0 if self.lmq and is_lmq(name) else queue_id)

    def queues_of(self, props: dict[str, str]) -> list[str] | None:
        """The extra queues a message asks for, None when it is not multi-dispatched."""
        if not self.enabled:
            return None
        text = props.get(mc.PROPERTY_INNER_MULTI_DISPATCH)
        if not text or not text.strip():
            return None
        return text.split(SPLITTER)

    def wrap(self, props: dict[str, str], queue_id: int, queues: list[str],
             table: dict[tuple[str, int], int]) -> tuple[list[tuple[str, int]], str]:
        """Under the put lock: the queue keys and the message's new stored
        properties string, INNER_MULTI_QUEUE_OFFSET holding each queue's next
        offset (WAIT is not stored, as for every message)."""
        keys = [self.queue_key(q, queue_id) for q in queues]
        props[mc.PROPERTY_INNER_MULTI_QUEUE_OFFSET] = SPLITTER.join(str(table.get(k, 0)) for k in keys)
        stored = {k: v for k, v in props.items() if k != mc.PROPERTY_WAIT_STORE_MSG_OK}
        return keys, codec.message_properties_to_string(stored)

    @staticmethod
    def advance(keys: list[tuple[str, int]], props: dict[str, str], table: dict[tuple[str, int], int]) -> None:
        """After the append: each queue's next offset is one past the message's."""
        for key, offset in zip(keys, props[mc.PROPERTY_INNER_MULTI_QUEUE_OFFSET].split(SPLITTER), strict=True):
            table[key] = int(offset) + 1

    def entries(self, props: dict[str, str], queue_id: int) -> list[tuple[str, int, int]]:
        """(queue name, queue id, queue offset) of each extra entry of a stored
        message; none when the two properties are missing or disagree."""
        if not self.enabled:
            return []
        queues = props.get(mc.PROPERTY_INNER_MULTI_DISPATCH)
        offsets = props.get(mc.PROPERTY_INNER_MULTI_QUEUE_OFFSET)
        if not queues or not offsets or not queues.strip() or not offsets.strip():
            return []
        names, offs = queues.split(SPLITTER), offsets.split(SPLITTER)
        if len(names) != len(offs):
            return []
        return [(*self.queue_key(n, queue_id), int(o)) for n, o in zip(names, offs, strict=True)]
