"""EndTransactionProcessor: END_TRANSACTION (../shared/spec/PROTOCOL.md 3.2.5,
STORE_FORMAT.md 13).

A commit re-stores the half message under its real topic and queue with the
COMMIT transaction bits and the half message's offset as prepared offset,
then writes an op record; a rollback writes only the op record.  Finding the
half message and writing the op record belong to the broker's
TransactionalMessageService (``rmq.broker.transaction``), which also
back-checks half messages nobody ends.  State 0 (UNKNOW) is only logged: the
back-check will ask again.
"""

from __future__ import annotations

from typing import Any

from rmq.broker.processor.send_support import TIMER_STATUSES, timer_failure
from rmq.broker.transaction.service import OperationResult
from rmq.common import message as mc
from rmq.common.codes import ResponseCode
from rmq.common.protocol.headers_broker import EndTransactionRequestHeader
from rmq.remoting import Channel, RemotingCommand
from rmq.store import MessageExt, MessageExtBrokerInner, PutMessageResult, PutMessageStatus
from rmq.store.message_codec import message_properties_to_string

RC = ResponseCode
_STORED = (PutMessageStatus.PUT_OK, PutMessageStatus.FLUSH_DISK_TIMEOUT,
           PutMessageStatus.FLUSH_SLAVE_TIMEOUT, PutMessageStatus.SLAVE_NOT_AVAILABLE)
_ENDS = (mc.TRANSACTION_COMMIT_TYPE, mc.TRANSACTION_ROLLBACK_TYPE)


def _response(code: int, remark: str | None = None) -> RemotingCommand:
    return RemotingCommand.create_response(code, remark)


def check_prepare_message(half: MessageExt | None, h: EndTransactionRequestHeader
                          ) -> RemotingCommand:
    """``checkPrepareMessage``: the request must name the half message exactly."""
    if half is None:
        return _response(RC.SYSTEM_ERROR, "Find prepared transaction message failed")
    if half.properties.get(mc.PROPERTY_PRODUCER_GROUP) != h.producerGroup:
        return _response(RC.SYSTEM_ERROR, "The producer group wrong")
    if half.queue_offset != h.tranStateTableOffset:
        return _response(RC.SYSTEM_ERROR, "The transaction state table offset wrong")
    if half.commit_log_offset != h.commitLogOffset:
        return _response(RC.SYSTEM_ERROR, "The commit log offset wrong")
    return _response(RC.SUCCESS)


def end_message_transaction(half: MessageExt, h: EndTransactionRequestHeader
                            ) -> MessageExtBrokerInner:
    """``endMessageTransaction``: the committed copy.  The stored string is
    the half message's (4.9.8 generates it before REAL_TOPIC/REAL_QID/TRAN_MSG
    leave the map, and its WAIT=false is lost when the map is replaced)."""
    props = half.properties
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
        half.born_timestamp, half.born_host, half.store_host, half.store_timestamp,
        half.reconsume_times, h.commitLogOffset)


def send_final_response(result: PutMessageResult | None, max_message_size: int,
                        store_config: Any = None) -> RemotingCommand:
    """``sendFinalMessage``'s answer for the put of the committed copy
    (``store_config`` words a refused timer message as 5.3.3 does)."""
    if result is None:
        return _response(RC.SYSTEM_ERROR, "store putMessage return null")
    status = result.status
    if status in _STORED:
        return _response(RC.SUCCESS)
    if status is PutMessageStatus.CREATE_MAPEDFILE_FAILED:
        return _response(RC.SYSTEM_ERROR, "Create mapped file failed.")
    if status in (PutMessageStatus.MESSAGE_ILLEGAL, PutMessageStatus.PROPERTIES_SIZE_EXCEEDED):
        return _response(RC.MESSAGE_ILLEGAL,
                         "The message is illegal, maybe msg body or properties length not "
                         f"matched. msg body length limit {max_message_size}B, msg properties "
                         "length limit 32KB.")
    if status is PutMessageStatus.SERVICE_NOT_AVAILABLE:
        return _response(RC.SERVICE_NOT_AVAILABLE, "Service not available now.")
    if status is PutMessageStatus.OS_PAGECACHE_BUSY:
        return _response(RC.SYSTEM_ERROR, "OS page cache busy, please try another machine")
    if status is PutMessageStatus.UNKNOWN_ERROR:
        return _response(RC.SYSTEM_ERROR, "UNKNOWN_ERROR")
    if status in TIMER_STATUSES and store_config is not None:
        return _response(*timer_failure(status, store_config))
    return _response(RC.SYSTEM_ERROR, "UNKNOWN_ERROR DEFAULT")


class EndTransactionProcessor:
    def __init__(self, controller: Any) -> None:
        self.c = controller
        self.log = controller.log

    def reject_request(self) -> bool:
        return False

    def process_request(self, channel: Channel, request: RemotingCommand) -> Any:
        h = request.decode_header(EndTransactionRequestHeader)
        if self.c.is_slave():
            self.log.warning("Message store is slave mode, so end transaction is forbidden.")
            return _response(RC.SLAVE_NOT_AVAILABLE)
        kind = h.commitOrRollback
        if kind not in _ENDS:
            if kind == mc.TRANSACTION_NOT_TYPE:
                self.log.warning("The producer[%s] ends transaction %s%s in pending status. "
                                 "Remark: %s", channel.remote_addr, h.msgId,
                                 " (check answer)" if h.fromTransactionCheck else "",
                                 request.remark)
            return None
        if h.fromTransactionCheck or kind == mc.TRANSACTION_ROLLBACK_TYPE:
            self.log.warning("The producer[%s] %s transaction %s%s. Remark: %s",
                             channel.remote_addr,
                             "commits" if kind == mc.TRANSACTION_COMMIT_TYPE else "rolls back",
                             h.msgId, " (check answer)" if h.fromTransactionCheck else "",
                             request.remark)
        return self._end(h)

    async def _end(self, h: EndTransactionRequestHeader) -> RemotingCommand:
        service = self.c.transactional_message_service
        if h.commitOrRollback == mc.TRANSACTION_COMMIT_TYPE:
            found: OperationResult = service.commit_message(h)
        else:
            found = service.rollback_message(h)
        if found.response_code != RC.SUCCESS:
            return _response(found.response_code, found.response_remark)
        half = found.prepare_message
        checked = check_prepare_message(half, h)
        if checked.code != RC.SUCCESS:
            return checked
        topic = half.properties.get(mc.PROPERTY_REAL_TOPIC, half.topic)
        if h.commitOrRollback == mc.TRANSACTION_ROLLBACK_TYPE:
            await service.delete_prepare_message(half)
            self.c.stats.inc_end_transaction(topic, False)
            return checked
        final = end_message_transaction(half, h)
        response = send_final_response(await self.c.message_store.async_put_message(final),
                                       self.c.store_config.maxMessageSize, self.c.store_config)
        if response.code == RC.SUCCESS:
            await service.delete_prepare_message(half)
            self.c.stats.inc_end_transaction(topic, True)
        return response
