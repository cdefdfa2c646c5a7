"""ReceiveMessage, AckMessage and ChangeInvisibleDuration as POP requests to
the broker (5.3.3's ``ReceiveMessageActivity``, ``AckMessageActivity``,
``ChangeInvisibleDurationActivity`` and ``ConsumerProcessor``).

* Receive: POP_MESSAGE (200050) on queue -1 of this broker (the whole
  broker, as 5.3.3 does whatever queue the client names), ``initMode`` MAX,
  ``order`` = the group's ``consumeMessageOrderly``, the client's attempt id;
  polling time clamped to 5-20 s and to the call's deadline; invisible time
  10 s-12 h (``defaultInvisibleTimeMills``, 60 s, when the client asks for
  auto-renew and ``enableProxyAutoRenew`` is on: then the handles are renewed
  by rmq.proxy.renew until the client acks them).
* Receipt handle: the broker's ``POP_CK`` (8 fields) plus the commit-log offset
  (5.3.3's ``ReceiptHandle``); an expired handle (pop time + invisible time
  passed) is ``INVALID_RECEIPT_HANDLE``.
* Ack: ACK_MESSAGE (200051); change: CHANGE_MESSAGE_INVISIBLETIME (200053),
  whose answer makes the new handle -- an ack with it acks the message.
* ForwardMessageToDeadLetterQueue: CONSUMER_SEND_MSG_BACK to the DLQ, then
  the ack.

The POP processors belong to the broker; the pop answer is read with
``rmq.client.pop.parse_pop_response`` (imported when first needed).  A
broker without them answers REQUEST_CODE_NOT_SUPPORTED: ``NOT_IMPLEMENTED``.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import Any

from rmq.common.codes import RequestCode
from rmq.common.codes import ResponseCode as RC
from rmq.proxy.clients import ClientSession
from rmq.proxy.messages import to_proto_message
from rmq.proxy.renew import ReceiptHandleManager, TrackedHandle
from rmq.proxy.route import check_topic
from rmq.proxy.status import Code, ProxyError, check_response, code_of_response, status
from rmq.proxy.v2 import definition_pb2 as pb
from rmq.proxy.v2 import service_pb2 as spb

POP_MESSAGE = 200050
ACK_MESSAGE = 200051
CHANGE_MESSAGE_INVISIBLETIME = 200053
INIT_MODE_MAX = 1
POLLING_FULL = 209  # 5.x response codes of a pop
POLLING_TIMEOUT = 210

# ProxyConfig defaults of 5.3.3
MIN_INVISIBLE_MS_FOR_RECEIVE = 10_000
MAX_INVISIBLE_MS = 12 * 3600 * 1000
MIN_POLLING_MS = 5_000
MAX_POLLING_MS = 20_000
MAX_BATCH = 32
_GROUP = re.compile(r"^[%|a-zA-Z0-9_-]+$")
SYSTEM_GROUPS = frozenset({"TOOLS_CONSUMER", "FILTERSRV_CONSUMER", "__MONITOR_CONSUMER",
                           "CLIENT_INNER_PRODUCER", "SELF_TEST_P_GROUP", "SELF_TEST_C_GROUP",
                           "CID_ONS-HTTP-PROXY", "CID_ONSAPI_PERMISSION", "CID_ONSAPI_OWNER",
                           "CID_ONSAPI_PULL", "CID_RMQ_SYS_TRANS"})


def check_group(name: str) -> None:
    """5.3.3's ``GrpcValidator.validateConsumerGroup``."""
    if not name.strip():
        raise ProxyError(Code.ILLEGAL_CONSUMER_GROUP, "the specified group is blank")
    if len(name) > 255:
        raise ProxyError(Code.ILLEGAL_CONSUMER_GROUP, "the specified group is longer than 255")
    if not _GROUP.match(name):
        raise ProxyError(Code.ILLEGAL_CONSUMER_GROUP, "the specified group contains illegal "
                         "characters, allowing only ^[%|a-zA-Z0-9_-]+$")
    if name in SYSTEM_GROUPS:
        raise ProxyError(Code.ILLEGAL_CONSUMER_GROUP, "cannot use system consumer group")


