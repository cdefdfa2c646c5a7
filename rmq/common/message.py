"""Message constants shared by every component: property keys, sysFlag bits,
permissions and the property-string codec; and the client's message classes
``Message`` and ``MessageExt`` (``rmq.client.message`` re-exports them; the
compiled pull-body decoder in ``rmq._fast`` builds ``MessageExt``).

Mirrors ``MessageConst``, ``MessageSysFlag`` and ``PermName`` of RocketMQ
4.9.8 (../shared/spec/STORE_FORMAT.md sections 2.10, 3), plus the tag code
(``String.hashCode`` of the TAGS value, from ``rmq.common.java``).
"""

from __future__ import annotations

# String.hashCode lives with the other Java-compatible helpers (rmq.common.java).
from rmq.common import timer as _timer
from rmq.common.java import string_hash as java_string_hash

# --- property keys (MessageConst) -------------------------------------------
PROPERTY_KEYS = "KEYS"
PROPERTY_TAGS = "TAGS"
PROPERTY_WAIT_STORE_MSG_OK = "WAIT"
PROPERTY_DELAY_TIME_LEVEL = "DELAY"
PROPERTY_RETRY_TOPIC = "RETRY_TOPIC"
PROPERTY_REAL_TOPIC = "REAL_TOPIC"
PROPERTY_REAL_QUEUE_ID = "REAL_QID"
PROPERTY_TRANSACTION_PREPARED = "TRAN_MSG"
PROPERTY_PRODUCER_GROUP = "PGROUP"
PROPERTY_MIN_OFFSET = "MIN_OFFSET"
PROPERTY_MAX_OFFSET = "MAX_OFFSET"
PROPERTY_BUYER_ID = "BUYER_ID"
PROPERTY_ORIGIN_MESSAGE_ID = "ORIGIN_MESSAGE_ID"
PROPERTY_TRANSFER_FLAG = "TRANSFER_FLAG"
PROPERTY_CORRECTION_FLAG = "CORRECTION_FLAG"
PROPERTY_MQ2_FLAG = "MQ2_FLAG"
PROPERTY_RECONSUME_TIME = "RECONSUME_TIME"
PROPERTY_MSG_REGION = "MSG_REGION"
PROPERTY_TRACE_SWITCH = "TRACE_ON"
PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX = "UNIQ_KEY"
PROPERTY_MAX_RECONSUME_TIMES = "MAX_RECONSUME_TIMES"
PROPERTY_CONSUME_START_TIMESTAMP = "CONSUME_START_TIME"
PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET = "TRAN_PREPARED_QUEUE_OFFSET"
PROPERTY_TRANSACTION_CHECK_TIMES = "TRANSACTION_CHECK_TIMES"
PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS = "CHECK_IMMUNITY_TIME_IN_SECONDS"
PROPERTY_INSTANCE_ID = "INSTANCE_ID"
PROPERTY_CORRELATION_ID = "CORRELATION_ID"
PROPERTY_MESSAGE_REPLY_TO_CLIENT = "REPLY_TO_CLIENT"
PROPERTY_MESSAGE_TTL = "TTL"
PROPERTY_REPLY_MESSAGE_ARRIVE_TIME = "ARRIVE_TIME"
PROPERTY_PUSH_REPLY_TIME = "PUSH_REPLY_TIME"
PROPERTY_CLUSTER = "CLUSTER"
PROPERTY_MESSAGE_TYPE = "MSG_TYPE"
PROPERTY_INNER_MULTI_DISPATCH = "INNER_MULTI_DISPATCH"
PROPERTY_INNER_MULTI_QUEUE_OFFSET = "INNER_MULTI_QUEUE_OFFSET"

KEY_SEPARATOR = " "
NAME_VALUE_SEPARATOR = "\x01"
PROPERTY_SEPARATOR = "\x02"

