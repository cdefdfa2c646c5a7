"""ReplyMessageProcessor: SEND_REPLY_MESSAGE / SEND_REPLY_MESSAGE_V2
(../shared/spec/PROTOCOL.md 3.2.4).

After the send checks, the reply is pushed with PUSH_REPLY_MESSAGE_TO_CLIENT
to the producer connection whose client id is the message's REPLY_TO_CLIENT,
then stored when ``storeReplyMessageEnable``.
"""

from __future__ import annotations

import time
from typing import Any

from rmq.broker.processor.send_support import (
    V1_KEYS,
    V2_KEYS,
    SendHeader,
    SendSupport,
    channel_host,
    parse_send_header,
)
from rmq.common import message as mc
from rmq.common.codes import RequestCode, ResponseCode
from rmq.remoting import Channel, RemotingCommand
from rmq.store import MessageExtBrokerInner
from rmq.store.message_codec import message_properties_to_string, string_to_message_properties

R = RequestCode
RC = ResponseCode
PUSH_TIMEOUT_MS = 10_000


def _host_text(host: tuple[str, int]) -> str:
    return f"{host[0]}:{host[1]}"


class ReplyMessageProcessor(SendSupport):
    def __init__(self, controller: Any) -> None:
        super().__init__(controller)

    def process_request(self, channel: Channel, request: RemotingCommand) -> Any:
        keys = V2_KEYS if request.code == R.SEND_REPLY_MESSAGE_V2 else V1_KEYS
        h = parse_send_header(request.ext_fields, keys)
        error, _tc, queue_id = self.send_target(channel, h)
        if error is not None:
            return error
        return self._reply(channel, request, h, queue_id)

    async def _reply(self, channel: Channel, request: RemotingCommand, h: SendHeader,
                     queue_id: int) -> RemotingCommand:
        props = string_to_message_properties(h.properties)
        props[mc.PROPERTY_CLUSTER] = self.bc.brokerClusterName
        pushed = await self._push(channel, request, h, queue_id, props)
        if pushed is not None:
            return pushed
        ext = {"msgId": "0", "queueId": str(queue_id), "queueOffset": "0"}
        if not self.bc.storeReplyMessageEnable:
            return self.response(RC.SUCCESS, None, ext)
        store = self.c.message_store
        text = message_properties_to_string(props)
        tags = props.get(mc.PROPERTY_TAGS)
        msg = MessageExtBrokerInner(
            h.topic, queue_id, h.flag, request.body or b"", props, text,
            mc.tags_string_to_code(tags) if tags else 0, h.sysFlag, h.bornTimestamp,
            channel_host(channel), store.store_host, 0, h.reconsumeTimes or 0)
        return self.put_result_response(await store.async_put_message(msg), queue_id)

    async def _push(self, channel: Channel, request: RemotingCommand, h: SendHeader,
                    queue_id: int, props: dict[str, str]) -> RemotingCommand | None:
        """PUSH_REPLY_MESSAGE_TO_CLIENT; an error response, or None when delivered."""
        client_id = props.get(mc.PROPERTY_MESSAGE_REPLY_TO_CLIENT)
        if not client_id:
            return self.response(RC.SYSTEM_ERROR, "Reply message "
                                 f"properties[{mc.PROPERTY_MESSAGE_REPLY_TO_CLIENT}] is null")
        target = self.c.producer_manager.find_channel(client_id)
        if target is None:
            return self.response(RC.SYSTEM_ERROR,
                                 f"push reply message fail, channel of <{client_id}> not found.")
        push_props = dict(props)
        push_props[mc.PROPERTY_PUSH_REPLY_TIME] = str(time.time_ns() // 1_000_000)
        header = {
            "producerGroup": h.producerGroup, "topic": h.topic, "defaultTopic": h.defaultTopic,
            "defaultTopicQueueNums": str(h.defaultTopicQueueNums), "queueId": str(queue_id),
            "sysFlag": str(h.sysFlag), "bornTimestamp": str(h.bornTimestamp),
            "flag": str(h.flag), "properties": message_properties_to_string(push_props),
            "reconsumeTimes": str(h.reconsumeTimes or 0),
            "unitMode": "true" if h.unitMode else "false",
            "bornHost": channel.remote_addr,
            "storeHost": _host_text(self.c.message_store.store_host),
            "storeTimestamp": str(time.time_ns() // 1_000_000),
        }
        push = RemotingCommand.create_request(R.PUSH_REPLY_MESSAGE_TO_CLIENT, header,
                                              request.body)
        try:
            answer = await self.c.server_for(target).invoke(target, push, PUSH_TIMEOUT_MS)
        except Exception as exc:
            self.c.log.warning("push reply message to %s failed: %s", client_id, exc)
            answer = None
        if answer is None or answer.code != RC.SUCCESS:
            return self.response(RC.SYSTEM_ERROR, f"push reply message to {client_id}fail.")
        return None
