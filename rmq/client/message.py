"""Client-side message model: ``Message``, ``MessageExt``, ``MessageQueue``,
``SendResult`` and ``PullResult`` (RocketMQ's ``common.message`` and
``client.producer`` / ``client.consumer`` value classes).

The classes use ``__slots__`` and plain attributes: a benchmark sends and
receives hundreds of thousands of them per second.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import NamedTuple

# Message and MessageExt live in rmq.common.message (Java's common.message), where
# the compiled pull-body decoder in rmq._fast can build them.
from rmq.common.message import Message as Message
from rmq.common.message import MessageExt as MessageExt


class MessageQueue(NamedTuple):
    """One queue of a topic on one broker; ordered by (topic, broker, queue id)
    exactly like Java's ``MessageQueue.compareTo``, which rebalancing relies on."""

    topic: str
    broker_name: str
    queue_id: int

    def to_json_obj(self) -> dict:
        return {"brokerName": self.broker_name, "queueId": self.queue_id, "topic": self.topic}

    @classmethod
    def from_json_obj(cls, obj: dict) -> MessageQueue:
        return cls(obj["topic"], obj["brokerName"], int(obj["queueId"]))

    def key(self) -> str:
        """The compact JSON text used as a map key in admin bodies (PROTOCOL 4.2)."""
        return (f'{{"brokerName":"{self.broker_name}","queueId":{self.queue_id},'
                f'"topic":"{self.topic}"}}')


class SendStatus(enum.Enum):
    SEND_OK = "SEND_OK"
    FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"
    FLUSH_SLAVE_TIMEOUT = "FLUSH_SLAVE_TIMEOUT"
    SLAVE_NOT_AVAILABLE = "SLAVE_NOT_AVAILABLE"


@dataclass(slots=True)
class SendResult:
    """Outcome of a send: ``msg_id`` is the client id (UNIQ_KEY; comma-joined for a
    batch), ``offset_msg_id`` the broker's offset id(s)."""

    status: SendStatus
    msg_id: str
    offset_msg_id: str
    message_queue: MessageQueue
    queue_offset: int
    region_id: str = ""
    trace_on: bool = True


class PullStatus(enum.Enum):
    FOUND = "FOUND"
    NO_NEW_MSG = "NO_NEW_MSG"
    NO_MATCHED_MSG = "NO_MATCHED_MSG"
    OFFSET_ILLEGAL = "OFFSET_ILLEGAL"


@dataclass(slots=True)
class PullResult:
    """Outcome of one pull (``PullResult``); ``messages`` already filtered by tag."""

    status: PullStatus
    next_begin_offset: int
    min_offset: int
    max_offset: int
    messages: list[MessageExt] = field(default_factory=list)
    suggest_which_broker_id: int = 0
