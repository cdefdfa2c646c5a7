"""SendMessage and EndTransaction as broker requests (5.3.3's
``SendMessageActivity``, ``ProducerProcessor``, ``EndTransactionActivity``).

A send becomes SEND_MESSAGE_V2 to this broker's processor: producer group =
topic name, the client's queue choice ignored -- a message group picks its
queue with ``consistentHash(group.hashCode(), n)``, other messages go round
robin over the writable queues.  A delivery time becomes ``TIMER_DELIVER_MS``
(plus the 4.x ``DELAY`` level at or above it with ``useDelayLevel``, or while
the store has no timer wheel).
"""

from __future__ import annotations

import itertools
from typing import Any

from rmq.client.headers import send_header_v2
from rmq.common import timer as tm
from rmq.common.codes import RequestCode
from rmq.common.codes import ResponseCode as RC
from rmq.common.message import (
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_PREPARED_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
    is_writeable,
)
from rmq.common.message_id import decode_message_id
from rmq.common.protocol.headers_broker import SendMessageResponseHeader
from rmq.proxy.clients import ClientRegistry, ClientSession
from rmq.proxy.messages import (
    build_properties,
    check_body,
    check_type,
    group_queue,
    sys_flag_of,
    topic_type_name,
)
from rmq.proxy.route import check_topic
from rmq.proxy.status import Code, ProxyError, code_of_response, status
from rmq.proxy.v2 import definition_pb2 as pb
from rmq.proxy.v2 import service_pb2 as spb
from rmq.store.message_codec import message_properties_to_string

# broker send statuses that are not errors but not SEND_OK either
_SEND_STATUS = {
    RC.FLUSH_DISK_TIMEOUT: (Code.MASTER_PERSISTENCE_TIMEOUT, "FLUSH_DISK_TIMEOUT"),
    RC.FLUSH_SLAVE_TIMEOUT: (Code.SLAVE_PERSISTENCE_TIMEOUT, "FLUSH_SLAVE_TIMEOUT"),
    RC.SLAVE_NOT_AVAILABLE: (Code.HA_NOT_AVAILABLE, "SLAVE_NOT_AVAILABLE"),
}


