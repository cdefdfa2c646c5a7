"""5.x message fields <-> broker message properties (5.3.3's
``SendMessageActivity.buildMessageProperty`` and ``TopicMessageType``).

Pure functions: the checks 5.3.3 makes on a message before sending it, the
property map it sends, the message type the properties imply, the topic type a
topic's ``message.type`` attribute declares, Guava's ``consistentHash`` (how a
message group picks its queue) and the 4.x delay level nearest above a
delivery time.
"""

from __future__ import annotations

import time
import unicodedata
from collections.abc import Iterable

from rmq.common import message as mc
from rmq.common.message import java_string_hash
from rmq.proxy.status import Code, ProxyError
from rmq.proxy.v2 import definition_pb2 as pb

PROPERTY_SHARDING_KEY = "__SHARDINGKEY"
PROPERTY_TRACE_CONTEXT = "TRACE_CONTEXT"
PROPERTY_BORN_HOST = "__BORNHOST"
PROPERTY_BORN_TIMESTAMP = "BORN_TIMESTAMP"
PROPERTY_TIMER_DELIVER_MS = "TIMER_DELIVER_MS"
PROPERTY_TIMER_DELAY_SEC = "TIMER_DELAY_SEC"
PROPERTY_TIMER_DELAY_MS = "TIMER_DELAY_MS"

# MessageConst.STRING_HASH_SET of 5.3.3: names a user property may not take
SYSTEM_PROPERTY_NAMES = frozenset({
    "TRACE_ON", "MSG_REGION", "KEYS", "TAGS", "WAIT", "DELAY", "RETRY_TOPIC", "REAL_TOPIC",
    "REAL_QID", "TRAN_MSG", "PGROUP", "MIN_OFFSET", "MAX_OFFSET", "BUYER_ID",
    "ORIGIN_MESSAGE_ID", "TRANSFER_FLAG", "CORRECTION_FLAG", "MQ2_FLAG", "RECONSUME_TIME",
    "UNIQ_KEY", "MAX_RECONSUME_TIMES", "CONSUME_START_TIME", "POP_CK", "POP_CK_OFFSET",
    "1ST_POP_TIME", "TRAN_PREPARED_QUEUE_OFFSET", "DUP_INFO", "EXTEND_UNIQ_INFO",
    "INSTANCE_ID", "CORRELATION_ID", "REPLY_TO_CLIENT", "TTL", "ARRIVE_TIME",
    "PUSH_REPLY_TIME", "CLUSTER", "MSG_TYPE", "INNER_MULTI_QUEUE_OFFSET", "TIMER_DELAY_MS",
    "TIMER_DELAY_SEC", "TIMER_DELIVER_MS", "TIMER_ENQUEUE_MS", "TIMER_DEQUEUE_MS",
    "TIMER_ROLL_TIMES", "TIMER_OUT_MS", "TIMER_DEL_UNIQKEY", "TIMER_DELAY_LEVEL",
    "__BORNHOST", "BORN_TIMESTAMP", "DLQ_ORIGIN_TOPIC", "DLQ_ORIGIN_MESSAGE_ID", "__CRC32#",
})

# ProxyConfig defaults of 5.3.3
USER_PROPERTY_MAX_NUM = 128
MAX_USER_PROPERTY_SIZE = 16 * 1024
MAX_MESSAGE_GROUP_SIZE = 64
MAX_DELAY_TIME_MS = 24 * 3600 * 1000
MAX_TRANSACTION_RECOVERY_SECOND = 3600

TOPIC_TYPES = {"NORMAL": pb.NORMAL, "FIFO": pb.FIFO, "DELAY": pb.DELAY,
               "TRANSACTION": pb.TRANSACTION}
ALL_TYPES = (pb.NORMAL, pb.FIFO, pb.DELAY, pb.TRANSACTION)


def accept_message_types(attributes: dict[str, str] | None) -> list[int]:
    """The 5.x types a topic takes: its ``message.type`` attribute (``MIXED``: all
    four), NORMAL when it has none."""
    value = (attributes or {}).get("message.type", "NORMAL").upper()
    if value == "MIXED":
        return list(ALL_TYPES)
    return [TOPIC_TYPES.get(value, pb.NORMAL)]


