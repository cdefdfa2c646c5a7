"""What the back-check does with a half message (4.9.8's
``AbstractTransactionalMessageCheckListener`` and its default subclass):
ask one producer of the message's group for its state
(CHECK_TRANSACTION_STATE, oneway), or discard a message checked too often
into TRANS_CHECK_MAX_TIME_TOPIC.

The check request goes to one live connection of the producer group, chosen
round-robin as ``ProducerManager.getAvailableChannel`` does; the body is the
half message in stored-message format with its real topic and queue id
(../shared/spec/PROTOCOL.md 3.2.6).
"""

from __future__ import annotations

import logging
import random
from typing import Any

from rmq.broker.transaction.bridge import discard_message_inner
from rmq.common import message as mc
from rmq.common.codes import RequestCode
from rmq.common.logging import TRANSACTION_LOGGER_NAME
from rmq.common.protocol.headers_broker import CheckTransactionStateRequestHeader
from rmq.remoting import RemotingCommand
from rmq.remoting.exceptions import RemotingError
from rmq.store import MessageExt, PutMessageStatus
from rmq.store.message_codec import encode_message

log = logging.getLogger(TRANSACTION_LOGGER_NAME)

TCMT_QUEUE_NUMS = 1  # queues of TRANS_CHECK_MAX_TIME_TOPIC
_RW = mc.PERM_READ | mc.PERM_WRITE


def check_request(msg: MessageExt) -> RemotingCommand:
    """CHECK_TRANSACTION_STATE for the half message ``msg`` as put back by the
    check (its queue/commit-log offsets and offset id are the new copy's).
    ``msg`` is turned into what the producer sees: real topic and queue id,
    store size 0 (recomputed by the encoding).  ValueError when the real
    queue id is not a number."""
    props = msg.properties
    uniq = props.get(mc.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
    header = CheckTransactionStateRequestHeader(
        tranStateTableOffset=msg.queue_offset, commitLogOffset=msg.commit_log_offset,
        msgId=uniq, transactionId=uniq, offsetMsgId=msg.msg_id)
    msg.topic = props.get(mc.PROPERTY_REAL_TOPIC) or ""
    msg.queue_id = int(props.get(mc.PROPERTY_REAL_QUEUE_ID, ""))
    msg.store_size = 0
    return RemotingCommand.create_request(RequestCode.CHECK_TRANSACTION_STATE, header,
                                          encode_message(msg))


class TransactionalMessageCheckListener:
    def __init__(self, controller: Any) -> None:
        self.c = controller

    def resolve_half_msg(self, msg: MessageExt) -> None:
        """Ask a producer of the message's group to end it (oneway)."""
        group = msg.properties.get(mc.PROPERTY_PRODUCER_GROUP)
        try:
            request = check_request(msg)
        except ValueError:
            log.error("Send check message error: bad %s in %s", mc.PROPERTY_REAL_QUEUE_ID,
                      msg.msg_id)
            return
        channel = self.c.producer_manager.get_available_channel(group)
        if channel is None:
            log.warning("Check transaction failed, channel is null. groupId=%s", group)
            return
        try:
            self.c.server_for(channel).invoke_oneway(channel, request)
        except RemotingError as exc:
            log.error("Check transaction failed because invoke producer exception. group=%s, "
                      "msgId=%s, error=%s", group, msg.msg_id, exc)

    async def resolve_discard_msg(self, msg: MessageExt) -> None:
        """Move a half message checked too often (or older than the files are
        kept) to TRANS_CHECK_MAX_TIME_TOPIC."""
        log.error("MsgExt:%s has been checked too many times, so discard it by moving it to "
                  "system topic TRANS_CHECK_MAXTIME_TOPIC", msg.msg_id)
        self.c.topic_config_manager.create_topic_of_tran_check_max_time(TCMT_QUEUE_NUMS, _RW)
        inner = discard_message_inner(msg, random.randrange(99999999) % TCMT_QUEUE_NUMS)
        result = await self.c.message_store.async_put_message(inner)
        if result is not None and result.status is PutMessageStatus.PUT_OK:
            log.info("Put checked-too-many-time half message to TRANS_CHECK_MAXTIME_TOPIC OK. "
                     "Restored in queueOffset=%d, commitLogOffset=%d, real topic=%s",
                     msg.queue_offset, msg.commit_log_offset,
                     msg.properties.get(mc.PROPERTY_REAL_TOPIC))
        else:
            log.error("Put checked-too-many-time half message to TRANS_CHECK_MAXTIME_TOPIC "
                      "failed, real topic=%s, msgId=%s", msg.topic, msg.msg_id)