class ProducerService:
    def __init__(self, controller: Any, clients: ClientRegistry) -> None:
        self.c = controller
        self.clients = clients
        self._round_robin = itertools.count()

    def _write_queue(self, tc: Any, group: str | None) -> int:
        perm = tc.perm & self.c.broker_config.brokerPermission
        if not is_writeable(perm) or tc.writeQueueNums <= 0:
            raise ProxyError(Code.FORBIDDEN, "no writable queue")
        ids = range(tc.writeQueueNums)
        if group:
            return group_queue(group, ids)
        return next(self._round_robin) % tc.writeQueueNums

    def _delay_levels(self) -> dict[int, int] | None:
        """The delay levels to map delivery times to: with ``useDelayLevel``, and
        while the store has no timer wheel (``timerWheelEnable``), so a delayed
        message is held back by the 4.x schedule -- late, never early."""
        store = self.c.store_config
        if self.c.broker_config.useDelayLevel or not getattr(store, "timerWheelEnable", False):
            return store.delay_level_table()
        return None

    async def send(self, s: ClientSession, request: spb.SendMessageRequest
                   ) -> spb.SendMessageResponse:
        if not request.messages:
            raise ProxyError(Code.MESSAGE_CORRUPTED, "no message to send")
        message = request.messages[0]
        topic = message.topic.name
        check_topic(topic)
        if len(request.messages) > 1:
            raise ProxyError(Code.BAD_REQUEST, "rmq takes one message per SendMessage")
        check_body(message.body, self.c.store_config.maxMessageSize)
        delayed = message.system_properties.HasField("delivery_timestamp")
        props = build_properties(message, topic, s.channel.remote_addr,
                                 self._delay_levels() if delayed else None)
        tc = self.c.topic_config_manager.select_topic_config(topic)
        if tc is None:
            raise ProxyError(Code.TOPIC_NOT_FOUND, f"topic not found: {topic}")
        if self.c.broker_config.enableTopicMessageTypeCheck:
            check_type(topic, topic_type_name(getattr(tc, "attributes", None)), props)
        group = message.system_properties.message_group \
            if message.system_properties.HasField("message_group") else None
        queue_id = self._write_queue(tc, group)
        sys_flag = sys_flag_of(message)
        ext = send_header_v2(topic, topic, "TBW102", 4, queue_id, sys_flag,
                             int(props.get("BORN_TIMESTAMP", "0") or 0), 0,
                             message_properties_to_string(props), False,
                             self.c.broker_config.brokerName)
        response = await self.clients.invoker.invoke(s.channel, RequestCode.SEND_MESSAGE_V2, ext,
                                                     message.body, language=s.language)
        return self._answer(response, topic, props, sys_flag)

    def _answer(self, response: Any, group: str, props: dict[str, str], sys_flag: int
                ) -> spb.SendMessageResponse:
        if response.code in _SEND_STATUS:
            code, name = _SEND_STATUS[response.code]
            entry = spb.SendResultEntry(status=status(code, f"send message failed, sendStatus={name}"))
            return spb.SendMessageResponse(status=status(code), entries=[entry])
        if response.code != RC.SUCCESS:
            code = code_of_response(response.code)
            raise ProxyError(code, response.remark or f"send failed: broker code {response.code}")
        header = response.decode_header(SendMessageResponseHeader)
        uniq = props["UNIQ_KEY"]
        prepared = bool(sys_flag & TRANSACTION_PREPARED_TYPE)
        tid = header.transactionId or (uniq if prepared else "")
        if prepared:
            _, commit_log_offset = decode_message_id(header.msgId)
            self.clients.remember_transaction(group, tid, header.queueOffset, commit_log_offset)
        entry = spb.SendResultEntry(status=status(Code.OK), message_id=uniq, transaction_id=tid,
                                    offset=header.queueOffset,
                                    recall_handle=header.recallHandle or "")
        return spb.SendMessageResponse(status=status(Code.OK), entries=[entry])

    async def end_transaction(self, s: ClientSession, request: spb.EndTransactionRequest
                              ) -> spb.EndTransactionResponse:
        topic = request.topic.name
        check_topic(topic)
        if not request.transaction_id.strip():
            raise ProxyError(Code.INVALID_TRANSACTION_ID, "transaction id cannot be empty")
        if request.resolution == pb.COMMIT:
            kind = TRANSACTION_COMMIT_TYPE
        elif request.resolution == pb.ROLLBACK:
            kind = TRANSACTION_ROLLBACK_TYPE
        else:
            raise ProxyError(Code.BAD_REQUEST, "resolution must be COMMIT or ROLLBACK")
        data = self.clients.take_transaction(topic, request.transaction_id)
        ext = {"producerGroup": data.producer_group,
               "tranStateTableOffset": str(data.tran_state_table_offset),
               "commitLogOffset": str(data.commit_log_offset), "commitOrRollback": str(kind),
               "fromTransactionCheck": "true" if request.source == pb.SOURCE_SERVER_CHECK
               else "false",
               "msgId": request.message_id, "transactionId": request.transaction_id}
        self.clients.invoker.invoke_oneway(s.channel, RequestCode.END_TRANSACTION, ext)
        return spb.EndTransactionResponse(status=status(Code.OK))

    async def recall(self, s: ClientSession, request: spb.RecallMessageRequest
                     ) -> spb.RecallMessageResponse:
        """RECALL_MESSAGE with the handle a delayed send answered with (5.3.3's
        ``ProducerProcessor.recallMessage``): the topic must be a DELAY topic
        while the type check is on; the broker's refusals map as any broker
        code (recall disabled: FORBIDDEN; a bad or late handle:
        INTERNAL_SERVER_ERROR with the broker's reason)."""
        topic = request.topic.name
        check_topic(topic)
        tc = self.c.topic_config_manager.select_topic_config(topic)
        if tc is None:
            raise ProxyError(Code.TOPIC_NOT_FOUND, f"topic not found: {topic}")
        if self.c.broker_config.enableTopicMessageTypeCheck:
            check_type(topic, topic_type_name(getattr(tc, "attributes", None)),
                       {tm.PROPERTY_TIMER_DELIVER_MS: "0"})
        try:
            tm.decode_recall_handle(request.recall_handle)
        except ValueError as exc:
            raise ProxyError(Code.INTERNAL_SERVER_ERROR, str(exc)) from None
        ext = {"producerGroup": topic, "topic": topic, "recallHandle": request.recall_handle,
               "brokerName": self.c.broker_config.brokerName}
        response = await self.clients.invoker.invoke(s.channel, RequestCode.RECALL_MESSAGE, ext,
                                                     language=s.language)
        if response.code != RC.SUCCESS:
            raise ProxyError(code_of_response(response.code),
                             response.remark or f"recall failed: broker code {response.code}")
        return spb.RecallMessageResponse(status=status(Code.OK),
                                         message_id=(response.ext_fields or {}).get("msgId", ""))
