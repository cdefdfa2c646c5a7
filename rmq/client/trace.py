"""Message trace as 4.9.8's client writes and reads it (``client.trace``).

A traced producer records a Pub line per send, a traced push consumer a
SubBefore line per message before its listener and a SubAfter line after it,
a transactional producer an EndTransaction line per commit or rollback.  The
lines are text, fields split by \\x01 and records ended by \\x02, in exactly
the field order of 4.9.8's TraceDataEncoder (including its ``null`` for a
missing tag or key, and its 13-field Pub line).  ``AsyncTraceDispatcher``
batches them per trace topic (up to about 118,000 characters, or 500 ms after
the first) and sends each batch as one message of the trace topic whose keys
are the traced message ids and keys: ``queryMsgTraceById`` finds them through
the broker's index.
"""

from __future__ import annotations

import asyncio
import enum
import inspect
import itertools
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from rmq.client.config import ClientConfig, ProducerConfig
from rmq.client.message import Message, MessageExt, SendResult, SendStatus
from rmq.common import message as mc
from rmq.common.message_id import create_uniq_id
from rmq.common.topics import TRACE_TOPIC

log = logging.getLogger("rmq.client")

CONTENT = "\x01"  # TraceConstants.CONTENT_SPLITOR
FIELD = "\x02"  # TraceConstants.FIELD_SPLITOR
GROUP_NAME_PREFIX = "_INNER_TRACE_PRODUCER"
TRACE_INSTANCE_NAME = "PID_CLIENT_INNER_TRACE_PRODUCER"
DEFAULT_REGION = "DefaultRegion"  # MixAll.DEFAULT_TRACE_REGION_ID
MAX_MSG_SIZE = 128_000
QUEUE_SIZE = 1024
POLL_S = 0.1
WAIT_THRESHOLD_S = 0.5
_COUNTER = itertools.count(1)


class TraceType(enum.Enum):
    Pub = "Pub"
    SubBefore = "SubBefore"
    SubAfter = "SubAfter"
    EndTransaction = "EndTransaction"


class MessageType(enum.IntEnum):
    """Ordinals as written in Pub and EndTransaction lines."""

    Normal_Msg = 0
    Trans_Msg_Half = 1
    Trans_msg_Commit = 2
    Delay_Msg = 3


class ConsumeReturnType(enum.IntEnum):
    """The context code of a SubAfter line."""

    SUCCESS = 0
    TIME_OUT = 1
    EXCEPTION = 2
    RETURNNULL = 3
    FAILED = 4


