"""Request/reply over a broker (4.9.8's ``DefaultMQProducer.request`` and
``MessageUtil.createReplyMessage``).

The requester stamps CORRELATION_ID, REPLY_TO_CLIENT (its client id) and TTL
and sends as usual.  The responder consumes the request and sends a reply
made by ``create_reply_message`` to ``<cluster>_REPLY_TOPIC``; the producer
sees MSG_TYPE=reply and uses SEND_REPLY_MESSAGE_V2, and the broker pushes
the reply to the requester's connection with PUSH_REPLY_MESSAGE_TO_CLIENT.
The requester's instance matches it to the waiting request by correlation id.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable

from rmq.client.codec import decompress_body, parse_properties
from rmq.client.exceptions import MQClientError
from rmq.client.message import Message, MessageExt
from rmq.common import message as mc
from rmq.common.message import COMPRESSED_FLAG
from rmq.common.protocol.headers_broker import ReplyMessageRequestHeader
from rmq.common.topics import REPLY_TOPIC_POSTFIX

log = logging.getLogger("rmq.client")

REPLY_MESSAGE_FLAG = "reply"
# ClientErrorCode of 4.9.8
CREATE_REPLY_MESSAGE_EXCEPTION = 10007
REQUEST_TIMEOUT_EXCEPTION = 10006

RequestCallback = Callable[[MessageExt | None, BaseException | None], None]


class RequestTimeoutError(MQClientError):
    """The request was sent but no reply came in time (``RequestTimeoutException``)."""


def create_reply_message(request: Message, body: bytes) -> Message:
    """The reply to ``request`` (a message consumed by the responder): addressed
    to its cluster's reply topic, carrying its correlation id, requester and TTL."""
    props = request.properties
    cluster = props.get(mc.PROPERTY_CLUSTER)
    if cluster is None:
        raise MQClientError(CREATE_REPLY_MESSAGE_EXCEPTION,
                            f"create reply message fail, requestMessage error, "
                            f"property[{mc.PROPERTY_CLUSTER}] is null.")
    reply = Message(cluster + REPLY_TOPIC_POSTFIX, body)
    reply.properties[mc.PROPERTY_MESSAGE_TYPE] = REPLY_MESSAGE_FLAG
    for key in (mc.PROPERTY_CORRELATION_ID, mc.PROPERTY_MESSAGE_REPLY_TO_CLIENT, mc.PROPERTY_MESSAGE_TTL):
        if key in props:
            reply.properties[key] = props[key]
    return reply


def is_reply(msg: Message) -> bool:
    return msg.properties.get(mc.PROPERTY_MESSAGE_TYPE) == REPLY_MESSAGE_FLAG


def stamp_request(msg: Message, client_id: str, timeout_ms: int) -> str:
    """Mark ``msg`` as a request of this client; its correlation id."""
    correlation_id = str(uuid.uuid4())
    msg.properties[mc.PROPERTY_CORRELATION_ID] = correlation_id
    msg.properties[mc.PROPERTY_MESSAGE_REPLY_TO_CLIENT] = client_id
    msg.properties[mc.PROPERTY_MESSAGE_TTL] = str(timeout_ms)
    return correlation_id


class RequestFutures:
    """Requests of one client instance waiting for their reply, by correlation id
    (``RequestFutureHolder``)."""

    def __init__(self) -> None:
        self._pending: dict[str, asyncio.Future] = {}

    def __len__(self) -> int:
        return len(self._pending)

    def add(self, correlation_id: str) -> asyncio.Future:
        fut = self._pending[correlation_id] = asyncio.get_running_loop().create_future()
        return fut

    def discard(self, correlation_id: str) -> None:
        self._pending.pop(correlation_id, None)

    def on_reply(self, msg: MessageExt) -> bool:
        """Complete the request ``msg`` answers; False when none waits for it."""
        correlation_id = msg.properties.get(mc.PROPERTY_CORRELATION_ID, "")
        fut = self._pending.pop(correlation_id, None)
        if fut is None:
            log.warning("receive reply message, but not matched any request, CorrelationId: %s",
                        correlation_id)
            return False
        if not fut.done():
            fut.set_result(msg)
        return True


def reply_message(header: ReplyMessageRequestHeader, body: bytes | None) -> MessageExt:
    """The MessageExt of a PUSH_REPLY_MESSAGE_TO_CLIENT request."""
    msg = MessageExt()
    msg.topic = header.topic
    msg.queue_id = header.queueId
    msg.store_timestamp = header.storeTimestamp
    msg.born_host = header.bornHost or ""
    msg.store_host = header.storeHost or ""
    msg.sys_flag = header.sysFlag
    msg.body = decompress_body(body or b"", header.sysFlag) if header.sysFlag & COMPRESSED_FLAG \
        else (body or b"")
    msg.flag = header.flag
    msg.properties = parse_properties(header.properties or "")
    msg.properties[mc.PROPERTY_REPLY_MESSAGE_ARRIVE_TIME] = str(time.time_ns() // 1_000_000)
    msg.born_timestamp = header.bornTimestamp
    msg.reconsume_times = header.reconsumeTimes or 0
    msg.msg_id = msg.properties.get(mc.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX, "")
    return msg
