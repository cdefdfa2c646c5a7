"""RecallMessageProcessor: RECALL_MESSAGE (370) of RocketMQ 5.3.2+.

A timer (delay) message is recalled before its due time by the handle its send
answered with (``rmq.common.timer.encode_recall_handle``): the broker stores a
delete marker -- a message of the same topic whose TIMER_DEL_UNIQKEY names the
recalled message and whose TIMER_DELIVER_MS is the same due time -- which the
timer store parks in the same slot and which cancels the recalled message when
the slot is delivered (``rmq.store.timer``).  Checks and answers as 5.3.3's
``RecallMessageProcessor``: off unless ``recallMessageEnable``
(NO_PERMISSION), refused on a slave, before ``startAcceptSendRequestTimeStamp``
or on a broker without write permission (unless
``allowRecallWhenBrokerNotWriteable``); an unknown topic is TOPIC_NOT_EXIST; a
handle that does not decode, names another topic or broker, or whose due time
is past or beyond ``timerMaxDelaySec`` is ILLEGAL_OPERATION.  The answer
carries ``msgId`` = the recalled message's unique key.
"""

from __future__ import annotations

import time
from typing import Any

from rmq.broker.processor.send_support import channel_host
from rmq.common import message as mc
from rmq.common import timer as tm
from rmq.common.codes import ResponseCode
from rmq.common.message import is_writeable
from rmq.remoting import Channel, RemotingCommand
from rmq.store import MessageExtBrokerInner, PutMessageResult, PutMessageStatus
from rmq.store.message_codec import message_properties_to_string

RC = ResponseCode
RECALL_MESSAGE_TAG = "_RECALL_TAG_"
_STORED = (PutMessageStatus.PUT_OK, PutMessageStatus.FLUSH_DISK_TIMEOUT,
           PutMessageStatus.FLUSH_SLAVE_TIMEOUT, PutMessageStatus.SLAVE_NOT_AVAILABLE)
_NOT_AVAILABLE = "recall failed, broker service not available"


def delete_marker(topic: str, due_ms: str, uniq_key: str, producer_group: str | None,
                  born_host: tuple[str, int], store_host: tuple[str, int]
                  ) -> MessageExtBrokerInner:
    """The message that cancels the timer message ``uniq_key`` of ``topic``."""
    now = int(time.time() * 1000)
    props = {tm.PROPERTY_TIMER_DEL_UNIQKEY: tm.build_delete_key(topic, uniq_key),
             mc.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX: uniq_key,
             tm.PROPERTY_TIMER_DELIVER_MS: due_ms, "BORN_TIMESTAMP": str(now),
             "TRACE_CONTEXT": "", mc.PROPERTY_TAGS: RECALL_MESSAGE_TAG}
    if producer_group is not None:
        props[mc.PROPERTY_PRODUCER_GROUP] = producer_group
    return MessageExtBrokerInner(
        topic, 0, 0, b"0", props, message_properties_to_string(props),
        mc.tags_string_to_code(RECALL_MESSAGE_TAG), 0, now, born_host, store_host)


class RecallMessageProcessor:
    def __init__(self, controller: Any) -> None:
        self.c = controller

    def reject_request(self) -> bool:
        return False

    def _response(self, code: int, remark: str | None = None,
                  msg_id: str | None = None) -> RemotingCommand:
        response = RemotingCommand.create_response(code, remark)
        ext = {mc.PROPERTY_MSG_REGION: self.c.broker_config.regionId}
        if msg_id is not None:
            ext["msgId"] = msg_id
        response.ext_fields = ext
        return response

    def _refusal(self, topic: str) -> RemotingCommand | None:
        bc = self.c.broker_config
        if not bc.recallMessageEnable:
            return self._response(RC.NO_PERMISSION, "recall failed, operation is forbidden")
        if self.c.is_slave():
            return self._response(RC.SLAVE_NOT_AVAILABLE, _NOT_AVAILABLE)
        if time.time() * 1000 < bc.startAcceptSendRequestTimeStamp:
            return self._response(RC.SERVICE_NOT_AVAILABLE, _NOT_AVAILABLE)
        if not is_writeable(bc.brokerPermission) and not bc.allowRecallWhenBrokerNotWriteable:
            return self._response(RC.SERVICE_NOT_AVAILABLE, _NOT_AVAILABLE)
        if self.c.topic_config_manager.select_topic_config(topic) is None:
            return self._response(RC.TOPIC_NOT_EXIST,
                                  f"recall failed, the topic[{topic}] not exist")
        return None

    def process_request(self, channel: Channel, request: RemotingCommand) -> Any:
        ext = request.ext_fields or {}
        topic, handle = ext.get("topic"), ext.get("recallHandle")
        if topic is None or handle is None:
            missing = "topic" if topic is None else "recallHandle"
            return self._response(RC.SYSTEM_ERROR, f"the custom field <{missing}> is null")
        refused = self._refusal(topic)
        if refused is not None:
            return refused
        try:
            handle_topic, broker_name, due, uniq_key = tm.decode_recall_handle(handle)
        except ValueError as exc:
            return self._response(RC.ILLEGAL_OPERATION, str(exc))
        if handle_topic != topic:
            return self._response(RC.ILLEGAL_OPERATION, "recall failed, topic not match")
        if broker_name != self.c.broker_config.brokerName:
            return self._response(RC.ILLEGAL_OPERATION, _NOT_AVAILABLE)
        try:
            left = int(due) - int(time.time() * 1000)
        except ValueError:
            left = -1
        if left <= 0 or left >= self.c.store_config.timerMaxDelaySec * 1000:
            return self._response(RC.ILLEGAL_OPERATION, "recall failed, timestamp invalid")
        marker = delete_marker(topic, due, uniq_key, ext.get("producerGroup"),
                               channel_host(channel), self.c.message_store.store_host)
        return self._put(marker)

    async def _put(self, marker: MessageExtBrokerInner) -> RemotingCommand:
        result: PutMessageResult | None = await self.c.message_store.async_put_message(marker)
        if result is None or result.status not in _STORED:
            return self._response(RC.SYSTEM_ERROR, "recall failed, execute error")
        return self._response(RC.SUCCESS, None, marker.properties[
            mc.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX])
