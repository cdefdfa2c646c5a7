"""TransactionalMessageBridge: what the transaction service needs from the
store and the broker's managers (``TransactionalMessageBridge`` of 4.9.8).

Half messages live in ``RMQ_SYS_TRANS_HALF_TOPIC``, op records (one per ended
half message, tag ``d``, body = the half message's queue offset) in
``RMQ_SYS_TRANS_OP_HALF_TOPIC``; the check reads both through the store like
a consumer of the internal group ``CID_RMQ_SYS_TRANS`` whose offsets sit in
consumerOffset.json.  The message builders reproduce 4.9.8's stored bytes,
quirks included (../shared/spec/STORE_FORMAT.md 13): the properties map is
shared between the message read and the one written, and WAIT/UNIQ_KEY enter
the map after the stored string was generated.
"""

from __future__ import annotations

import enum
import logging
import time
from dataclasses import dataclass
from typing import Any

from rmq.common import message as mc
from rmq.common import topics as T
from rmq.common.logging import TRANSACTION_LOGGER_NAME
from rmq.common.message_id import create_uniq_id
from rmq.store import (
    GetMessageStatus,
    MessageExt,
    MessageExtBrokerInner,
    PutMessageResult,
    PutMessageStatus,
)
from rmq.store.message_codec import decode_message, message_properties_to_string

log = logging.getLogger(TRANSACTION_LOGGER_NAME)

HALF_TOPIC = T.TRANS_HALF_TOPIC
OP_TOPIC = T.TRANS_OP_HALF_TOPIC
CONSUMER_GROUP = T.TRANS_SYS_CONSUMER_GROUP
REMOVE_TAG = "d"
_RW = mc.PERM_READ | mc.PERM_WRITE


class PullStatus(enum.Enum):
    FOUND = "FOUND"
    NO_NEW_MSG = "NO_NEW_MSG"
    NO_MATCHED_MSG = "NO_MATCHED_MSG"
    OFFSET_ILLEGAL = "OFFSET_ILLEGAL"


_PULL_STATUS = {
    GetMessageStatus.FOUND: PullStatus.FOUND,
    GetMessageStatus.NO_MATCHED_MESSAGE: PullStatus.NO_MATCHED_MSG,
    GetMessageStatus.NO_MESSAGE_IN_QUEUE: PullStatus.NO_NEW_MSG,
    GetMessageStatus.OFFSET_OVERFLOW_ONE: PullStatus.NO_NEW_MSG,
}


@dataclass(slots=True)
class PullResult:
    """A read of the half or op queue; ``msg_found_list`` is None unless
    messages were found (the check tells "no op messages" by it)."""

    status: PullStatus
    next_begin_offset: int
    min_offset: int
    max_offset: int
    msg_found_list: list[MessageExt] | None = None


def parse_half_message_inner(msg: MessageExtBrokerInner) -> MessageExtBrokerInner:
    """``parseHalfMessageInner``: park a prepared message in the half topic,
    queue 0, with its real topic/queue saved and the transaction bits reset."""
    props = msg.properties
    props[mc.PROPERTY_REAL_TOPIC] = msg.topic
    props[mc.PROPERTY_REAL_QUEUE_ID] = str(msg.queue_id)
    msg.sys_flag = mc.reset_transaction_value(msg.sys_flag, mc.TRANSACTION_NOT_TYPE)
    msg.topic = HALF_TOPIC
    msg.queue_id = 0
    msg.properties_string = message_properties_to_string(props)
    return msg


def _tags_code(tags: str | None) -> int:
    return mc.tags_string_to_code(tags) if tags else 0


def renew_half_message_inner(msg: MessageExt) -> MessageExtBrokerInner:
    """``renewHalfMessageInner``: the copy of a half message put back into the
    half topic by a check.  As in 4.9.8 the flag and reconsume times are not
    copied, and WAIT=false enters the (shared) map after the string."""
    props = msg.properties
    inner = MessageExtBrokerInner(
        msg.topic, msg.queue_id, 0, msg.body, props, message_properties_to_string(props),
        _tags_code(msg.tags), msg.sys_flag, msg.born_timestamp, msg.born_host, msg.store_host)
    props[mc.PROPERTY_WAIT_STORE_MSG_OK] = "false"
    return inner


def renew_immunity_half_message_inner(msg: MessageExt) -> MessageExtBrokerInner:
    """``renewImmunityHalfMessageInner``: the put-back copy of a half message
    still inside its immunity time, remembering the queue offset of the first
    copy in TRAN_PREPARED_QUEUE_OFFSET."""
    inner = renew_half_message_inner(msg)
    first = msg.properties.get(mc.PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET)
    inner.properties[mc.PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET] = \
        first if first is not None else str(msg.queue_offset)
    inner.properties_string = message_properties_to_string(inner.properties)
    return inner


def discard_message_inner(msg: MessageExt, queue_id: int) -> MessageExtBrokerInner:
    """``toMessageExtBrokerInner`` of the default check listener: a half
    message checked too often, for TRANS_CHECK_MAX_TIME_TOPIC."""
    props = msg.properties
    inner = MessageExtBrokerInner(
        T.TRANS_CHECK_MAX_TIME_TOPIC, queue_id, msg.flag, msg.body, props,
        message_properties_to_string(props), _tags_code(msg.tags), msg.sys_flag,
        msg.born_timestamp, msg.born_host, msg.store_host, 0, msg.reconsume_times)
    props[mc.PROPERTY_WAIT_STORE_MSG_OK] = "false"
    return inner