def _text(value) -> str:
    """A field as Java's StringBuilder appends it: null, true/false, or the text."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, enum.IntEnum):
        return str(int(value))
    return str(value)


@dataclass(slots=True)
class TraceBean:
    topic: str | None = ""
    msg_id: str | None = ""
    offset_msg_id: str | None = ""
    tags: str | None = ""
    keys: str | None = ""
    store_host: str | None = ""
    client_host: str | None = ""
    store_time: int = 0
    retry_times: int = 0
    body_length: int = 0
    msg_type: MessageType | None = None
    transaction_state: str | None = None
    transaction_id: str | None = None
    from_transaction_check: bool = False


@dataclass(slots=True)
class TraceContext:
    trace_type: TraceType
    timestamp: int = field(default_factory=lambda: time.time_ns() // 1_000_000)
    region_id: str | None = ""
    group: str | None = ""
    cost_time: int = 0
    success: bool = True
    request_id: str = field(default_factory=create_uniq_id)
    context_code: int = 0
    cloud: bool = False  # AccessChannel.CLOUD: SubAfter lines end without time and group
    beans: list[TraceBean] = field(default_factory=list)


# --------------------------------------------------------------------------- encode / decode
def _line(*values) -> str:
    return CONTENT.join(_text(v) for v in values)


def encode(ctx: TraceContext) -> tuple[str, list[str]]:
    """The trace text of ``ctx`` and the keys its trace message is indexed by
    (each traced message id and each of its keys)."""
    t = ctx.trace_type
    if t is TraceType.Pub:
        b = ctx.beans[0]
        data = _line(t.value, ctx.timestamp, ctx.region_id, ctx.group, b.topic, b.msg_id, b.tags, b.keys,
                     b.store_host, b.body_length, ctx.cost_time, b.msg_type, b.offset_msg_id, ctx.success) + FIELD
    elif t is TraceType.SubBefore:
        data = "".join(_line(t.value, ctx.timestamp, ctx.region_id, ctx.group, ctx.request_id, b.msg_id,
                             b.retry_times, b.keys) + FIELD for b in ctx.beans)
    elif t is TraceType.SubAfter:
        parts = []
        for b in ctx.beans:
            head = _line(t.value, ctx.request_id, b.msg_id, ctx.cost_time, ctx.success, b.keys,
                         ctx.context_code) + CONTENT
            parts.append(head if ctx.cloud else head + _line(ctx.timestamp, ctx.group) + FIELD)
        data = "".join(parts)
    else:
        b = ctx.beans[0]
        data = _line(t.value, ctx.timestamp, ctx.region_id, ctx.group, b.topic, b.msg_id, b.tags, b.keys,
                     b.store_host, b.msg_type, b.transaction_id, b.transaction_state,
                     b.from_transaction_check) + FIELD
    keys: list[str] = []
    for b in ctx.beans:
        keys.append(_text(b.msg_id))
        if b.keys:
            keys.extend(k for k in b.keys.split(mc.KEY_SEPARATOR))
    return data, keys


def _bool(text: str) -> bool:
    return text.lower() == "true"  # Boolean.parseBoolean


def decode(data: str) -> list[TraceContext]:
    """Every record of a trace message body, as 4.9.8's decoder reads them
    (older and newer line lengths included); unknown types are skipped."""
    out: list[TraceContext] = []
    for record in data.split(FIELD):
        f = record.split(CONTENT)
        kind = f[0]
        if kind == "Pub":
            ctx = TraceContext(TraceType.Pub, int(f[1]), f[2], f[3], int(f[10]))
            bean = TraceBean(topic=f[4], msg_id=f[5], tags=f[6], keys=f[7], store_host=f[8],
                             body_length=int(f[9]), msg_type=MessageType(int(f[11])))
            if len(f) == 13:
                ctx.success = _bool(f[12])
            elif len(f) >= 14:
                bean.offset_msg_id, ctx.success = f[12], _bool(f[13])
                if len(f) >= 15:
                    bean.client_host = f[14]
            ctx.beans.append(bean)
        elif kind == "SubBefore":
            ctx = TraceContext(TraceType.SubBefore, int(f[1]), f[2], f[3], request_id=f[4])
            ctx.beans.append(TraceBean(msg_id=f[5], retry_times=int(f[6]), keys=f[7]))
        elif kind == "SubAfter":
            ctx = TraceContext(TraceType.SubAfter, request_id=f[1], cost_time=int(f[3]), success=_bool(f[4]))
            ctx.beans.append(TraceBean(msg_id=f[2], keys=f[5]))
            if len(f) >= 7 and f[6]:
                ctx.context_code = int(f[6])
            if len(f) >= 9:
                ctx.timestamp, ctx.group = int(f[7]), f[8]
            else:
                ctx.timestamp, ctx.group = 0, ""
        elif kind == "EndTransaction":
            ctx = TraceContext(TraceType.EndTransaction, int(f[1]), f[2], f[3])
            ctx.beans.append(TraceBean(topic=f[4], msg_id=f[5], tags=f[6], keys=f[7], store_host=f[8],
                                       msg_type=MessageType(int(f[9])), transaction_id=f[10],
                                       transaction_state=f[11], from_transaction_check=_bool(f[12])))
        else:
            continue
        out.append(ctx)
    return out


def trace_views(msg_id: str, trace_message: MessageExt) -> list[dict]:
    """The records of one trace message about ``msg_id`` (``TraceView``):
    msgType is the record type; clientHost the trace message's born host."""
    views = []
    for ctx in decode(trace_message.body.decode("utf-8", "replace")):
        bean = ctx.beans[0]
        if bean.msg_id != msg_id:
            continue
        views.append({
            "msgId": bean.msg_id, "tags": bean.tags, "keys": bean.keys, "storeHost": bean.store_host,
            "clientHost": trace_message.born_host, "costTime": ctx.cost_time,
            "msgType": ctx.trace_type.value, "offSetMsgId": bean.offset_msg_id, "timeStamp": ctx.timestamp,
            "topic": bean.topic, "groupName": ctx.group, "status": "success" if ctx.success else "failed",
        })
    return views


# --------------------------------------------------------------------------- what is traced
def message_type(msg: Message) -> MessageType:
    props = msg.properties
    if props.get(mc.PROPERTY_TRANSACTION_PREPARED) == "true":
        return MessageType.Trans_Msg_Half
    if mc.PROPERTY_DELAY_TIME_LEVEL in props:
        return MessageType.Delay_Msg
    return MessageType.Normal_Msg


