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

from rmq.common.message import (
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_KEYS,
    PROPERTY_TAGS,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    PROPERTY_WAIT_STORE_MSG_OK,
)
from rmq.common.timer import (
    PROPERTY_TIMER_DELAY_MS,
    PROPERTY_TIMER_DELAY_SEC,
    PROPERTY_TIMER_DELIVER_MS,
)
from rmq.common.timer import REQUEST_PROPERTIES as TIMER_REQUEST_PROPERTIES


class Message:
    """A message to send: topic, body, flag and properties (tags, keys, user
    properties, delay level, ...)."""

    __slots__ = ("topic", "body", "flag", "properties")

    def __init__(
        self,
        topic: str,
        body: bytes = b"",
        tags: str | None = None,
        keys: str | list[str] | None = None,
        flag: int = 0,
        properties: dict[str, str] | None = None,
        delay_level: int = 0,
        wait_store_msg_ok: bool = True,
        deliver_time_ms: int | None = None,
        delay_ms: int | None = None,
        delay_sec: int | None = None,
    ) -> None:
        self.topic = topic
        self.body = body
        self.flag = flag
        props: dict[str, str] = dict(properties) if properties else {}
        if tags:
            props[PROPERTY_TAGS] = tags
        if keys:
            props[PROPERTY_KEYS] = keys if isinstance(keys, str) else " ".join(keys)
        if delay_level > 0:
            props[PROPERTY_DELAY_TIME_LEVEL] = str(delay_level)
        if not wait_store_msg_ok:
            props[PROPERTY_WAIT_STORE_MSG_OK] = "false"
        self.properties = props
        self.set_timer(deliver_time_ms, delay_ms, delay_sec)

    def set_timer(self, deliver_time_ms: int | None = None, delay_ms: int | None = None,
                  delay_sec: int | None = None) -> None:
        """A RocketMQ 5 timer: delivered at ``deliver_time_ms`` (epoch ms,
        TIMER_DELIVER_MS), or ``delay_ms`` / ``delay_sec`` after the broker
        stores it (TIMER_DELAY_MS / TIMER_DELAY_SEC); Message.setDeliverTimeMs,
        setDelayTimeMs and setDelayTimeSec of the 5.x Java client."""
        if deliver_time_ms is not None:
            self.properties[PROPERTY_TIMER_DELIVER_MS] = str(int(deliver_time_ms))
        if delay_ms is not None:
            self.properties[PROPERTY_TIMER_DELAY_MS] = str(int(delay_ms))
        if delay_sec is not None:
            self.properties[PROPERTY_TIMER_DELAY_SEC] = str(int(delay_sec))

    def timer_properties(self) -> dict[str, str]:
        """The timer properties a sender set (empty for an ordinary message)."""
        return {k: v for k, v in self.properties.items() if k in TIMER_REQUEST_PROPERTIES}

    @property
    def tags(self) -> str | None:
        return self.properties.get(PROPERTY_TAGS)

    @property
    def keys(self) -> str | None:
        return self.properties.get(PROPERTY_KEYS)

    @property
    def delay_level(self) -> int:
        v = self.properties.get(PROPERTY_DELAY_TIME_LEVEL)
        return int(v) if v and v.lstrip("-").isdigit() else 0

    @property
    def uniq_key(self) -> str | None:
        return self.properties.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)

    def get_property(self, name: str) -> str | None:
        return self.properties.get(name)

    def put_user_property(self, name: str, value: str) -> None:
        self.properties[name] = value

    def __repr__(self) -> str:
        return (f"Message(topic={self.topic!r}, flag={self.flag}, properties={self.properties!r}, "
                f"body={len(self.body)} bytes)")


class MessageExt(Message):
    """A stored message as delivered by pull, query and view (``MessageExt``).

    ``msg_id`` is the client id (UNIQ_KEY) when present, else ``offset_msg_id``.
    ``body`` is already decompressed.
    """

    __slots__ = (
        "queue_id", "store_size", "queue_offset", "sys_flag", "born_timestamp", "born_host",
        "store_timestamp", "store_host", "msg_id", "offset_msg_id", "commit_log_offset",
        "body_crc", "reconsume_times", "prepared_transaction_offset", "broker_name",
    )

    def __init__(self) -> None:  # filled field by field by the decoder
        self.topic = ""
        self.body = b""
        self.flag = 0
        self.properties = {}
        self.queue_id = 0
        self.store_size = 0
        self.queue_offset = 0
        self.sys_flag = 0
        self.born_timestamp = 0
        self.born_host = ""
        self.store_timestamp = 0
        self.store_host = ""
        self.msg_id = ""
        self.offset_msg_id = ""
        self.commit_log_offset = 0
        self.body_crc = 0
        self.reconsume_times = 0
        self.prepared_transaction_offset = 0
        self.broker_name = ""

    def __repr__(self) -> str:
        return (f"MessageExt(topic={self.topic!r}, queue_id={self.queue_id}, "
                f"queue_offset={self.queue_offset}, msg_id={self.msg_id!r}, "
                f"properties={self.properties!r}, body={len(self.body)} bytes)")


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