# --- sysFlag bits (MessageSysFlag) ------------------------------------------
COMPRESSED_FLAG = 0x1
MULTI_TAGS_FLAG = 0x2
TRANSACTION_NOT_TYPE = 0x0
TRANSACTION_PREPARED_TYPE = 0x4
TRANSACTION_COMMIT_TYPE = 0x8
TRANSACTION_ROLLBACK_TYPE = 0xC
BORNHOST_V6_FLAG = 0x10
STOREHOSTADDRESS_V6_FLAG = 0x20
NEED_UNWRAP_FLAG = 0x40
INNER_BATCH_FLAG = 0x80
COMPRESSION_LZ4_TYPE = 0x100
COMPRESSION_ZSTD_TYPE = 0x200
COMPRESSION_ZLIB_TYPE = 0x300
COMPRESSION_TYPE_COMPARATOR = 0xFFFF_F8FF


def transaction_type(sys_flag: int) -> int:
    """The transaction bits (2-3) of a sysFlag."""
    return sys_flag & TRANSACTION_ROLLBACK_TYPE


def reset_transaction_value(sys_flag: int, tx_type: int) -> int:
    """Replace the transaction bits of ``sys_flag`` with ``tx_type``."""
    return (sys_flag & ~TRANSACTION_ROLLBACK_TYPE) | tx_type


# --- permissions (PermName) -------------------------------------------------
PERM_PRIORITY = 0x8
PERM_READ = 0x4
PERM_WRITE = 0x2
PERM_INHERIT = 0x1


def is_readable(perm: int) -> bool:
    return (perm & PERM_READ) == PERM_READ


def is_writeable(perm: int) -> bool:
    return (perm & PERM_WRITE) == PERM_WRITE


def is_inherited(perm: int) -> bool:
    return (perm & PERM_INHERIT) == PERM_INHERIT


def perm_to_string(perm: int) -> str:
    """``PermName.perm2String``: e.g. 6 -> ``"RW-"``."""
    return (
        ("R" if perm & PERM_READ else "-")
        + ("W" if perm & PERM_WRITE else "-")
        + ("X" if perm & PERM_INHERIT else "-")
    )


# The property string codec (HashMap order, no trailing separator) lives in
# rmq.store.message_codec: message_properties_to_string / string_to_message_properties.


def tags_string_to_code(tags: str | None) -> int:
    """``MessageExtBrokerInner.tagsString2tagsCode``: hash of the whole TAGS value."""
    if not tags:
        return 0
    return java_string_hash(tags)


# --- the client's message classes (common.message.Message / MessageExt) ------
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
        if deliver_time_ms is not None or delay_ms is not None or delay_sec is not None:
            self.set_timer(deliver_time_ms, delay_ms, delay_sec)

    def set_timer(self, deliver_time_ms: int | None = None, delay_ms: int | None = None,
                  delay_sec: int | None = None) -> None:
        """A RocketMQ 5 timer: delivered at ``deliver_time_ms`` (epoch ms,
        TIMER_DELIVER_MS), or ``delay_ms`` / ``delay_sec`` after the broker
        stores it (TIMER_DELAY_MS / TIMER_DELAY_SEC); Message.setDeliverTimeMs,
        setDelayTimeMs and setDelayTimeSec of the 5.x Java client."""
        if deliver_time_ms is not None:
            self.properties[_timer.PROPERTY_TIMER_DELIVER_MS] = str(int(deliver_time_ms))
        if delay_ms is not None:
            self.properties[_timer.PROPERTY_TIMER_DELAY_MS] = str(int(delay_ms))
        if delay_sec is not None:
            self.properties[_timer.PROPERTY_TIMER_DELAY_SEC] = str(int(delay_sec))

    def timer_properties(self) -> dict[str, str]:
        """The timer properties a sender set (empty for an ordinary message)."""
        return {k: v for k, v in self.properties.items() if k in _timer.REQUEST_PROPERTIES}

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


def parse_properties_text(text: str | bytes | None) -> dict[str, str]:
    """``MessageDecoder.string2messageProperties``: segments split on ``\\x02``,
    each used only if it has a ``\\x01`` that is neither first nor last; the
    value may contain further ``\\x01``; later duplicates win."""
    out: dict[str, str] = {}
    if not text:
        return out
    if isinstance(text, (bytes, bytearray, memoryview)):
        text = bytes(text).decode("utf-8", "replace")
    for seg in text.split("\x02"):
        idx = seg.find("\x01")
        if 0 < idx < len(seg) - 1:
            out[seg[:idx]] = seg[idx + 1 :]
    return out