def op_message_inner(half: MessageExt, store_host: tuple[str, int]) -> MessageExtBrokerInner:
    """``makeOpMessageInner`` for a remove op: tag ``d``, body = the half
    message's queue offset in decimal, born/store host = the broker.  The
    stored string is that of ``new Message(topic, "d", body)`` (TAGS and
    WAIT=true); WAIT=false and a fresh UNIQ_KEY reach the map only."""
    props = {mc.PROPERTY_TAGS: REMOVE_TAG, mc.PROPERTY_WAIT_STORE_MSG_OK: "true"}
    text = message_properties_to_string(props)
    props[mc.PROPERTY_WAIT_STORE_MSG_OK] = "false"
    props[mc.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX] = create_uniq_id()
    return MessageExtBrokerInner(
        OP_TOPIC, half.queue_id, 0, str(half.queue_offset).encode(), props, text,
        _tags_code(REMOVE_TAG), 0, time.time_ns() // 1_000_000, store_host, store_host)


class TransactionalMessageBridge:
    def __init__(self, controller: Any) -> None:
        self.c = controller
        self.store = controller.message_store
        self.store_host: tuple[str, int] = (controller.broker_config.brokerIP1,
                                            controller.server_config.listenPort)

    # ---- offsets and queues --------------------------------------------------------
    def fetch_consume_offset(self, topic: str, queue_id: int) -> int:
        """The internal group's committed offset, else the queue's minimum."""
        offset = self.c.consumer_offset_manager.query_offset(CONSUMER_GROUP, topic, queue_id)
        if offset == -1:
            # 4.9.8 creates a missing consume queue here (minimum 0); the
            # store's -1 says the queue does not exist yet
            offset = max(0, self.store.get_min_offset_in_queue(topic, queue_id))
        return offset

    def update_consume_offset(self, topic: str, queue_id: int, offset: int) -> None:
        self.c.consumer_offset_manager.commit_offset(
            f"{self.store_host[0]}:{self.store_host[1]}", CONSUMER_GROUP, topic, queue_id, offset)

    def fetch_message_queues(self, topic: str) -> list[int]:
        """Queue ids of ``topic`` (its config auto-created with one queue, perm 6)."""
        topics = self.c.topic_config_manager
        tc = topics.select_topic_config(topic)
        if tc is None:
            tc = topics.create_topic_in_send_message_back_method(topic, 1, _RW, 0)
        return list(range(tc.readQueueNums)) if tc.readQueueNums > 0 else []

    # ---- reads -------------------------------------------------------------------------
    def get_half_message(self, queue_id: int, offset: int, nums: int) -> PullResult | None:
        return self._get_message(HALF_TOPIC, queue_id, offset, nums)

    def get_op_message(self, queue_id: int, offset: int, nums: int) -> PullResult | None:
        return self._get_message(OP_TOPIC, queue_id, offset, nums)

    def _get_message(self, topic: str, queue_id: int, offset: int, nums: int
                     ) -> PullResult | None:
        got = self.store.get_message(CONSUMER_GROUP, topic, queue_id, offset, nums)
        if got is None:
            log.error("Get message from store return null. topic=%s, groupId=%s, "
                      "requestOffset=%d", topic, CONSUMER_GROUP, offset)
            return None
        try:
            status = _PULL_STATUS.get(got.status, PullStatus.OFFSET_ILLEGAL)
            found = None
            if status is PullStatus.FOUND:
                found = [m for m in map(_decode, got.message_buffers) if m is not None] or None
            elif status is not PullStatus.NO_NEW_MSG:
                log.warning("%s getting %s@%s from %d: %s", status.name, topic, CONSUMER_GROUP,
                            offset, got.status.name)
            return PullResult(status, got.next_begin_offset, got.min_offset, got.max_offset,
                              found)
        finally:
            got.release()

    def look_message_by_offset(self, commit_log_offset: int) -> MessageExt | None:
        return self.store.look_message_by_offset(commit_log_offset)

    # ---- writes ------------------------------------------------------------------------
    async def put_message_return_result(self, msg: MessageExtBrokerInner) -> PutMessageResult:
        return await self.store.async_put_message(msg)

    async def put_message(self, msg: MessageExtBrokerInner) -> bool:
        result = await self.store.async_put_message(msg)
        if result is not None and result.status is PutMessageStatus.PUT_OK:
            return True
        log.error("Put message failed, topic: %s, queueId: %d, status: %s", msg.topic,
                  msg.queue_id, result.status.name if result is not None else None)
        return False

    async def put_half_message(self, msg: MessageExtBrokerInner) -> PutMessageResult:
        return await self.store.async_put_message(parse_half_message_inner(msg))

    async def put_op_message(self, half: MessageExt) -> bool:
        """The remove op that marks ``half`` as ended."""
        return await self.put_message(op_message_inner(half, self.store_host))


def _decode(view) -> MessageExt | None:
    try:
        return decode_message(view)
    except ValueError as exc:
        log.warning("undecodable record in a transaction queue: %s", exc)
        return None
