"""``Producer``: sync, async, oneway and batch sends (``DefaultMQProducer``).

Per send: look up (or fetch) the topic's publish queues, pick a queue
(round-robin with latency-fault avoidance, a chosen queue, or a selector),
stamp UNIQ_KEY, compress large bodies, send SEND_MESSAGE_V2 to the broker's
master and map the answer to a ``SendResult``.  Failed sync sends are retried
on another broker up to ``retry_times_when_send_failed`` times for the codes
4.9.8 retries (and transport errors).
"""

from __future__ import annotations

import asyncio
import itertools
import time
import zlib
from collections.abc import Callable, Sequence
from typing import Any

from rmq.client.codec import encode_batch, properties_string
from rmq.client.config import ClientConfig, ProducerConfig
from rmq.client.exceptions import MQBrokerError, MQClientError
from rmq.client.headers import send_header_v2
from rmq.client.instance import MQClientInstance, client_instance, publish_queues
from rmq.client.latency import FAST_LATENCY, MQFaultStrategy
from rmq.client.message import Message, MessageExt, MessageQueue, SendResult, SendStatus
from rmq.client.request_reply import (
    REQUEST_TIMEOUT_EXCEPTION,
    RequestCallback,
    RequestTimeoutError,
    is_reply,
    stamp_request,
)
from rmq.client.selector import QueueSelector
from rmq.client.trace import AsyncTraceDispatcher, pub_context, trace_producer_settings
from rmq.common.codes import RequestCode, ResponseCode
from rmq.common.message import (
    COMPRESSED_FLAG,
    COMPRESSION_ZLIB_TYPE,
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_MSG_REGION,
    PROPERTY_TRACE_SWITCH,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
)
from rmq.common.message_id import create_uniq_id, create_uniq_ids
from rmq.common.route import TopicRouteData
from rmq.common.topics import MASTER_ID, is_retry_topic, validate_topic
from rmq.remoting import RemotingCommand
from rmq.remoting.exceptions import RemotingError

_RETRY_CODES = frozenset({
    ResponseCode.TOPIC_NOT_EXIST, ResponseCode.SERVICE_NOT_AVAILABLE, ResponseCode.SYSTEM_ERROR,
    ResponseCode.NO_PERMISSION, ResponseCode.NO_BUYER_ID, ResponseCode.NOT_IN_CURRENT_UNIT,
})
_STORED = {
    ResponseCode.SUCCESS: SendStatus.SEND_OK,
    ResponseCode.FLUSH_DISK_TIMEOUT: SendStatus.FLUSH_DISK_TIMEOUT,
    ResponseCode.FLUSH_SLAVE_TIMEOUT: SendStatus.FLUSH_SLAVE_TIMEOUT,
    ResponseCode.SLAVE_NOT_AVAILABLE: SendStatus.SLAVE_NOT_AVAILABLE,
}
SendCallback = Callable[[SendResult | None, BaseException | None], None]