def pub_context(group: str, msg: Message, body_length: int, broker_addr: str, result: SendResult,
                begin_ms: int) -> TraceContext:
    """The Pub record of a send that got ``result`` (begun at ``begin_ms``)."""
    now = time.time_ns() // 1_000_000
    bean = TraceBean(topic=msg.topic, msg_id=result.msg_id, offset_msg_id=result.offset_msg_id,
                     tags=msg.tags, keys=msg.keys, store_host=broker_addr, body_length=body_length,
                     msg_type=message_type(msg), store_time=begin_ms + (now - begin_ms) // 2)
    return TraceContext(TraceType.Pub, begin_ms, result.region_id or DEFAULT_REGION, group, now - begin_ms,
                        result.status is SendStatus.SEND_OK, beans=[bean])


def sub_before(group: str, msgs: list[MessageExt]) -> TraceContext | None:
    """The SubBefore record of a listener call, None when no message is traced."""
    ctx = TraceContext(TraceType.SubBefore, group=group)
    for m in msgs:
        if m.properties.get(mc.PROPERTY_TRACE_SWITCH) == "false":
            continue
        ctx.region_id = m.properties.get(mc.PROPERTY_MSG_REGION)
        ctx.beans.append(TraceBean(topic=m.topic, msg_id=m.msg_id, tags=m.tags, keys=m.keys,
                                   store_time=m.store_timestamp, body_length=m.store_size,
                                   retry_times=m.reconsume_times))
    return ctx if ctx.beans else None


def sub_after(before: TraceContext, n: int, success: bool, code: ConsumeReturnType) -> TraceContext:
    cost = (time.time_ns() // 1_000_000 - before.timestamp) // max(n, 1)
    return TraceContext(TraceType.SubAfter, region_id=before.region_id, group=before.group,
                        request_id=before.request_id, success=success, cost_time=cost,
                        context_code=int(code), beans=before.beans)


def end_transaction_context(group: str, msg: Message, broker_addr: str, client_id: str, msg_id: str,
                            transaction_id: str | None, state: str, from_check: bool) -> TraceContext:
    bean = TraceBean(topic=msg.topic, msg_id=msg_id, tags=msg.tags, keys=msg.keys, store_host=broker_addr,
                     client_host=client_id, msg_type=MessageType.Trans_msg_Commit,
                     transaction_id=transaction_id, transaction_state=state, from_transaction_check=from_check)
    region = msg.properties.get(mc.PROPERTY_MSG_REGION) or DEFAULT_REGION
    return TraceContext(TraceType.EndTransaction, region_id=region, group=group, beans=[bean])


# --------------------------------------------------------------------------- the dispatcher
def trace_producer_settings(group: str, kind: str,
                            client_config: ClientConfig) -> tuple[str, ProducerConfig, ClientConfig]:
    """Group, producer and client settings of the producer that sends a traced
    producer's or consumer's records (``kind``: PRODUCER or CONSUMER)."""
    config = ClientConfig(namesrv_addr=client_config.namesrv_addr, client_ip=client_config.client_ip,
                          instance_name=f"{TRACE_INSTANCE_NAME}_{client_config.namesrv_addr}",
                          # signed as the traced client (4.9.8 hands its RPCHook over)
                          access_key=client_config.access_key,
                          secret_key=client_config.secret_key,
                          security_token=client_config.security_token)
    name = f"{GROUP_NAME_PREFIX}-{group}-{kind}-{next(_COUNTER)}"
    return name, ProducerConfig(producer_group=name, send_msg_timeout=5000, max_message_size=MAX_MSG_SIZE), config


class AsyncTraceDispatcher:
    """Collects trace records and sends them in batches from its own producer
    (group ``_INNER_TRACE_PRODUCER-<group>-<PRODUCER|CONSUMER>-<n>``, its own
    client instance, 5 s send timeout, 128,000-byte messages).  ``append``
    never blocks: a full queue (1,024 records) drops the record and counts it."""

    def __init__(self, producer, trace_topic: str | None) -> None:
        self.topic = trace_topic or TRACE_TOPIC
        self.producer = producer  # made from trace_producer_settings
        self.discarded = 0
        self._queue: asyncio.Queue[TraceContext] | None = None
        self._segment: list[str] = []
        self._segment_keys: set[str] = set()
        self._segment_size = 0
        self._first_add = 0.0
        self._sends: set[asyncio.Future] = set()
        self._worker: asyncio.Task | None = None

    async def start(self) -> None:
        self._queue = asyncio.Queue(QUEUE_SIZE)
        await self.producer.start()
        self._worker = asyncio.get_running_loop().create_task(self._run())

    def append(self, ctx: TraceContext) -> bool:
        if self._queue is None:
            return False
        try:
            self._queue.put_nowait(ctx)
            return True
        except asyncio.QueueFull:
            self.discarded += 1
            if self.discarded % 1000 == 1:
                log.info("trace queue full: %d trace records dropped so far", self.discarded)
            return False

    async def _run(self) -> None:
        queue = self._queue
        assert queue is not None
        while True:
            try:
                ctx = await asyncio.wait_for(queue.get(), POLL_S)
            except TimeoutError:
                ctx = None
            if ctx is not None and ctx.beans:
                self._add(ctx)
            if self._segment and time.monotonic() - self._first_add >= WAIT_THRESHOLD_S:
                self._send_segment()

    def _add(self, ctx: TraceContext) -> None:
        data, keys = encode(ctx)
        if not self._segment:
            self._first_add = time.monotonic()
        self._segment.append(data)
        self._segment_keys.update(keys)
        self._segment_size += len(data)
        if self._segment_size >= MAX_MSG_SIZE - 10_000:
            self._send_segment()

    def _send_segment(self) -> None:
        msg = Message(self.topic, "".join(self._segment).encode("utf-8"), keys=sorted(self._segment_keys))
        self._segment, self._segment_keys, self._segment_size = [], set(), 0
        fut = self.producer.send_async(msg, callback=self._sent)
        self._sends.add(fut)
        fut.add_done_callback(self._sends.discard)

    def _sent(self, result: SendResult | None, error: BaseException | None) -> None:
        if error is not None:
            log.info("send trace data failed: %s", error)

    async def flush(self, timeout: float = 5.0) -> None:
        """Everything appended so far sent, and the sends answered (bounded)."""
        deadline = time.monotonic() + timeout
        queue = self._queue
        while queue is not None and not queue.empty() and time.monotonic() < deadline:
            self._add(queue.get_nowait())
        if self._segment:
            self._send_segment()
        if self._sends:
            await asyncio.wait(list(self._sends), timeout=max(0.0, deadline - time.monotonic()))

    async def shutdown(self) -> None:
        if self._worker is not None:
            self._worker.cancel()
            await asyncio.gather(self._worker, return_exceptions=True)
            self._worker = None
        await self.flush()
        await self.producer.shutdown()
        self._queue = None


def traced_listener(listener: Callable, dispatcher: AsyncTraceDispatcher, group: str,
                    success_statuses: tuple, timeout_ms: int) -> Callable:
    """``listener`` wrapped to record SubBefore and SubAfter around each call,
    keeping its kind (a coroutine function stays one)."""

    def after(before: TraceContext | None, msgs, status, begin: float, error: bool) -> None:
        if before is None:
            return
        if error:
            code = ConsumeReturnType.EXCEPTION
        elif status is None:
            code = ConsumeReturnType.RETURNNULL
        elif (time.monotonic() - begin) * 1000 >= timeout_ms:
            code = ConsumeReturnType.TIME_OUT
        elif status in success_statuses:
            code = ConsumeReturnType.SUCCESS
        else:
            code = ConsumeReturnType.FAILED
        dispatcher.append(sub_after(before, len(msgs), status in success_statuses, code))

    def before_call(msgs) -> TraceContext | None:
        ctx = sub_before(group, msgs)
        if ctx is not None:
            dispatcher.append(ctx)
        return ctx

    if inspect.iscoroutinefunction(listener):
        async def traced_async(msgs, ctx):
            before, begin = before_call(msgs), time.monotonic()
            try:
                status = await listener(msgs, ctx)
            except Exception:
                after(before, msgs, None, begin, True)
                raise
            after(before, msgs, status, begin, False)
            return status
        return traced_async

    def traced(msgs, ctx):
        before, begin = before_call(msgs), time.monotonic()
        try:
            status = listener(msgs, ctx)
        except Exception:
            after(before, msgs, None, begin, True)
            raise
        if inspect.isawaitable(status):
            async def finish():
                try:
                    result = await status
                except Exception:
                    after(before, msgs, None, begin, True)
                    raise
                after(before, msgs, result, begin, False)
                return result
            return finish()
        after(before, msgs, status, begin, False)
        return status
    return traced
