"""ClientManageProcessor: HEART_BEAT, UNREGISTER_CLIENT and CHECK_CLIENT_CONFIG
(../shared/spec/PROTOCOL.md 3.3.1, 3.3.2, 3.3.11, 4.4).

A heartbeat registers the connection under every producer and consumer group
it names (enums as names or ordinals, C++ numbers-as-strings tolerated); for a
consumer group whose subscription group exists (or may be auto-created) the
``%RETRY%group`` topic is ensured.  Membership or subscription changes reach
the controller's listener, which sends NOTIFY_CONSUMER_IDS_CHANGED.
"""

from __future__ import annotations

from typing import Any

import orjson

from rmq.broker.client_manager import ClientChannelInfo
from rmq.client.headers import UnregisterClientRequestHeader
from rmq.client.heartbeat import EXPRESSION_TAG, HeartbeatData, SubscriptionData
from rmq.common import fastjson
from rmq.common import message as mc
from rmq.common import topics as T
from rmq.common.codes import RequestCode, ResponseCode
from rmq.filter import FILTERS, FilterError
from rmq.remoting import Channel, RemotingCommand

R = RequestCode
RC = ResponseCode


def load_json(body: bytes | None) -> Any:
    """Standard JSON first (fast), fastjson's lenient dialect as the fallback."""
    if not body:
        raise ValueError("empty body")
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError:
        return fastjson.loads(bytes(body))


def decode_heartbeat(body: bytes | None) -> HeartbeatData:
    try:
        return HeartbeatData.decode(body)
    except orjson.JSONDecodeError:
        return HeartbeatData.decode(orjson.dumps(fastjson.loads(bytes(body))))


class ClientManageProcessor:
    def __init__(self, controller: Any) -> None:
        self.c = controller

    def process_request(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        code = request.code
        if code == R.HEART_BEAT:
            return self.heart_beat(channel, request)
        if code == R.UNREGISTER_CLIENT:
            return self.unregister_client(channel, request)
        return self.check_client_config(channel, request)

    def heart_beat(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        try:
            data = decode_heartbeat(request.body)
        except (ValueError, KeyError, TypeError) as exc:
            return RemotingCommand.create_response(RC.SYSTEM_ERROR,
                                                   f"heartbeat body is not valid: {exc}")
        info = ClientChannelInfo(channel, data.client_id, request.language, request.version)
        c = self.c
        for cd in data.consumers:
            cfg = c.subscription_group_manager.find_subscription_group_config(cd.group_name)
            notify = True
            if cfg is not None:
                notify = cfg.notifyConsumerIdsChangedEnable
                c.topic_config_manager.create_topic_in_send_message_back_method(
                    T.retry_topic(cd.group_name), cfg.retryQueueNums,
                    mc.PERM_READ | mc.PERM_WRITE, 0x2 if cd.unit_mode else 0)
            changed = c.consumer_manager.register_consumer(
                cd.group_name, info, cd.consume_type, cd.message_model, cd.consume_from_where,
                cd.subscriptions, notify)
            if changed:
                c.log.info("registerConsumer info changed %s %s %s", cd.group_name,
                           data.client_id, channel.remote_addr)
        for group in data.producer_groups:
            c.producer_manager.register_producer(group, info)
        return RemotingCommand.create_response(RC.SUCCESS)

    def unregister_client(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        h = request.decode_header(UnregisterClientRequestHeader)
        info = ClientChannelInfo(channel, h.clientID, request.language, request.version)
        c = self.c
        if h.producerGroup:
            c.producer_manager.unregister_producer(h.producerGroup, info)
        if h.consumerGroup:
            cfg = c.subscription_group_manager.find_subscription_group_config(h.consumerGroup)
            notify = cfg.notifyConsumerIdsChangedEnable if cfg is not None else True
            c.consumer_manager.unregister_consumer(h.consumerGroup, info, notify)
        return RemotingCommand.create_response(RC.SUCCESS, header={})

    def check_client_config(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        """``checkClientConfig``: TAG subscriptions are always fine; others need
        ``enablePropertyFilter`` and an expression that compiles (the compile
        error is the remark of SUBSCRIPTION_PARSE_FAILED)."""
        try:
            obj = load_json(request.body)
            raw = obj.get("subscriptionData") if isinstance(obj, dict) else None
            sub = SubscriptionData.from_json_obj(raw) if raw else None
        except (ValueError, KeyError, TypeError) as exc:
            return RemotingCommand.create_response(RC.SYSTEM_ERROR,
                                                   f"check client config body invalid: {exc}")
        if sub is None or sub.expression_type == EXPRESSION_TAG:
            return RemotingCommand.create_response(RC.SUCCESS)
        if not self.c.broker_config.enablePropertyFilter:
            return RemotingCommand.create_response(
                RC.SYSTEM_ERROR,
                f"The broker does not support consumer to filter message by {sub.expression_type}")
        try:
            FILTERS.compile(sub.expression_type, sub.sub_string)
        except FilterError as exc:
            self.c.log.warning("Client %s@%s filter message, but failed to compile expression! "
                               "sub=%s, error=%s", obj.get("clientId"), obj.get("group"),
                               sub.sub_string, exc)
            return RemotingCommand.create_response(RC.SUBSCRIPTION_PARSE_FAILED, str(exc))
        return RemotingCommand.create_response(RC.SUCCESS)
