"""ConsumerManageProcessor: GET_CONSUMER_LIST_BY_GROUP, QUERY_CONSUMER_OFFSET,
UPDATE_CONSUMER_OFFSET, LOCK_BATCH_MQ and UNLOCK_BATCH_MQ
(../shared/spec/PROTOCOL.md 3.3.3, 3.3.6, 3.3.7, 3.3.10).
"""

from __future__ import annotations

from typing import Any

import orjson

from rmq.broker.processor.client_manage import load_json
from rmq.broker.processor.rebalance_lock_manager import RebalanceLockManager
from rmq.client.headers import (
    GetConsumerListByGroupRequestHeader,
    QueryConsumerOffsetRequestHeader,
    UpdateConsumerOffsetRequestHeader,
)
from rmq.client.message import MessageQueue
from rmq.common.codes import RequestCode, ResponseCode
from rmq.remoting import Channel, RemotingCommand

R = RequestCode
RC = ResponseCode


def _mq_set(obj: dict) -> list[MessageQueue]:
    return [MessageQueue.from_json_obj(m) for m in obj.get("mqSet") or []]


def _lock_body(request: RemotingCommand, what: str) -> tuple | RemotingCommand:
    """(group, queues, client id) of a LOCK/UNLOCK_BATCH_MQ body, or the
    SYSTEM_ERROR answer for a body that does not parse."""
    try:
        obj = load_json(request.body)
        return obj["consumerGroup"], _mq_set(obj), obj["clientId"]
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        return RemotingCommand.create_response(RC.SYSTEM_ERROR, f"{what} batch body invalid: {exc}")


class ConsumerManageProcessor:
    def __init__(self, controller: Any) -> None:
        self.c = controller
        self.lock_manager = RebalanceLockManager()
        controller.rebalance_lock_manager = self.lock_manager

    def process_request(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        code = request.code
        if code == R.UPDATE_CONSUMER_OFFSET:
            return self.update_consumer_offset(channel, request)
        if code == R.QUERY_CONSUMER_OFFSET:
            return self.query_consumer_offset(request)
        if code == R.GET_CONSUMER_LIST_BY_GROUP:
            return self.get_consumer_list_by_group(request)
        if code == R.LOCK_BATCH_MQ:
            return self.lock_batch_mq(request)
        return self.unlock_batch_mq(request)

    def get_consumer_list_by_group(self, request: RemotingCommand) -> RemotingCommand:
        h = request.decode_header(GetConsumerListByGroupRequestHeader)
        info = self.c.consumer_manager.get_consumer_group_info(h.consumerGroup)
        ids = info.all_client_ids() if info is not None else []
        if not ids:
            return RemotingCommand.create_response(
                RC.SYSTEM_ERROR, f"no consumer for this group, {h.consumerGroup}")
        return RemotingCommand.create_response(
            RC.SUCCESS, header={}, body=orjson.dumps({"consumerIdList": ids}))

    def update_consumer_offset(self, channel: Channel, request: RemotingCommand
                               ) -> RemotingCommand:
        h = request.decode_header(UpdateConsumerOffsetRequestHeader)
        self.c.consumer_offset_manager.commit_offset(channel.remote_addr, h.consumerGroup,
                                                     h.topic, h.queueId, h.commitOffset)
        return RemotingCommand.create_response(RC.SUCCESS, header={})

    def _first_message_in_memory(self, topic: str, queue_id: int) -> bool:
        """``!checkInDiskByConsumeOffset(topic, queue, 0)``: the message at queue
        offset 0 still counts as in memory (or the queue is empty)."""
        return not self.c.message_store.check_in_disk_by_consume_offset(topic, queue_id, 0)

    def query_consumer_offset(self, request: RemotingCommand) -> RemotingCommand:
        h = request.decode_header(QueryConsumerOffsetRequestHeader)
        offset = self.c.consumer_offset_manager.query_offset(h.consumerGroup, h.topic,
                                                             h.queueId)
        if offset < 0:
            min_offset = self.c.message_store.get_min_offset_in_queue(h.topic, h.queueId)
            if min_offset <= 0 and self._first_message_in_memory(h.topic, h.queueId):
                offset = 0
        if offset < 0:
            return RemotingCommand.create_response(
                RC.QUERY_NOT_FOUND, "Not found, V3_0_6_SNAPSHOT maybe this group consumer boot "
                "first", header={})
        return RemotingCommand.create_response(RC.SUCCESS, header={"offset": str(offset)})

    def lock_batch_mq(self, request: RemotingCommand) -> RemotingCommand:
        parsed = _lock_body(request, "lock")
        if isinstance(parsed, RemotingCommand):
            return parsed
        group, mqs, client_id = parsed
        locked = self.lock_manager.try_lock_batch(group, mqs, client_id)
        body = orjson.dumps({"lockOKMQSet": [mq.to_json_obj() for mq in locked]})
        return RemotingCommand.create_response(RC.SUCCESS, body=body)

    def unlock_batch_mq(self, request: RemotingCommand) -> RemotingCommand:
        parsed = _lock_body(request, "unlock")
        if isinstance(parsed, RemotingCommand):
            return parsed
        group, mqs, client_id = parsed
        self.lock_manager.unlock_batch(group, mqs, client_id)
        return RemotingCommand.create_response(RC.SUCCESS)