def topic_type_name(attributes: dict[str, str] | None) -> str:
    return (attributes or {}).get("message.type", "NORMAL").upper()


def message_type_of(props: dict[str, str]) -> str:
    """``TopicMessageType.parseFromMessageProperty``."""
    if props.get(mc.PROPERTY_TRANSACTION_PREPARED) == "true":
        return "TRANSACTION"
    if any(k in props for k in (mc.PROPERTY_DELAY_TIME_LEVEL, PROPERTY_TIMER_DELIVER_MS,
                                PROPERTY_TIMER_DELAY_SEC, PROPERTY_TIMER_DELAY_MS)):
        return "DELAY"
    if PROPERTY_SHARDING_KEY in props:
        return "FIFO"
    return "NORMAL"


def check_type(topic: str, topic_type: str, props: dict[str, str]) -> None:
    """5.3.3's ``DefaultTopicMessageTypeValidator``."""
    actual = message_type_of(props)
    if actual != topic_type and topic_type != "MIXED":
        raise ProxyError(Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE,
                         f"TopicMessageType validate failed, the expected type is {topic_type}, "
                         f"but actual type is {actual}")


def _has_control(text: str) -> bool:
    return any(unicodedata.category(ch) == "Cc" for ch in text)


def _check_tag(tag: str) -> None:
    if tag:
        if not tag.strip():
            raise ProxyError(Code.ILLEGAL_MESSAGE_TAG, "tag cannot be the char sequence of whitespace")
        if "|" in tag:
            raise ProxyError(Code.ILLEGAL_MESSAGE_TAG, "tag cannot contain '|'")
        if _has_control(tag):
            raise ProxyError(Code.ILLEGAL_MESSAGE_TAG, "tag cannot contain control character")


def _check_key(key: str) -> None:
    if key:
        if not key.strip():
            raise ProxyError(Code.ILLEGAL_MESSAGE_KEY, "key cannot be the char sequence of whitespace")
        if _has_control(key):
            raise ProxyError(Code.ILLEGAL_MESSAGE_KEY, "key cannot contain control character")


def _check_group(group: str) -> None:
    if not group.strip():
        raise ProxyError(Code.ILLEGAL_MESSAGE_GROUP,
                         "message group cannot be the char sequence of whitespace")
    if len(group.encode()) >= MAX_MESSAGE_GROUP_SIZE:
        raise ProxyError(Code.ILLEGAL_MESSAGE_GROUP,
                         f"message group exceed the max size {MAX_MESSAGE_GROUP_SIZE}")
    if _has_control(group):
        raise ProxyError(Code.ILLEGAL_MESSAGE_GROUP, "message group cannot contain control character")


def check_body(body: bytes, max_size: int) -> None:
    if not body:
        raise ProxyError(Code.MESSAGE_BODY_EMPTY, "message body cannot be empty")
    if 0 < max_size < len(body):
        raise ProxyError(Code.MESSAGE_BODY_TOO_LARGE, f"message body cannot exceed the max {max_size}")


def _user_properties(user: dict[str, str]) -> tuple[dict[str, str], int]:
    if len(user) > USER_PROPERTY_MAX_NUM:
        raise ProxyError(Code.MESSAGE_PROPERTIES_TOO_LARGE,
                         f"too many user properties, max is {USER_PROPERTY_MAX_NUM}")
    size = 0
    for key, value in user.items():
        if key in SYSTEM_PROPERTY_NAMES:
            raise ProxyError(Code.ILLEGAL_MESSAGE_PROPERTY_KEY, f"property is used by system: {key}")
        if _has_control(key):
            raise ProxyError(Code.ILLEGAL_MESSAGE_PROPERTY_KEY,
                             "the key of property cannot contain control character")
        if _has_control(value):
            raise ProxyError(Code.ILLEGAL_MESSAGE_PROPERTY_KEY,
                             "the value of property cannot contain control character")
        size += len(key.encode()) + len(value.encode())
    return dict(user), size


def delivery_ms(message: pb.Message) -> int | None:
    sp = message.system_properties
    if not sp.HasField("delivery_timestamp"):
        return None
    ts = sp.delivery_timestamp
    return ts.seconds * 1000 + ts.nanos // 1_000_000


