"""SendMessageProcessor: SEND_MESSAGE, SEND_MESSAGE_V2, SEND_BATCH_MESSAGE and
CONSUMER_SEND_MSG_BACK as RocketMQ 4.9.8 answers them
(../shared/spec/PROTOCOL.md 3.2.1-3.2.3 and 3.3.9, STORE_FORMAT.md 3.2 and 14).

Plain sends are stored and answered by the send lane
(``rmq.broker.send_lane``) straight from the receive buffer; what it declines
(the lane off, transactions, delays and timers, retry topics, non-ASCII
properties, a full file, ...) comes here, to the general path.

Under ASYNC_FLUSH on a master the put completes on the spot, so the processor
answers synchronously (no task per message); SYNC_FLUSH and SYNC_MASTER puts
are awaited.  The processor also owns the ScheduleMessageService (delay
levels, ``rmq.store.schedule``): it is registered in ``controller.services``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from rmq.broker.processor.send_support import (
    FAQ_SUFFIX,
    V1_KEYS,
    V2_KEYS,
    V3_4_9,
    SendHeader,
    SendSupport,
    channel_host,
    parse_send_header,
    random_queue_id,
)
from rmq.broker.transaction.bridge import parse_half_message_inner
from rmq.client.headers import ConsumerSendMsgBackRequestHeader
from rmq.common import message as mc
from rmq.common import topics as T
from rmq.common.codes import RequestCode, ResponseCode
from rmq.common.message_id import create_message_id
from rmq.common.topic_config import MULTI_TAG
from rmq.remoting import Channel, RemotingCommand
from rmq.store import (
    BrokerRole,
    FlushDiskType,
    MessageExtBatch,
    MessageExtBrokerInner,
    PutMessageResult,
)
from rmq.store.message_codec import (
    message_properties_to_string,
    send_properties,
    string_to_message_properties,
)
from rmq.store.schedule import ScheduleMessageService

R = RequestCode
RC = ResponseCode
_PROP_CLUSTER = mc.PROPERTY_CLUSTER
_PROP_WAIT = mc.PROPERTY_WAIT_STORE_MSG_OK


class SendMessageProcessor(SendSupport):
    def __init__(self, controller: Any) -> None:
        super().__init__(controller)
        self.store = controller.message_store
        self.cluster = self.bc.brokerClusterName
        self.schedule = ScheduleMessageService(controller)
        controller.schedule_message_service = self.schedule
        controller.services.append(self.schedule)

    def _put_is_immediate(self) -> bool:
        """ASYNC_FLUSH on a master (or slave, which refuses anyway) never waits.
        (A DLedger leader is a SYNC_MASTER: its puts wait for their quorum.)"""
        sc = self.c.store_config
        return sc.flushDiskType is not FlushDiskType.SYNC_FLUSH and \
            sc.brokerRole is not BrokerRole.SYNC_MASTER

    def _put_then(self, put, msg, queue_id: int, single: Any = None) -> Any:
        """SYNC_FLUSH on a master: the response now when the put failed, else a
        loop future the group commit completes (one callback per flush round,
        no task per message)."""
        fut = asyncio.get_running_loop().create_future()
        respond = self.put_result_response

        def done(result: PutMessageResult) -> None:
            if not fut.done():
                fut.set_result(respond(result, queue_id, single))

        result = put(msg, done)
        if result is not None:
            return respond(result, queue_id, single)
        return fut

    def reject_request(self) -> bool:
        return self.store.is_os_page_cache_busy()

    def process_request(self, channel: Channel, request: RemotingCommand) -> Any:
        code = request.code
        if code == R.CONSUMER_SEND_MSG_BACK:
            return self.consumer_send_msg_back(channel, request)
        keys = V1_KEYS if code == R.SEND_MESSAGE else V2_KEYS
        h = parse_send_header(request.ext_fields, keys)
        if code == R.SEND_BATCH_MESSAGE:
            return self.send_batch(channel, request, h)
        return self.send_message(channel, request, h)

    # ---- single message ---------------------------------------------------------
    def build_inner(self, channel: Channel, request: RemotingCommand, h: SendHeader,
                    topic: str, queue_id: int, sys_flag: int) -> MessageExtBrokerInner:
        """The message to store: request properties plus CLUSTER; WAIT kept in
        the map but not in the stored string (STORE_FORMAT.md 3.2)."""
        props, text, code = send_properties(h.properties, self.cluster)
        return MessageExtBrokerInner(
            topic, queue_id, h.flag, request.body or b"", props, text, code, sys_flag,
            h.bornTimestamp,
            channel_host(channel), self.store.store_host, 0, h.reconsumeTimes or 0)

    def send_message(self, channel: Channel, request: RemotingCommand, h: SendHeader) -> Any:
        error, tc, queue_id = self.send_target(channel, h)
        if error is not None:
            return error
        topic = h.topic
        if topic.startswith(T.RETRY_GROUP_TOPIC_PREFIX):
            routed = self._retry_or_dlq(request, h, topic, queue_id)
            if isinstance(routed, RemotingCommand):
                return routed
            topic, queue_id, tc = routed
        sys_flag = h.sysFlag
        if tc.topicFilterType == MULTI_TAG:
            sys_flag |= mc.MULTI_TAGS_FLAG
        msg = self.build_inner(channel, request, h, topic, queue_id, sys_flag)
        if topic != h.topic:  # redirected to the DLQ: no delay there
            msg.properties[mc.PROPERTY_DELAY_TIME_LEVEL] = "0"
            msg.properties_string = _without_wait(msg.properties)
        if msg.properties.get(mc.PROPERTY_TRANSACTION_PREPARED, "").lower() == "true":
            if self.bc.rejectTransactionMessage:
                return self.response(RC.NO_PERMISSION, f"the broker[{self.bc.brokerIP1}] "
                                     "sending transaction message is forbidden")
            parse_half_message_inner(msg)
        store = self.store
        return self._put(msg, queue_id, store.put_message, store.put_message_then,
                         store.async_put_message, single=msg)

    def _put(self, item: Any, queue_id: int, put: Callable, put_then: Callable,
             async_put: Callable, single: Any = None) -> Any:
        """Store a message or a batch the way the role and flush mode allow: at
        once, through a loop callback (SYNC_FLUSH, or a DLedger quorum), or in
        a coroutine that also waits for the slave (SYNC_MASTER).  ``single``:
        the message of a single send, whose answer may carry a recall handle
        (5.3.3 gives none to batches and sends back)."""
        if self._put_is_immediate():
            return self.put_result_response(put(item), queue_id, single)
        sc = self.c.store_config
        if sc.brokerRole is not BrokerRole.SYNC_MASTER or self.c.message_store.commit_log.waits_for_quorum:
            # a DLedger leader's put waits for its quorum: a callback on the
            # (shared) quorum future, no task per message
            return self._put_then(put_then, item, queue_id, single)
        return self._put_async(async_put, item, queue_id, single)

    async def _put_async(self, async_put: Callable, item: Any, queue_id: int,
                         single: Any = None) -> RemotingCommand:
        return self.put_result_response(await async_put(item), queue_id, single)

    def _retry_or_dlq(self, request: RemotingCommand, h: SendHeader, topic: str,
                      queue_id: int) -> Any:
        """``handleRetryAndDLQ``: a direct send to %RETRY%group past its max
        reconsume times goes to %DLQ%group."""
        group = topic[len(T.RETRY_GROUP_TOPIC_PREFIX):]
        cfg = self.groups.find_subscription_group_config(group)
        if cfg is None:
            return self.group_not_exist(group)
        max_times = cfg.retryMaxTimes
        if request.version >= V3_4_9 and h.maxReconsumeTimes is not None:
            max_times = h.maxReconsumeTimes
        tc = self.topics.table.get(topic)
        if (h.reconsumeTimes or 0) >= max_times:
            tc = self.dlq_topic_config(group)
            return T.dlq_topic(group), random_queue_id(1), tc
        return topic, queue_id, tc

    # ---- batch ------------------------------------------------------------------
    def send_batch(self, channel: Channel, request: RemotingCommand, h: SendHeader) -> Any:
        error, tc, queue_id = self.send_target(channel, h)
        if error is not None:
            return error
        if len(h.topic) > 127:
            return self.response(RC.MESSAGE_ILLEGAL,
                                 f"message topic length too long {len(h.topic)}")
        sys_flag = h.sysFlag
        if mc.transaction_type(sys_flag) != mc.TRANSACTION_NOT_TYPE:
            return self.response(RC.MESSAGE_ILLEGAL, "batch message does not support "
                                 "transaction")
        if tc.topicFilterType == MULTI_TAG:
            sys_flag |= mc.MULTI_TAGS_FLAG
        props = string_to_message_properties(h.properties)
        props[_PROP_CLUSTER] = self.cluster
        batch = MessageExtBatch(
            h.topic, queue_id, request.body or b"", props, message_properties_to_string(props),
            sys_flag, h.bornTimestamp, channel_host(channel), self.store.store_host,
            h.reconsumeTimes or 0, h.flag)
        store = self.store
        return self._put(batch, queue_id, store.put_messages, store.put_messages_then,
                         store.async_put_messages)

    # ---- send back ----------------------------------------------------------------
    def consumer_send_msg_back(self, channel: Channel, request: RemotingCommand) -> Any:
        """A consumer returns a message it failed to consume: to %RETRY%group with a
        delay level, or to %DLQ%group once it has been retried often enough."""
        h = request.decode_header(ConsumerSendMsgBackRequestHeader)
        ok = RemotingCommand.create_response
        cfg = self.groups.find_subscription_group_config(h.group)
        if cfg is None:
            return ok(RC.SUBSCRIPTION_GROUP_NOT_EXIST,
                      f"subscription group not exist, {h.group} {FAQ_SUFFIX}")
        if not mc.is_writeable(self.bc.brokerPermission):
            return ok(RC.NO_PERMISSION, self.forbidden_remark())
        if cfg.retryQueueNums <= 0:
            return ok(RC.SUCCESS)
        new_topic = T.retry_topic(h.group)
        queue_id = random_queue_id(cfg.retryQueueNums)
        unit_flag = 0x2 if h.unitMode else 0
        tc = self.topics.create_topic_in_send_message_back_method(
            new_topic, cfg.retryQueueNums, mc.PERM_READ | mc.PERM_WRITE, unit_flag)
        if not mc.is_writeable(tc.perm):
            return ok(RC.NO_PERMISSION, f"the topic[{new_topic}] sending message is forbidden")
        old = self.store.look_message_by_offset(h.offset)
        if old is None:
            return ok(RC.SYSTEM_ERROR, f"look message by offset failed, {h.offset}")
        props = old.properties
        if mc.PROPERTY_RETRY_TOPIC not in props:
            props[mc.PROPERTY_RETRY_TOPIC] = old.topic
        props[_PROP_WAIT] = "false"
        max_times = cfg.retryMaxTimes
        if request.version >= V3_4_9 and h.maxReconsumeTimes is not None:
            max_times = h.maxReconsumeTimes
        delay = h.delayLevel
        if old.reconsume_times >= max_times or delay < 0:
            new_topic = T.dlq_topic(h.group)
            queue_id = random_queue_id(1)
            self.dlq_topic_config(h.group)
            props[mc.PROPERTY_DELAY_TIME_LEVEL] = "0"
        else:
            if delay == 0:
                delay = 3 + old.reconsume_times
            props[mc.PROPERTY_DELAY_TIME_LEVEL] = str(delay)
        origin = props.get(mc.PROPERTY_ORIGIN_MESSAGE_ID)
        if not origin:
            props[mc.PROPERTY_ORIGIN_MESSAGE_ID] = create_message_id(
                old.store_host, old.commit_log_offset)
        tags = props.get(mc.PROPERTY_TAGS)
        msg = MessageExtBrokerInner(
            new_topic, queue_id, old.flag, old.body, props, message_properties_to_string(props),
            mc.tags_string_to_code(tags) if tags else 0, old.sys_flag, old.born_timestamp,
            old.born_host, old.store_host, 0, old.reconsume_times + 1)
        return self._put_back(msg, h.group, props[mc.PROPERTY_RETRY_TOPIC])

    async def _put_back(self, msg: MessageExtBrokerInner, group: str, back_topic: str
                        ) -> RemotingCommand:
        result = await self.store.async_put_message(msg)
        if result is not None and result.status.name == "PUT_OK":
            self.c.stats.inc_send_back(group, back_topic)  # SNDBCK_PUT_NUMS, the original topic
            if T.is_dlq_topic(msg.topic):
                self.c.stats.inc_dlq(group, back_topic)
            return RemotingCommand.create_response(RC.SUCCESS)
        remark = result.status.name if result is not None else "putMessageResult is null"
        return RemotingCommand.create_response(RC.SYSTEM_ERROR, remark)


def _without_wait(props: dict[str, str]) -> str:
    return message_properties_to_string({k: v for k, v in props.items() if k != _PROP_WAIT})