def duration_ms(d: Any) -> int:
    return d.seconds * 1000 + d.nanos // 1_000_000


def check_invisible(ms: int, minimum: int = 0) -> None:
    if ms < minimum:
        raise ProxyError(Code.ILLEGAL_INVISIBLE_TIME,
                         f"the invisibleTime is too small. min is {minimum}")
    if ms > MAX_INVISIBLE_MS:
        raise ProxyError(Code.ILLEGAL_INVISIBLE_TIME,
                         f"the invisibleTime is too large. max is {MAX_INVISIBLE_MS}")


def polling_ms(request: spb.ReceiveMessageRequest, remaining_ms: int | None) -> int:
    """The long polling time 5.3.3 uses: the request's, clamped to 5-20 s and to
    what the call's deadline leaves (< 5 s left: ``ILLEGAL_POLLING_TIME``)."""
    if request.HasField("long_polling_timeout"):
        poll = duration_ms(request.long_polling_timeout)
    else:
        poll = MAX_POLLING_MS if remaining_ms is None else remaining_ms // 2
    poll = min(max(poll, MIN_POLLING_MS), MAX_POLLING_MS)
    if remaining_ms is not None and poll > remaining_ms:
        if remaining_ms < MIN_POLLING_MS:
            raise ProxyError(Code.ILLEGAL_POLLING_TIME, "The deadline time remaining is not "
                             "enough for polling, please check network condition")
        poll = remaining_ms
    return poll


@dataclass(slots=True)
class ReceiptHandle:
    """5.3.3's ``ReceiptHandle``: the broker's POP_CK and the commit-log offset."""

    fields: list[str]

    @classmethod
    def decode(cls, text: str) -> ReceiptHandle:
        fields = text.split(" ")
        if len(fields) < 8 or not all(f.lstrip("-").isdigit() for f in fields[:4] + fields[6:8]):
            raise ProxyError(Code.INVALID_RECEIPT_HANDLE, f"receipt handle is not valid: {text}")
        return cls(fields)

    @property
    def extra_info(self) -> str:
        return " ".join(self.fields[:8])

    @property
    def queue_id(self) -> str:
        return self.fields[6]

    @property
    def offset(self) -> str:
        return self.fields[7]

    @property
    def commit_log_offset(self) -> str:
        return self.fields[8] if len(self.fields) > 8 else "0"

    def expired(self, now_ms: int) -> bool:
        return int(self.fields[1]) + int(self.fields[2]) <= now_ms

    def real_topic(self, topic: str, group: str) -> str:
        kind = self.fields[4]
        if kind == "1":
            return f"%RETRY%{group}_{topic}"
        if kind == "2":
            return f"%RETRY%{group}+{topic}"
        return topic


def encode_handle(pop_ck: str, commit_log_offset: int) -> str:
    return f"{pop_ck} {commit_log_offset}"


