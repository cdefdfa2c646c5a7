"""EndTransactionProcessor: END_TRANSACTION (../shared/spec/PROTOCOL.md 3.2.5,
STORE_FORMAT.md 13).

A commit re-stores the half message under its real topic and queue with the
COMMIT transaction bits and the half message's offset as prepared offset,
then writes an op record; a rollback writes only the op record.  The
back-check of undecided half messages (CHECK_TRANSACTION_STATE) is not part
of this broker: a half message nobody ends stays invisible.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from rmq.common import message as mc
from rmq.common import topics as T
from rmq.common.codes import ResponseCode
from rmq.common.message_id import create_uniq_id
from rmq.remoting import Channel, RemotingCommand
from rmq.remoting.header import CommandHeader, field_required
from rmq.store import MessageExt, MessageExtBrokerInner, PutMessageStatus
from rmq.store.message_codec import message_properties_to_string

RC = ResponseCode
REMOVE_TAG = "d"
_STORED = (PutMessageStatus.PUT_OK, PutMessageStatus.FLUSH_DISK_TIMEOUT,
           PutMessageStatus.FLUSH_SLAVE_TIMEOUT, PutMessageStatus.SLAVE_NOT_AVAILABLE)


@dataclass(slots=True)
class EndTransactionRequestHeader(CommandHeader):
    producerGroup: str = field_required()
    tranStateTableOffset: int = field_required()
    commitLogOffset: int = field_required()
    commitOrRollback: int = field_required()
    fromTransactionCheck: bool = False
    msgId: str = field_required()
    transactionId: str | None = None
    bname: str | None = None


def _response(code: int, remark: str | None = None) -> RemotingCommand:
    return RemotingCommand.create_response(code, remark)


class EndTransactionProcessor:
    def __init__(self, controller: Any) -> None:
        self.c = controller

    def process_request(self, channel: Channel, request: RemotingCommand
                        ) -> RemotingCommand | None:
        h = request.decode_header(EndTransactionRequestHeader)
        if self.c.is_slave():
            self.c.log.warning("Message store is slave mode, so end transaction is forbidden.")
            return _response(RC.SLAVE_NOT_AVAILABLE)
        kind = h.commitOrRollback
        if kind not in (mc.TRANSACTION_COMMIT_TYPE, mc.TRANSACTION_ROLLBACK_TYPE):
            return None
        half = self.c.message_store.look_message_by_offset(h.commitLogOffset)
        if half is None:
            return _response(RC.SYSTEM_ERROR, "Find prepared transaction message failed")
        error = self._check(half, h)
        if error is not None:
            return error
        if kind == mc.TRANSACTION_ROLLBACK_TYPE:
            self._put_op(half)
            return _response(RC.SUCCESS)
        final = self._final_message(half, h)
        result = self.c.message_store.put_message(final)
        if result is None or result.status not in _STORED:
            name = result.status.name if result is not None else "null"
            return _response(RC.SYSTEM_ERROR, f"store putMessage return {name}")
        self._put_op(half)
        return _response(RC.SUCCESS)

    @staticmethod
    def _check(half: MessageExt, h: EndTransactionRequestHeader) -> RemotingCommand | None:
        if half.properties.get(mc.PROPERTY_PRODUCER_GROUP) != h.producerGroup:
            return _response(RC.SYSTEM_ERROR, "The producer group wrong")
        if half.queue_offset != h.tranStateTableOffset:
            return _response(RC.SYSTEM_ERROR, "The transaction state table offset wrong")
        if half.commit_log_offset != h.commitLogOffset:
            return _response(RC.SYSTEM_ERROR, "The commit log offset wrong")
        return None

    @staticmethod
    def _final_message(half: MessageExt, h: EndTransactionRequestHeader
                       ) -> MessageExtBrokerInner:
        """``endMessageTransaction``: the stored string is generated before
        REAL_TOPIC/REAL_QID/TRAN_MSG leave the map (4.9.8 quirk)."""
        props = dict(half.properties)
        props[mc.PROPERTY_WAIT_STORE_MSG_OK] = "false"
        text = message_properties_to_string(props)
        topic = props.pop(mc.PROPERTY_REAL_TOPIC, half.topic)
        try:
            queue_id = int(props.pop(mc.PROPERTY_REAL_QUEUE_ID, "0"))
        except ValueError:
            queue_id = 0
        props.pop(mc.PROPERTY_TRANSACTION_PREPARED, None)
        tags = props.get(mc.PROPERTY_TAGS)
        return MessageExtBrokerInner(
            topic, queue_id, half.flag, half.body, props, text,
            mc.tags_string_to_code(tags) if tags else 0,
            mc.reset_transaction_value(half.sys_flag, h.commitOrRollback),
            half.born_timestamp, half.born_host, half.store_host, 0, half.reconsume_times,
            h.commitLogOffset)

    def _put_op(self, half: MessageExt) -> None:
        """The op record that marks the half message as finished."""
        props = {mc.PROPERTY_TAGS: REMOVE_TAG,
                 mc.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX: create_uniq_id()}
        text = message_properties_to_string(props)
        props[mc.PROPERTY_WAIT_STORE_MSG_OK] = "false"
        host = self.c.message_store.store_host
        op = MessageExtBrokerInner(
            T.TRANS_OP_HALF_TOPIC, half.queue_id, 0, str(half.queue_offset).encode(), props,
            text, mc.tags_string_to_code(REMOVE_TAG), 0, time.time_ns() // 1_000_000, host,
            host)
        self.c.message_store.put_message(op)
