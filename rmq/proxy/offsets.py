"""PullMessage, UpdateOffset, GetOffset and QueryOffset: the pull-consumer RPCs
of ``apache.rocketmq.v2`` (rocketmq-apis 2.0.4), as 4.x remoting requests to
this broker.

5.3.3's proxy leaves these four RPCs to grpc-java's default (gRPC
``UNIMPLEMENTED``); rmq serves them with the semantics the protocol documents
and the 5.x Java client's pull consumer expects:

* PullMessage (server streaming): PULL_MESSAGE on the named queue from the
  given offset, long polling (suspend) within the call's deadline (5-20 s as a
  receive), subscription from the request's filter, offset not committed.
  Stream: ``status`` (OK / MESSAGE_NOT_FOUND / ILLEGAL_OFFSET), the messages,
  then ``next_offset``; an error is a single status.  A TAG filter is also
  applied to the tag strings (the broker filters by tag hash codes only, the
  4.x client finishes the job).
* UpdateOffset: UPDATE_CONSUMER_OFFSET; GetOffset: QUERY_CONSUMER_OFFSET
  (none committed: OFFSET_NOT_FOUND); QueryOffset: GET_MIN_OFFSET (BEGINNING),
  GET_MAX_OFFSET (END) or SEARCH_OFFSET_BY_TIMESTAMP (TIMESTAMP; without a
  timestamp BAD_REQUEST).
"""

from __future__ import annotations

import time
from typing import Any

from rmq.client.headers import pull_header
from rmq.client.heartbeat import EXPRESSION_TAG, build_subscription
from rmq.common.codes import RequestCode
from rmq.common.codes import ResponseCode as RC
from rmq.proxy.clients import ClientSession
from rmq.proxy.consumer import check_group, polling_ms
from rmq.proxy.messages import to_proto_message
from rmq.proxy.route import check_topic
from rmq.proxy.status import Code, ProxyError, check_response, status
from rmq.proxy.v2 import definition_pb2 as pb
from rmq.proxy.v2 import service_pb2 as spb

# PullSysFlag.buildSysFlag(commitOffset=false, suspend=true, subscription=true, classFilter=false)
PULL_SYS_FLAG = 0x2 | 0x4
MAX_PULL_BATCH = 32


def queue_id_of(mq: pb.MessageQueue) -> int:
    if mq.id < 0:
        raise ProxyError(Code.BAD_REQUEST, f"queue id {mq.id} is illegal: name one queue")
    return mq.id


def _offset_of(response: Any, what: str) -> int:
    check_response(response, what)
    return int((response.ext_fields or {}).get("offset", "0"))


