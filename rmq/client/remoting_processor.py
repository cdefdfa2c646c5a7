"""Requests brokers send to clients (``ClientRemotingProcessor``).

NOTIFY_CONSUMER_IDS_CHANGED, RESET_CONSUMER_CLIENT_OFFSET and
CHECK_TRANSACTION_STATE arrive oneway and get no answer (a check is answered
by the transactional producer's END_TRANSACTION); GET_CONSUMER_STATUS_FROM_CLIENT,
GET_CONSUMER_RUNNING_INFO and CONSUME_MESSAGE_DIRECTLY are answered with the
JSON bodies of 4.9.8; PUSH_REPLY_MESSAGE_TO_CLIENT completes a waiting
``Producer.request`` and is answered SUCCESS.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import threading
import traceback
from typing import TYPE_CHECKING

import orjson

from rmq.client.api import loads
from rmq.client.codec import decode_messages
from rmq.client.message import MessageQueue
from rmq.client.request_reply import reply_message
from rmq.common.codes import RequestCode, ResponseCode
from rmq.common.message import PROPERTY_PRODUCER_GROUP
from rmq.common.protocol.headers_admin import (
    ConsumeMessageDirectlyResultRequestHeader,
    GetConsumerRunningInfoRequestHeader,
    GetConsumerStatusRequestHeader,
    ResetOffsetRequestHeader,
)
from rmq.common.protocol.headers_broker import (
    CheckTransactionStateRequestHeader,
    NotifyConsumerIdsChangedRequestHeader,
    ReplyMessageRequestHeader,
)
from rmq.remoting import RemotingClient, RemotingCommand
from rmq.remoting.exceptions import RemotingCommandError
from rmq.remoting.handler_table import not_supported

if TYPE_CHECKING:
    from rmq.client.instance import MQClientInstance

log = logging.getLogger("rmq.client")


def parse_offset_table(body) -> dict[MessageQueue, int]:
    """ResetOffsetBody (MessageQueue object keys, possibly unquoted) or
    ResetOffsetBodyForC (a list of {brokerName, offset, queueId, topic})."""
    table = loads(body).get("offsetTable") or {}
    out: dict[MessageQueue, int] = {}
    if isinstance(table, list):
        for item in table:
            out[MessageQueue.from_json_obj(item)] = int(item["offset"])
        return out
    for key, off in table.items():
        out[MessageQueue.from_json_obj(orjson.loads(key))] = int(off)
    return out


def stack_dump() -> str:
    """What ``jstackEnable`` asks for (Java's ``UtilAll.jstack``): the stack
    of every thread and of every task on this event loop."""
    frames = sys._current_frames()
    out = []
    for t in threading.enumerate():
        frame = frames.get(t.ident) if t.ident is not None else None
        out.append(f"Thread: {t.name} {'DAEMON' if t.daemon else ''}".rstrip() + "\n")
        out += ["    " + line for line in traceback.format_stack(frame)] if frame else []
    for task in asyncio.all_tasks():
        out.append(f"Task: {task.get_name()}\n")
        for frame in task.get_stack():
            out += ["    " + line for line in traceback.format_stack(frame, limit=1)]
    return "".join(out)


class ClientRemotingProcessor:
    """Dispatches broker-initiated requests to the consumers of the instance."""

    CODES = (
        RequestCode.NOTIFY_CONSUMER_IDS_CHANGED,
        RequestCode.RESET_CONSUMER_CLIENT_OFFSET,
        RequestCode.GET_CONSUMER_STATUS_FROM_CLIENT,
        RequestCode.GET_CONSUMER_RUNNING_INFO,
        RequestCode.CONSUME_MESSAGE_DIRECTLY,
        RequestCode.CHECK_TRANSACTION_STATE,
        RequestCode.PUSH_REPLY_MESSAGE_TO_CLIENT,
    )

    def __init__(self, instance: MQClientInstance) -> None:
        self.instance = instance

    def register(self, remoting: RemotingClient) -> None:
        for code in self.CODES:
            remoting.register_processor(code, self)

    async def process_request(self, channel, request: RemotingCommand) -> RemotingCommand | None:
        code = request.code
        try:
            if code == RequestCode.NOTIFY_CONSUMER_IDS_CHANGED:
                group = request.decode_header(NotifyConsumerIdsChangedRequestHeader).consumerGroup
                log.info("consumer ids of %s changed (from %s): rebalance", group,
                         channel.remote_addr)
                self.instance.rebalance_immediately()
                return None
            if code == RequestCode.RESET_CONSUMER_CLIENT_OFFSET:
                await self._reset_offset(request)
                return None
            if code == RequestCode.GET_CONSUMER_STATUS_FROM_CLIENT:
                return self._consumer_status(request)
            if code == RequestCode.GET_CONSUMER_RUNNING_INFO:
                return self._running_info(request)
            if code == RequestCode.CONSUME_MESSAGE_DIRECTLY:
                return await self._consume_directly(request)
            if code == RequestCode.CHECK_TRANSACTION_STATE:
                await self._check_transaction_state(channel, request)
                return None
            if code == RequestCode.PUSH_REPLY_MESSAGE_TO_CLIENT:
                header = request.decode_header(ReplyMessageRequestHeader)
                self.instance.requests.on_reply(reply_message(header, request.body))
                return RemotingCommand.create_response(ResponseCode.SUCCESS)
        except (RemotingCommandError, ValueError, KeyError) as e:
            return RemotingCommand.create_response(ResponseCode.SYSTEM_ERROR, str(e))
        return not_supported(code)

    async def _check_transaction_state(self, channel, request: RemotingCommand) -> None:
        """``checkTransactionState``: the body is the half message; the
        producer of its PGROUP checks it and answers the broker that asked."""
        header = request.decode_header(CheckTransactionStateRequestHeader)
        try:
            msgs = decode_messages(request.body or b"")
        except ValueError as e:
            log.warning("checkTransactionState, decode message failed: %s", e)
            return
        if not msgs:
            log.warning("checkTransactionState, decode message failed: empty body")
            return
        msg = msgs[0]
        group = msg.properties.get(PROPERTY_PRODUCER_GROUP)
        if group is None:
            log.warning("checkTransactionState, pick producer group failed")
            return
        check = getattr(self.instance.producers.get(group), "check_transaction_state", None)
        if check is None:
            log.debug("checkTransactionState, pick producer by group[%s] failed", group)
            return
        await check(channel.remote_addr, msg, header)

    async def _reset_offset(self, request: RemotingCommand) -> None:
        hdr = request.decode_header(ResetOffsetRequestHeader)
        consumer = self.instance.consumers.get(hdr.group)
        if consumer is None:
            return
        table = parse_offset_table(request.body)
        log.info("reset offsets of %s/%s from the broker: %s", hdr.group, hdr.topic, table)
        await consumer.reset_offset(hdr.topic, table)

    def _consumer_status(self, request: RemotingCommand) -> RemotingCommand:
        hdr = request.decode_header(GetConsumerStatusRequestHeader)
        consumer = self.instance.consumers.get(hdr.group)
        table = consumer.offset_table(hdr.topic) if consumer is not None else {}
        body = orjson.dumps({"consumerTable": {},
                             "messageQueueTable": {mq.key(): off for mq, off in table.items()}})
        return RemotingCommand.create_response(ResponseCode.SUCCESS, None, None, body)

    def _running_info(self, request: RemotingCommand) -> RemotingCommand:
        hdr = request.decode_header(GetConsumerRunningInfoRequestHeader)
        consumer = self.instance.consumers.get(hdr.consumerGroup)
        if consumer is None:
            return RemotingCommand.create_response(
                ResponseCode.SYSTEM_ERROR,
                f"The Consumer Group <{hdr.consumerGroup}> not exist in this consumer")
        info = consumer.running_info()
        if hdr.jstackEnable:
            info["jstack"] = stack_dump()
        body = orjson.dumps(info, option=orjson.OPT_SORT_KEYS)
        return RemotingCommand.create_response(ResponseCode.SUCCESS, None, None, body)

    async def _consume_directly(self, request: RemotingCommand) -> RemotingCommand:
        hdr = request.decode_header(ConsumeMessageDirectlyResultRequestHeader)
        consumer = self.instance.consumers.get(hdr.consumerGroup)
        msgs = decode_messages(request.body or b"", hdr.brokerName or "")
        if consumer is None or not msgs:
            return RemotingCommand.create_response(
                ResponseCode.SYSTEM_ERROR,
                f"The Consumer Group <{hdr.consumerGroup}> not exist in this consumer"
                if consumer is None else "no message in the request body")
        result = await consumer.consume_directly(msgs[0], hdr.brokerName or "")
        body = orjson.dumps(result, option=orjson.OPT_SORT_KEYS)
        return RemotingCommand.create_response(ResponseCode.SUCCESS, None, None, body)