def build_properties(message: pb.Message, producer_group: str, remote_addr: str,
                     delay_levels: dict[int, int] | None, now_ms: int | None = None
                     ) -> dict[str, str]:
    """The broker properties of a 5.x message, with 5.3.3's checks.

    ``delay_levels`` (level -> ms) set: a delivery time is also sent as the 4.x
    delay level nearest at or above it (``useDelayLevel``)."""
    sp = message.system_properties
    props, size = _user_properties(dict(message.user_properties))
    tag = sp.tag if sp.HasField("tag") else ""
    _check_tag(tag)
    if tag:
        props[mc.PROPERTY_TAGS] = tag
    size += len(tag.encode())
    for key in sp.keys:
        _check_key(key)
        size += len(key.encode())
    if sp.keys:
        props[mc.PROPERTY_KEYS] = mc.KEY_SEPARATOR.join(sp.keys)
    if size > MAX_USER_PROPERTY_SIZE:
        raise ProxyError(Code.MESSAGE_PROPERTIES_TOO_LARGE,
                         f"the total size of user property is too large, max is "
                         f"{MAX_USER_PROPERTY_SIZE}")
    if not sp.message_id.strip():
        raise ProxyError(Code.ILLEGAL_MESSAGE_ID, "message id cannot be empty")
    props[mc.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX] = sp.message_id
    if sp.message_type == pb.TRANSACTION:
        props[mc.PROPERTY_TRANSACTION_PREPARED] = "true"
        if sp.HasField("orphaned_transaction_recovery_duration"):
            seconds = sp.orphaned_transaction_recovery_duration.seconds
            if seconds > MAX_TRANSACTION_RECOVERY_SECOND:
                raise ProxyError(Code.BAD_REQUEST,
                                 f"the max transaction recovery time of message is too large, "
                                 f"max is {MAX_TRANSACTION_RECOVERY_SECOND}")
            props[mc.PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS] = str(seconds)
    deliver = delivery_ms(message)
    if deliver is not None:
        now_ms = int(time.time() * 1000) if now_ms is None else now_ms
        if deliver - now_ms > MAX_DELAY_TIME_MS:
            raise ProxyError(Code.ILLEGAL_DELIVERY_TIME,
                             f"the max delay time of message is too large, max is "
                             f"{MAX_DELAY_TIME_MS}")
        if delay_levels:
            props[mc.PROPERTY_DELAY_TIME_LEVEL] = str(delay_level(deliver - now_ms, delay_levels))
        props[PROPERTY_TIMER_DELIVER_MS] = str(deliver)
    props[mc.PROPERTY_RECONSUME_TIME] = str(sp.delivery_attempt)
    props[mc.PROPERTY_PRODUCER_GROUP] = producer_group
    if sp.HasField("message_group") and sp.message_group:
        _check_group(sp.message_group)
        props[PROPERTY_SHARDING_KEY] = sp.message_group
    if sp.HasField("trace_context") and sp.trace_context:
        props[PROPERTY_TRACE_CONTEXT] = sp.trace_context
    born_host = sp.born_host if sp.born_host.strip() else remote_addr
    if born_host.strip():
        props[PROPERTY_BORN_HOST] = born_host
    if sp.HasField("born_timestamp"):
        ts = sp.born_timestamp
        props[PROPERTY_BORN_TIMESTAMP] = str(ts.seconds * 1000 + ts.nanos // 1_000_000)
    return props


def sys_flag_of(message: pb.Message) -> int:
    flag = 0
    if message.system_properties.body_encoding == pb.GZIP:
        flag |= mc.COMPRESSED_FLAG
    if message.system_properties.message_type == pb.TRANSACTION:
        flag |= mc.TRANSACTION_PREPARED_TYPE
    return flag


def delay_level(interval_ms: int, levels: dict[int, int]) -> int:
    """``ProxyConfig.computeDelayLevel``: the first level (by delay) longer than
    the interval, else the longest."""
    ordered = sorted(levels.items(), key=lambda kv: kv[1])
    for level, ms in ordered:
        if ms > interval_ms:
            return level
    return ordered[-1][0]


_M64 = (1 << 64) - 1


def consistent_hash(key: int, buckets: int) -> int:
    """Guava's ``Hashing.consistentHash(long, int)`` (its linear congruential walk)."""
    state = key & _M64
    candidate = 0
    while True:
        state = (2862933555777941757 * state + 1) & _M64
        high = (state >> 33) & 0xFFFFFFFF
        high = high - (1 << 32) if high & 0x80000000 else high
        nxt = int((candidate + 1) / ((high + 1) / 2147483648.0))
        if 0 <= nxt < buckets:
            candidate = nxt
        else:
            return candidate


def group_queue(group: str, queue_ids: Iterable[int]) -> int:
    """The write queue of a message group: ``consistentHash(group.hashCode(), n)``."""
    ids = list(queue_ids)
    return ids[consistent_hash(java_string_hash(group), len(ids))]


def _timestamp(ms: int):
    from google.protobuf.timestamp_pb2 import Timestamp

    return Timestamp(seconds=ms // 1000, nanos=(ms % 1000) * 1_000_000)


def proto_type_of(props: dict[str, str]) -> int:
    """The 5.x type 5.3.3's ``GrpcConverter`` reports for a stored message."""
    if props.get(mc.PROPERTY_TRANSACTION_PREPARED) == "true":
        return pb.TRANSACTION
    if any(k in props for k in (mc.PROPERTY_DELAY_TIME_LEVEL, PROPERTY_TIMER_DELIVER_MS,
                                PROPERTY_TIMER_DELAY_SEC, PROPERTY_TIMER_DELAY_MS)):
        return pb.DELAY
    if PROPERTY_SHARDING_KEY in props:
        return pb.FIFO
    return pb.NORMAL


def to_proto_message(msg, receipt_handle: str = "") -> pb.Message:
    """A stored message (``MessageExt``) as a 5.x client receives it (5.3.3's
    ``GrpcConverter.buildMessage``): user properties are those that are not
    system names; the digest is MD5 upper-case hex of the body as stored."""
    import hashlib

    props = msg.properties
    sp = pb.SystemProperties(
        message_id=props.get(mc.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX, msg.msg_id),
        body_digest=pb.Digest(type=pb.MD5, checksum=hashlib.md5(msg.body).hexdigest().upper()),
        body_encoding=pb.GZIP if msg.sys_flag & mc.COMPRESSED_FLAG else pb.IDENTITY,
        message_type=proto_type_of(props),
        born_timestamp=_timestamp(msg.born_timestamp),
        born_host=props.get(PROPERTY_BORN_HOST) or msg.born_host[0],
        store_host=f"{msg.store_host[0]}:{msg.store_host[1]}",
        queue_id=msg.queue_id, queue_offset=msg.queue_offset,
        delivery_attempt=msg.reconsume_times + 1,
    )
    if msg.store_timestamp:
        sp.store_timestamp.CopyFrom(_timestamp(msg.store_timestamp))
    if props.get(mc.PROPERTY_TAGS):
        sp.tag = props[mc.PROPERTY_TAGS]
    if props.get(mc.PROPERTY_KEYS):
        sp.keys.extend(k for k in props[mc.PROPERTY_KEYS].split(mc.KEY_SEPARATOR) if k)
    if props.get(PROPERTY_SHARDING_KEY):
        sp.message_group = props[PROPERTY_SHARDING_KEY]
    if props.get(PROPERTY_TIMER_DELIVER_MS, "").isdigit():
        sp.delivery_timestamp.CopyFrom(_timestamp(int(props[PROPERTY_TIMER_DELIVER_MS])))
    if props.get(PROPERTY_TRACE_CONTEXT):
        sp.trace_context = props[PROPERTY_TRACE_CONTEXT]
    if receipt_handle:
        sp.receipt_handle = receipt_handle
    user = {k: v for k, v in props.items() if k not in SYSTEM_PROPERTY_NAMES
            and k not in (PROPERTY_SHARDING_KEY, PROPERTY_TRACE_CONTEXT)}
    return pb.Message(topic=pb.Resource(name=msg.topic), user_properties=user,
                      system_properties=sp, body=msg.body)