class ConsumerService:
    def __init__(self, controller: Any, clients: Any) -> None:
        self.c = controller
        self.clients = clients
        self.renewals = ReceiptHandleManager(
            controller.broker_config, self._renew, controller.store_config.delay_level_table,
            lambda client_id: client_id in clients.sessions)

    def _fifo(self, group: str) -> bool:
        cfg = self.c.subscription_group_manager.find_subscription_group_config(group)
        return bool(getattr(cfg, "consumeMessageOrderly", False))

    async def receive(self, s: ClientSession, request: spb.ReceiveMessageRequest,
                      remaining_ms: int | None) -> list[spb.ReceiveMessageResponse]:
        """The stream's elements: a status, then the messages (or the status only)."""
        await self.clients.wait_settings(s)
        poll = polling_ms(request, remaining_ms)
        topic, group = request.message_queue.topic.name, request.group.name
        check_topic(topic)
        check_group(group)
        if s.settings is None or s.assumed:
            await self.clients.assume_consumer(s, group, topic, request.filter_expression,
                                               request.auto_renew)
        invisible = duration_ms(request.invisible_duration)
        renew = request.auto_renew and self.renewals.enabled
        if renew:
            invisible = self.c.broker_config.defaultInvisibleTimeMills
        else:
            check_invisible(invisible, MIN_INVISIBLE_MS_FOR_RECEIVE)
        exp = request.filter_expression
        exp_type = "SQL92" if exp.type == pb.SQL else "TAG"
        if exp_type == "SQL92" and not exp.expression.strip():
            raise ProxyError(Code.ILLEGAL_FILTER_EXPRESSION, "SQL expression is empty")
        ext = {"consumerGroup": group, "topic": topic, "queueId": "-1",
               "maxMsgNums": str(min(max(request.batch_size, 1), MAX_BATCH)),
               "invisibleTime": str(invisible), "pollTime": str(poll),
               "bornTime": str(int(time.time() * 1000)), "initMode": str(INIT_MODE_MAX),
               "expType": exp_type, "exp": exp.expression or "*",
               "order": "true" if self._fifo(group) else "false",
               "bname": self.c.broker_config.brokerName}
        if request.HasField("attempt_id") and request.attempt_id:
            ext["attemptId"] = request.attempt_id
        response = await self.clients.invoker.invoke(s.channel, POP_MESSAGE, ext,
                                                     timeout_s=poll / 1000 + 3.0,
                                                     language=s.language)
        return self._stream(response, (s, group, topic) if renew else None)

    def _stream(self, response: Any, renew: tuple[ClientSession, str, str] | None
                ) -> list[spb.ReceiveMessageResponse]:
        """The elements of the answer; with ``renew`` (session, group, topic)
        each message's handle is kept invisible until the client acks it."""
        if response.code == POLLING_FULL:
            return [spb.ReceiveMessageResponse(status=status(Code.TOO_MANY_REQUESTS,
                                                             "polling full"))]
        if response.code in (RC.PULL_NOT_FOUND, POLLING_TIMEOUT):
            return [spb.ReceiveMessageResponse(status=status(Code.MESSAGE_NOT_FOUND,
                                                             "no new message"))]
        check_response(response, "pop")
        from rmq.client.pop import parse_pop_response  # the broker's POP answer format

        result = parse_pop_response(response, self.c.broker_config.brokerName)
        if not result.messages:
            return [spb.ReceiveMessageResponse(status=status(Code.MESSAGE_NOT_FOUND,
                                                             "no new message"))]
        out = [spb.ReceiveMessageResponse(status=status(Code.OK))]
        for m in result.messages:
            handle = encode_handle(m.properties["POP_CK"], m.commit_log_offset)
            message = to_proto_message(m, handle)
            out.append(spb.ReceiveMessageResponse(message=message))
            if renew is not None:
                self.renewals.add(renew[0], renew[1], renew[2], message.system_properties.message_id,
                                  handle, m.reconsume_times)
        return out

    def _handle(self, text: str) -> ReceiptHandle:
        handle = ReceiptHandle.decode(text)
        if handle.expired(int(time.time() * 1000)):
            raise ProxyError(Code.INVALID_RECEIPT_HANDLE, "receipt handle has expired")
        return handle

    async def _ack_one(self, s: ClientSession, group: str, topic: str,
                       entry: spb.AckMessageEntry) -> spb.AckMessageResultEntry:
        try:
            text = await self.renewals.take(s.client_id, group, entry.message_id,
                                            entry.receipt_handle)
            handle = self._handle(text)
            ext = {"consumerGroup": group, "topic": handle.real_topic(topic, group),
                   "queueId": handle.queue_id, "offset": handle.offset,
                   "extraInfo": handle.extra_info, "bname": self.c.broker_config.brokerName}
            response = await self.clients.invoker.invoke(s.channel, ACK_MESSAGE, ext,
                                                         language=s.language)
            code = code_of_response(response.code)
            st = status(code) if code == Code.OK else status(code, response.remark or
                                                             "ack failed: status is abnormal")
        except ProxyError as exc:
            st = status(exc.code, exc.message)
        return spb.AckMessageResultEntry(message_id=entry.message_id,
                                         receipt_handle=entry.receipt_handle, status=st)

    async def ack(self, s: ClientSession, request: spb.AckMessageRequest
                  ) -> spb.AckMessageResponse:
        topic, group = request.topic.name, request.group.name
        check_topic(topic)
        check_group(group)
        entries = [await self._ack_one(s, group, topic, e) for e in request.entries]
        codes = {e.status.code for e in entries}
        if len(codes) == 1:
            top = next(iter(entries)).status
        elif codes:
            top = status(Code.MULTIPLE_RESULTS)
        else:
            top = status(Code.BAD_REQUEST, "no entry to ack")
        return spb.AckMessageResponse(status=top, entries=entries)

    async def change_invisible(self, s: ClientSession,
                               request: spb.ChangeInvisibleDurationRequest
                               ) -> spb.ChangeInvisibleDurationResponse:
        topic, group = request.topic.name, request.group.name
        check_topic(topic)
        check_group(group)
        invisible = duration_ms(request.invisible_duration)
        check_invisible(invisible)
        text = await self.renewals.take(s.client_id, group, request.message_id,
                                        request.receipt_handle)
        new = await self._change(s, group, topic, self._handle(text), invisible)
        return spb.ChangeInvisibleDurationResponse(status=status(Code.OK), receipt_handle=new)

    async def _renew(self, tracked: TrackedHandle, invisible: int) -> str:
        """A renewal (or give-back) of rmq.proxy.renew: the new handle."""
        return await self._change(tracked.session, tracked.group, tracked.topic,
                                  ReceiptHandle.decode(tracked.handle), invisible)

    async def _change(self, s: ClientSession, group: str, topic: str, handle: ReceiptHandle,
                      invisible: int) -> str:
        """CHANGE_MESSAGE_INVISIBLETIME; the new handle."""
        ext = {"consumerGroup": group, "topic": handle.real_topic(topic, group),
               "queueId": handle.queue_id, "offset": handle.offset,
               "extraInfo": handle.extra_info, "invisibleTime": str(invisible),
               "bname": self.c.broker_config.brokerName}
        response = await self.clients.invoker.invoke(s.channel, CHANGE_MESSAGE_INVISIBLETIME, ext,
                                                     language=s.language)
        check_response(response, "changeInvisibleDuration")
        e = response.ext_fields or {}
        f = handle.fields
        new = (f"{f[7]} {e.get('popTime', '0')} {e.get('invisibleTime', invisible)} "
               f"{e.get('reviveQid', f[3])} {f[4]} {f[5]} {f[6]} {f[7]}")
        return encode_handle(new, int(handle.commit_log_offset))

    async def forward_to_dlq(self, s: ClientSession,
                             request: spb.ForwardMessageToDeadLetterQueueRequest
                             ) -> spb.ForwardMessageToDeadLetterQueueResponse:
        """CONSUMER_SEND_MSG_BACK with delay level -1 (straight to the group's DLQ)
        of the message at the handle's commit-log offset, then its ack (5.3.3's
        ``ProducerProcessor.forwardMessageToDeadLetterQueue``)."""
        topic, group = request.topic.name, request.group.name
        check_topic(topic)
        check_group(group)
        text = await self.renewals.take(s.client_id, group, request.message_id,
                                        request.receipt_handle)
        handle = ReceiptHandle.decode(text)
        if len(handle.fields) < 9 or int(handle.commit_log_offset) < 0:
            raise ProxyError(Code.INVALID_RECEIPT_HANDLE, "commit log offset is empty")
        ext = {"offset": handle.commit_log_offset, "group": group, "delayLevel": "-1",
               "originMsgId": request.message_id, "originTopic": handle.real_topic(topic, group),
               "maxReconsumeTimes": "0", "bname": self.c.broker_config.brokerName}
        response = await self.clients.invoker.invoke(s.channel, RequestCode.CONSUMER_SEND_MSG_BACK,
                                                     ext, language=s.language)
        check_response(response, "forward to the dead letter queue")
        entry = spb.AckMessageEntry(message_id=request.message_id, receipt_handle=text)
        await self._ack_one(s, group, topic, entry)
        return spb.ForwardMessageToDeadLetterQueueResponse(status=status(Code.OK))