class Producer:
    """Sends messages to topics; ``await start()`` before sending, ``await
    shutdown()`` at the end (or ``async with Producer(...)``)."""

    def __init__(self, group: str = "DEFAULT_PRODUCER", namesrv_addr: str | None = None,
                 config: ProducerConfig | None = None, client_config: ClientConfig | None = None,
                 instance: MQClientInstance | None = None) -> None:
        self.config = config or ProducerConfig(producer_group=group)
        self.config.producer_group = group
        self.group = group
        self.instance, self._own_instance = client_instance(namesrv_addr, client_config, instance)
        self.fault = MQFaultStrategy(self.config.send_latency_fault_enable)
        self.publish_info: dict[str, list[MessageQueue]] = {}
        self._counter = itertools.count()
        self._pending: set[asyncio.Future] = set()
        self._valid_topics: set[str] = set()  # validate_topic once per topic
        # send header templates (_request): (mq, topic, batch) ->
        # (create_topic_key, default_topic_queue_nums, fields fixed for that queue)
        self._headers: dict[tuple, tuple[str, int, dict[str, str]]] = {}
        self.tracer: AsyncTraceDispatcher | None = None

    async def __aenter__(self) -> Producer:
        await self.start()
        return self

    async def __aexit__(self, *exc) -> None:
        await self.shutdown()

    async def start(self) -> None:
        self.instance.register_producer(self)
        await self.instance.start()
        if self.config.enable_msg_trace and self.tracer is None:
            name, pcfg, ccfg = trace_producer_settings(self.group, "PRODUCER", self.instance.config)
            self.tracer = AsyncTraceDispatcher(Producer(name, config=pcfg, client_config=ccfg),
                                               self.config.customized_trace_topic)
            await self.tracer.start()

    async def shutdown(self) -> None:
        """Waits for in-flight async sends, unregisters and closes connections."""
        if self._pending:
            await asyncio.wait(list(self._pending), timeout=self.config.send_msg_timeout / 1000)
        if self.tracer is not None:
            await self.tracer.shutdown()
            self.tracer = None
        self.instance.producers.pop(self.group, None)
        if self._own_instance:
            await self.instance.shutdown()

    # --- instance callbacks ----------------------------------------------------
    def publish_topics(self) -> list[str]:
        return list(self.publish_info)

    def on_route(self, topic: str, route: TopicRouteData) -> None:
        if topic in self.publish_info:
            queues = publish_queues(topic, route)
            if queues:
                self.publish_info[topic] = queues

    async def queues_of(self, topic: str) -> list[MessageQueue]:
        """Publish queues of ``topic``; fetched on first use.  An unknown topic
        falls back to the auto-create key topic's brokers (``TBW102``) with
        ``default_topic_queue_nums`` queues, and the broker creates the topic."""
        queues = self.publish_info.get(topic)
        if queues:
            return queues
        self.publish_info.setdefault(topic, [])
        route = await self.instance.update_route(topic)
        if route is not None and self.publish_info.get(topic):
            await self._first_heartbeat()
            return self.publish_info[topic]
        key = self.config.create_topic_key
        default = await self.instance.fetch_route(key)
        if default is not None:
            n = self.config.default_topic_queue_nums
            for qd in default.queueDatas:
                qd.readQueueNums = qd.writeQueueNums = min(n, qd.readQueueNums)
            queues = publish_queues(topic, default)
            if queues:
                self.publish_info[topic] = queues
                await self._first_heartbeat()
                return queues
        raise MQClientError(ResponseCode.TOPIC_NOT_EXIST,
                            f"No route info of this topic: {topic}")

    async def _first_heartbeat(self) -> None:
        if self.instance.broker_versions:
            return
        await self.instance.heartbeat_all()

    # --- message preparation -----------------------------------------------------
    def _validate(self, msg: Message) -> None:
        if msg.topic not in self._valid_topics:
            err = validate_topic(msg.topic)
            if err:
                raise MQClientError(-1, err)
            self._valid_topics.add(msg.topic)
        if not msg.body:
            raise MQClientError(ResponseCode.MESSAGE_ILLEGAL, "the message body length is zero")
        if len(msg.body) > self.config.max_message_size:
            raise MQClientError(ResponseCode.MESSAGE_ILLEGAL,
                                f"the message body size over max value, MAX: "
                                f"{self.config.max_message_size}")

    def _prepare(self, msg: Message) -> tuple[bytes, int, str]:
        """(body to send, sysFlag, properties string); stamps UNIQ_KEY."""
        props = msg.properties
        if PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX not in props:
            props[PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX] = create_uniq_id()
        body = msg.body
        if len(body) >= self.config.compress_msg_body_over_howmuch:
            return (zlib.compress(body, self.config.compress_level),
                    COMPRESSED_FLAG | COMPRESSION_ZLIB_TYPE, properties_string(props))
        return body, 0, properties_string(props)

    def _request(self, mq: MessageQueue, topic: str, body: bytes, sys_flag: int, flag: int,
                 props: str, batch: bool, code: int = RequestCode.SEND_MESSAGE_V2) -> RemotingCommand:
        cfg = self.config
        entry = self._headers.get((mq, topic, batch))
        if (entry is None or entry[0] != cfg.create_topic_key
                or entry[1] != cfg.default_topic_queue_nums):
            entry = self._header_template(mq, topic, batch)
        ext = entry[2].copy()  # same key order as send_header_v2: same header bytes
        if sys_flag:
            ext["f"] = str(sys_flag)
        ext["g"] = str(time.time_ns() // 1_000_000)
        if flag:
            ext["h"] = str(flag)
        ext["i"] = props
        req = RemotingCommand.create_request(RequestCode.SEND_BATCH_MESSAGE if batch else code, None, body)
        req.ext_fields = ext  # already all strings: skip the per-field conversion
        return req

    def _header_template(self, mq: MessageQueue, topic: str,
                         batch: bool) -> tuple[str, int, dict[str, str]]:
        """The send header's fields fixed per queue, topic and config, built once
        (the config's two values are kept to notice a change)."""
        cfg = self.config
        if len(self._headers) > 4096:
            self._headers.clear()
        entry = self._headers[(mq, topic, batch)] = (
            cfg.create_topic_key, cfg.default_topic_queue_nums,
            send_header_v2(self.group, topic, cfg.create_topic_key, cfg.default_topic_queue_nums,
                           mq.queue_id, 0, 0, 0, "", batch, mq.broker_name))
        return entry

    def _addr(self, mq: MessageQueue) -> str:
        addr = self.instance.find_broker_addr(mq.broker_name, only_this=True)
        if addr is None:
            raise MQClientError(-1, f"The broker[{mq.broker_name}] not exist")
        return addr

    @staticmethod
    def _result(resp: RemotingCommand, mq: MessageQueue, msg_id: str, addr: str) -> SendResult:
        status = _STORED.get(resp.code)
        if status is None:
            raise MQBrokerError(resp.code, resp.remark, addr)
        f = resp.ext_fields or {}
        try:
            queue_id = int(f["queueId"])
            offset = int(f["queueOffset"])
        except (KeyError, ValueError):
            raise MQBrokerError(ResponseCode.SYSTEM_ERROR, "send response without queue offset",
                                addr) from None
        if queue_id != mq.queue_id:  # the broker chose (a batch to a retry topic, ...)
            mq = MessageQueue(mq.topic, mq.broker_name, queue_id)
        return SendResult(status, msg_id, f.get("msgId", ""), mq, offset,
                          f.get(PROPERTY_MSG_REGION, ""), f.get(PROPERTY_TRACE_SWITCH) != "false")

    # --- sync ---------------------------------------------------------------
    async def send(self, msg: Message, timeout_ms: int | None = None, mq: MessageQueue | None = None,
                   selector: QueueSelector | None = None, arg: Any = None, *,
                   deliver_time_ms: int | None = None, delay_ms: int | None = None) -> SendResult:
        """Send and wait for the broker's answer.  ``mq`` or ``selector(queues,
        msg, arg)`` fixes the queue (no retry on another broker, as in Java).
        ``deliver_time_ms`` / ``delay_ms`` make it a timer message (Message.set_timer)."""
        if deliver_time_ms is not None or delay_ms is not None:
            msg.set_timer(deliver_time_ms, delay_ms)
        body = msg.body
        if (msg.topic not in self._valid_topics or not body
                or len(body) > self.config.max_message_size):
            self._validate(msg)
        body, sys_flag, props = self._prepare(msg)
        code = RequestCode.SEND_REPLY_MESSAGE_V2 if is_reply(msg) else RequestCode.SEND_MESSAGE_V2
        if self.tracer is None:
            return await self._send_with_retry(msg, body, sys_flag, props, False,
                                               msg.properties[PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX],
                                               timeout_ms, mq, selector, arg, code)
        begin = time.time_ns() // 1_000_000
        result = await self._send_with_retry(msg, body, sys_flag, props, False,
                                             msg.properties[PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX],
                                             timeout_ms, mq, selector, arg, code)
        self._trace_pub(msg, len(body), result, begin)
        return result

    def _trace_pub(self, msg: Message, body_length: int, result: SendResult, begin_ms: int) -> None:
        """A Pub trace record for a send (not for the trace topic itself; not
        when the broker turned tracing off)."""
        tracer = self.tracer
        if tracer is None or msg.topic.startswith(tracer.topic) or not result.trace_on:
            return
        addr = self.instance.find_broker_addr(result.message_queue.broker_name) or ""
        tracer.append(pub_context(self.group, msg, body_length, addr, result, begin_ms))

    async def send_batch(self, msgs: Sequence[Message], timeout_ms: int | None = None,
                         mq: MessageQueue | None = None) -> SendResult:
        """One SEND_BATCH_MESSAGE for messages of one topic (no retry topics, no delay)."""
        if not msgs:
            raise MQClientError(-1, "the batch is empty")
        msgs = list(msgs)
        topic = msgs[0].topic
        # topic checks once for the batch; the same order of errors as per message
        self._validate(msgs[0])
        if is_retry_topic(topic):
            raise MQClientError(-1, "Retry Group is not supported for batching")
        max_size = self.config.max_message_size
        uniq_key = PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX
        unstamped = []
        for m in msgs:
            if m.topic != topic or not m.body or len(m.body) > max_size:
                self._validate(m)
                if m.topic != topic:
                    raise MQClientError(-1, "The topic of the messages in one batch should be "
                                            "the same")
            props = m.properties
            if PROPERTY_DELAY_TIME_LEVEL in props:
                raise MQClientError(-1, "TimeDelayLevel is not supported for batching")
            if uniq_key not in props:
                unstamped.append(props)
        timers = {tuple(sorted(m.timer_properties().items())) for m in msgs}
        if len(timers) > 1:
            raise MQClientError(-1, "The timer properties of the messages in one batch should "
                                    "be the same")
        if unstamped:  # one clock read and one counter range for the batch
            for props, uid in zip(unstamped, create_uniq_ids(len(unstamped)), strict=True):
                props[uniq_key] = uid
        ids = [m.properties[uniq_key] for m in msgs]
        body = encode_batch(msgs)
        if len(body) > self.config.max_message_size:
            raise MQClientError(ResponseCode.MESSAGE_ILLEGAL,
                                f"the batch size over max value, MAX: {self.config.max_message_size}")
        head = Message(topic, body, flag=0)
        head.properties.update(msgs[0].timer_properties())  # batch-level: the broker parks the batch
        begin = time.time_ns() // 1_000_000
        result = await self._send_with_retry(head, body, 0, properties_string(head.properties)
                                             if head.properties else "", True, ",".join(ids), timeout_ms,
                                             mq, None, None)
        self._trace_pub(head, len(body), result, begin)
        return result

    async def _send_with_retry(self, msg: Message, body: bytes, sys_flag: int, props: str,
                               batch: bool, msg_id: str, timeout_ms: int | None,
                               mq: MessageQueue | None, selector: QueueSelector | None,
                               arg: Any, code: int = RequestCode.SEND_MESSAGE_V2) -> SendResult:
        timeout = timeout_ms or self.config.send_msg_timeout
        monotonic = time.monotonic
        begin = monotonic()
        deadline = begin + timeout / 1000
        fixed = mq is not None or selector is not None
        times = 1 if fixed else 1 + self.config.retry_times_when_send_failed
        topic = msg.topic
        fault = self.fault
        quarantine = fault.tolerance.items  # empty: a fast answer changes nothing
        broker_addrs = self.instance.broker_addrs
        last_broker: str | None = None
        last_error: BaseException | None = None
        for attempt in range(times):
            if attempt:
                begin = monotonic()
            left = int((deadline - begin) * 1000)
            if left <= 0:
                break
            queues = self.publish_info.get(topic) or await self.queues_of(topic)
            if mq is not None:
                target = mq
            elif selector is not None:
                target = selector(queues, msg, arg)
            else:
                target = fault.select(queues, next(self._counter), last_broker)
            last_broker = target.broker_name
            try:
                addrs = broker_addrs.get(last_broker)
                addr = addrs.get(MASTER_ID) if addrs else None
                if addr is None:
                    addr = self._addr(target)
                req = self._request(target, topic, body, sys_flag, msg.flag, props, batch, code)
                resp = await self.instance.remoting.invoke(addr, req, left)
                result = self._result(resp, target, msg_id, addr)
            except RemotingError as e:
                fault.update(last_broker, (monotonic() - begin) * 1000, True)
                last_error = e
                await self.instance.update_route(topic)
                continue
            except MQBrokerError as e:
                fault.update(last_broker, (monotonic() - begin) * 1000, True)
                last_error = e
                if e.code in _RETRY_CODES:
                    await self.instance.update_route(topic)
                    continue
                raise
            latency = (monotonic() - begin) * 1000
            if quarantine or latency >= FAST_LATENCY:
                fault.update(last_broker, latency, False)
            return result
        if isinstance(last_error, MQClientError):
            raise last_error
        raise MQClientError(-1, f"Send [{times}] times, still failed, cost "
                                f"[{timeout}]ms, Topic: {msg.topic}: {last_error or 'timeout'}")

    # --- async / oneway ----------------------------------------------------------
    def send_async(self, msg: Message, callback: SendCallback | None = None,
                   timeout_ms: int | None = None, mq: MessageQueue | None = None,
                   selector: QueueSelector | None = None, arg: Any = None) -> asyncio.Future:
        """Start a send without waiting; returns a future of the SendResult and
        calls ``callback(result, error)`` when done."""
        fut = asyncio.ensure_future(self.send(msg, timeout_ms, mq, selector, arg))
        self._pending.add(fut)

        def done(f: asyncio.Future) -> None:
            self._pending.discard(f)
            if callback is not None:
                if f.cancelled():
                    callback(None, asyncio.CancelledError())
                elif f.exception() is not None:
                    callback(None, f.exception())
                else:
                    callback(f.result(), None)
            elif not f.cancelled():
                f.exception()  # retrieved: the caller holds the future

        fut.add_done_callback(done)
        return fut

    async def send_oneway(self, msg: Message, mq: MessageQueue | None = None,
                          selector: QueueSelector | None = None, arg: Any = None) -> None:
        """Fire and forget: no answer, no retry."""
        self._validate(msg)
        body, sys_flag, props = self._prepare(msg)
        queues = await self.queues_of(msg.topic)
        if mq is None:
            mq = (selector(queues, msg, arg) if selector is not None
                  else self.fault.select(queues, next(self._counter), None))
        code = RequestCode.SEND_REPLY_MESSAGE_V2 if is_reply(msg) else RequestCode.SEND_MESSAGE_V2
        req = self._request(mq, msg.topic, body, sys_flag, msg.flag, props, False, code)
        await self.instance.remoting.invoke_oneway(self._addr(mq), req,
                                                   self.config.send_msg_timeout)

    # --- request / reply -------------------------------------------------------------
    async def request(self, msg: Message, timeout_ms: int = 3000, mq: MessageQueue | None = None,
                      selector: QueueSelector | None = None, arg: Any = None) -> MessageExt:
        """Send ``msg`` as a request and wait for its reply (``request``): the
        responder answers with ``create_reply_message``.  RequestTimeoutError
        when the send worked but no reply came within ``timeout_ms``."""
        begin = time.monotonic()
        correlation_id = stamp_request(msg, self.instance.client_id, timeout_ms)
        requests = self.instance.requests
        reply = requests.add(correlation_id)
        try:
            if msg.topic not in self.instance.routes:  # the broker must know us to push the reply
                await self.queues_of(msg.topic)
                await self.instance.heartbeat_all()
            try:
                await self.send(msg, timeout_ms, mq, selector, arg)
            except (MQClientError, RemotingError) as e:
                raise MQClientError(-1, f"send request message to <{msg.topic}> fail: {e}") from e
            left = timeout_ms / 1000 - (time.monotonic() - begin)
            try:
                return await asyncio.wait_for(reply, max(left, 0.001))
            except TimeoutError:
                raise RequestTimeoutError(
                    REQUEST_TIMEOUT_EXCEPTION, f"send request message to <{msg.topic}> OK, but wait "
                                               f"reply message timeout, {timeout_ms} ms.") from None
        finally:
            requests.discard(correlation_id)

    def request_async(self, msg: Message, callback: RequestCallback | None = None,
                      timeout_ms: int = 3000, mq: MessageQueue | None = None,
                      selector: QueueSelector | None = None, arg: Any = None) -> asyncio.Future:
        """``request`` without waiting: a future of the reply, and
        ``callback(reply, error)`` when it completes."""
        fut = asyncio.ensure_future(self.request(msg, timeout_ms, mq, selector, arg))
        self._pending.add(fut)

        def done(f: asyncio.Future) -> None:
            self._pending.discard(f)
            error = asyncio.CancelledError() if f.cancelled() else f.exception()
            if callback is not None:
                callback(None if error else f.result(), error)

        fut.add_done_callback(done)
        return fut

    async def fetch_publish_queues(self, topic: str) -> list[MessageQueue]:
        """The queues a selector chooses from (``fetchPublishMessageQueues``)."""
        return list(await self.queues_of(topic))