class OffsetService:
    """The pull consumer's RPCs on this broker's queues."""

    def __init__(self, controller: Any, clients: Any) -> None:
        self.c = controller
        self.clients = clients

    @property
    def broker_name(self) -> str:
        return self.c.broker_config.brokerName

    async def _invoke(self, s: ClientSession, code: int, ext: dict[str, str],
                      timeout_s: float = 3.0) -> Any:
        return await self.clients.invoker.invoke(s.channel, code, ext, timeout_s=timeout_s,
                                                 language=s.language)

    # ---- PullMessage ----------------------------------------------------------------
    async def pull(self, s: ClientSession, request: spb.PullMessageRequest,
                   remaining_ms: int | None) -> list[spb.PullMessageResponse]:
        poll = polling_ms(request, remaining_ms)
        mq = request.message_queue
        topic, group = mq.topic.name, request.group.name
        check_topic(topic)
        check_group(group)
        queue_id = queue_id_of(mq)
        exp = request.filter_expression
        kind = "SQL92" if exp.type == pb.SQL else EXPRESSION_TAG
        try:
            sub = build_subscription(topic, exp.expression or "*", kind)
        except ValueError as exc:
            raise ProxyError(Code.ILLEGAL_FILTER_EXPRESSION, str(exc)) from None
        if request.offset < 0:
            raise ProxyError(Code.ILLEGAL_OFFSET, f"offset {request.offset} is illegal")
        batch = min(max(request.batch_size, 1), MAX_PULL_BATCH)
        ext = pull_header(group, topic, queue_id, request.offset, batch, PULL_SYS_FLAG, 0, poll,
                          sub.sub_string, int(time.time() * 1000), kind, self.broker_name)
        response = await self._invoke(s, RequestCode.PULL_MESSAGE, ext, poll / 1000 + 3.0)
        return self._stream(response, sub)

    def _stream(self, response: Any, sub: Any) -> list[spb.PullMessageResponse]:
        ext = response.ext_fields or {}
        if response.code == RC.PULL_OFFSET_MOVED:
            head = status(Code.ILLEGAL_OFFSET)
            found: list = []
        elif response.code in (RC.PULL_NOT_FOUND, RC.PULL_RETRY_IMMEDIATELY):
            head = status(Code.MESSAGE_NOT_FOUND, "no new message")
            found = []
        else:
            check_response(response, "pull")
            from rmq.client.codec import decode_messages

            found = decode_messages(response.body or b"", self.broker_name)
            if sub.expression_type == EXPRESSION_TAG and sub.tags_set:
                wanted = set(sub.tags_set)
                found = [m for m in found if m.properties.get("TAGS") in wanted]
            head = status(Code.OK) if found else status(Code.MESSAGE_NOT_FOUND,
                                                         "no match message")
        out = [spb.PullMessageResponse(status=head)]
        out.extend(spb.PullMessageResponse(message=to_proto_message(m)) for m in found)
        out.append(spb.PullMessageResponse(next_offset=int(ext.get("nextBeginOffset", "0"))))
        return out

    # ---- offsets ----------------------------------------------------------------------
    async def update_offset(self, s: ClientSession, request: spb.UpdateOffsetRequest
                            ) -> spb.UpdateOffsetResponse:
        mq = request.message_queue
        check_topic(mq.topic.name)
        check_group(request.group.name)
        if request.offset < 0:
            raise ProxyError(Code.ILLEGAL_OFFSET, f"offset {request.offset} is illegal")
        ext = {"consumerGroup": request.group.name, "topic": mq.topic.name,
               "queueId": str(queue_id_of(mq)), "commitOffset": str(request.offset),
               "bname": self.broker_name}
        check_response(await self._invoke(s, RequestCode.UPDATE_CONSUMER_OFFSET, ext),
                       "update offset")
        return spb.UpdateOffsetResponse(status=status(Code.OK))

    async def get_offset(self, s: ClientSession, request: spb.GetOffsetRequest
                         ) -> spb.GetOffsetResponse:
        mq = request.message_queue
        check_topic(mq.topic.name)
        check_group(request.group.name)
        ext = {"consumerGroup": request.group.name, "topic": mq.topic.name,
               "queueId": str(queue_id_of(mq)), "bname": self.broker_name}
        response = await self._invoke(s, RequestCode.QUERY_CONSUMER_OFFSET, ext)
        if response.code == RC.QUERY_NOT_FOUND:
            raise ProxyError(Code.OFFSET_NOT_FOUND, response.remark or
                             "the group has no offset on this queue")
        return spb.GetOffsetResponse(status=status(Code.OK),
                                     offset=_offset_of(response, "get offset"))

    async def query_offset(self, s: ClientSession, request: spb.QueryOffsetRequest
                           ) -> spb.QueryOffsetResponse:
        mq = request.message_queue
        check_topic(mq.topic.name)
        ext = {"topic": mq.topic.name, "queueId": str(queue_id_of(mq)),
               "bname": self.broker_name}
        policy = request.query_offset_policy
        if policy == pb.BEGINNING:
            code = RequestCode.GET_MIN_OFFSET
        elif policy == pb.END:
            code = RequestCode.GET_MAX_OFFSET
        elif policy == pb.TIMESTAMP:
            if not request.HasField("timestamp"):
                raise ProxyError(Code.BAD_REQUEST,
                                 "timestamp is required when the policy is TIMESTAMP")
            ts = request.timestamp
            ext["timestamp"] = str(ts.seconds * 1000 + ts.nanos // 1_000_000)
            code = RequestCode.SEARCH_OFFSET_BY_TIMESTAMP
        else:
            raise ProxyError(Code.BAD_REQUEST, f"unrecognized query offset policy {policy}")
        offset = _offset_of(await self._invoke(s, code, ext), "query offset")
        return spb.QueryOffsetResponse(status=status(Code.OK), offset=offset)
