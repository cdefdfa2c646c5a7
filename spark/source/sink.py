"""``df.write.format("rmq")`` and ``writeStream.format("rmq")``: rows become messages.

Columns (any other column is ignored): ``body`` (binary or string, required,
never empty), ``topic`` (string; the ``topic`` option, when given, wins over
it, as in Spark's Kafka sink), ``tags`` (string), ``keys`` (string, space-separated, or an array of
strings) and ``properties`` (map of strings: user properties; the names the
client and broker own, such as UNIQ_KEY, are dropped so that a row read from
rmq can be sent again as a new message).

Each task runs one :class:`rmq.client.Producer`: rows of one topic go out
as SEND_BATCH_MESSAGE requests of up to ``batchSize`` messages and
``batchMaxBytes`` bytes, ``maxInFlight`` requests at a time (a message with
a DELAY property is sent on its own, as batches cannot carry one).  A
request that fails is retried ``sendRetries`` times after a growing pause;
a message still not sent, or a row that cannot be a message, fails the task
with the reason, so Spark retries it or the job fails: nothing is dropped.
Delivery is at least once: a retried task or batch sends its rows again.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import ArrayType, BinaryType, MapType, StringType, StructType

from rmq.client.config import ClientConfig, ProducerConfig
from rmq.client.exceptions import MQClientError
from rmq.client.message import Message
from rmq.client.producer import Producer
from rmq.common import message as mc
from rmq.common.codes import ResponseCode
from rmq.common.topics import validate_topic
from spark.source.cluster import TRANSIENT, run
from spark.source.options import OptionError, SinkOptions

# properties the client or broker set themselves (MessageConst's system keys)
OWNED_PROPERTIES = frozenset({
    mc.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX, mc.PROPERTY_MIN_OFFSET, mc.PROPERTY_MAX_OFFSET,
    mc.PROPERTY_CLUSTER, mc.PROPERTY_TRANSACTION_PREPARED, mc.PROPERTY_PRODUCER_GROUP,
    mc.PROPERTY_REAL_TOPIC, mc.PROPERTY_REAL_QUEUE_ID, mc.PROPERTY_RETRY_TOPIC,
    mc.PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET, mc.PROPERTY_CONSUME_START_TIMESTAMP,
    mc.PROPERTY_INNER_MULTI_DISPATCH, mc.PROPERTY_INNER_MULTI_QUEUE_OFFSET,
    mc.PROPERTY_ORIGIN_MESSAGE_ID, mc.PROPERTY_TRANSACTION_CHECK_TIMES,
})
COLUMN_TYPES = {
    "body": (BinaryType, StringType), "topic": (StringType,), "tags": (StringType,),
    "keys": (StringType, ArrayType), "properties": (MapType,),
}


def check_schema(schema: StructType, o: SinkOptions) -> None:
    """Fail before any task runs when the rows cannot become messages."""
    fields = {f.name: f.dataType for f in schema.fields}
    if "body" not in fields:
        raise OptionError("rmq: the rows to send need a body column (binary or string)")
    if "topic" not in fields and o.topic is None:
        raise OptionError("rmq: the rows to send need a topic column or the topic option")
    for name, kinds in COLUMN_TYPES.items():
        if name in fields and not isinstance(fields[name], kinds):
            raise OptionError(f"rmq: column {name} is {fields[name].simpleString()}, expected "
                              + " or ".join(k.typeName() for k in kinds))


@dataclass(slots=True)
class SentCount(WriterCommitMessage):
    messages: int
    requests: int


def to_messages(batch: pa.RecordBatch, topic_option: str | None) -> list[Message]:
    """The batch's rows as messages; a row that cannot be one raises ValueError."""
    cols = {name: batch.column(name).to_pylist() for name in batch.schema.names if name in COLUMN_TYPES}
    out = []
    for i, body in enumerate(cols["body"]):
        topic = topic_option or (cols["topic"][i] if "topic" in cols else None)
        err = validate_topic(topic)
        if err:
            raise ValueError(f"rmq: row {i} of a batch: topic {topic!r}: {err}")
        if isinstance(body, str):
            body = body.encode("utf-8")
        if not body:
            raise ValueError(f"rmq: row {i} of a batch for {topic} has an empty body "
                             "(a RocketMQ message needs one)")
        props = {k: v for k, v in (cols["properties"][i] or []) if k not in OWNED_PROPERTIES
                 and v is not None} if "properties" in cols else {}
        keys = cols["keys"][i] if "keys" in cols else None
        out.append(Message(topic, bytes(body), tags=cols["tags"][i] if "tags" in cols else None,
                           keys=[k for k in keys if k] if isinstance(keys, list) else keys,
                           properties=props))
    return out


class _Sender:
    """One task's producer and its requests in flight."""

    def __init__(self, o: SinkOptions) -> None:
        self.o = o
        config = ProducerConfig(send_msg_timeout=o.send_timeout_ms)
        self.producer = Producer(o.group, config=config, client_config=ClientConfig(namesrv_addr=o.namesrv))
        self.slots = asyncio.Semaphore(o.max_in_flight)
        self.tasks: list[asyncio.Task] = []
        self.messages = 0
        self.requests = 0

    async def send_all(self, batches: Iterator[pa.RecordBatch]) -> SentCount:
        await self.producer.start()
        try:
            for batch in batches:
                by_topic: dict[str, list[Message]] = {}
                for m in to_messages(batch, self.o.topic):
                    by_topic.setdefault(m.topic, []).append(m)
                for msgs in by_topic.values():
                    for group in self._requests(msgs):
                        await self.slots.acquire()
                        self._reap()
                        self.tasks.append(asyncio.ensure_future(self._send(group)))
            await asyncio.gather(*self.tasks)
        finally:
            for t in self.tasks:
                t.cancel()
            await self.producer.shutdown()
        return SentCount(self.messages, self.requests)

    def _reap(self) -> None:
        """Raise the first failure of a finished request (the task fails at once)."""
        done = [t for t in self.tasks if t.done()]
        self.tasks = [t for t in self.tasks if not t.done()]
        for t in done:
            t.result()

    def _requests(self, msgs: list[Message]) -> Iterator[list[Message]]:
        group: list[Message] = []
        size = 0
        for m in msgs:
            if mc.PROPERTY_DELAY_TIME_LEVEL in m.properties:
                yield [m]
                continue
            n = len(m.body) + 64 + sum(len(k) + len(v) + 2 for k, v in m.properties.items())
            if group and (len(group) >= self.o.batch_size or size + n > self.o.batch_max_bytes):
                yield group
                group, size = [], 0
            group.append(m)
            size += n
        if group:
            yield group

    async def _send(self, msgs: list[Message]) -> None:
        o = self.o
        try:
            for attempt in range(o.send_retries + 1):
                try:
                    if len(msgs) == 1:
                        await self.producer.send(msgs[0])
                    else:
                        await self.producer.send_batch(msgs)
                    self.messages += len(msgs)
                    self.requests += 1
                    return
                except TRANSIENT as e:
                    if isinstance(e, MQClientError) and e.code == ResponseCode.MESSAGE_ILLEGAL:
                        raise RuntimeError(f"rmq: {len(msgs)} message(s) to {msgs[0].topic} "
                                           f"refused: {e}") from e
                    if attempt == o.send_retries:
                        raise RuntimeError(f"rmq: {len(msgs)} message(s) to {msgs[0].topic} not "
                                           f"sent after {attempt + 1} attempts: {e}") from e
                    await asyncio.sleep(o.retry_backoff_ms / 1000 * 2 ** attempt)
        finally:
            self.slots.release()


def _write(o: SinkOptions, batches: Iterator[pa.RecordBatch]) -> SentCount:
    async def go() -> SentCount:
        return await _Sender(o).send_all(batches)

    return run(go())


class RmqWriter(DataSourceArrowWriter):
    def __init__(self, options: SinkOptions) -> None:
        self.o = options

    def write(self, iterator: Iterator[pa.RecordBatch]) -> SentCount:
        return _write(self.o, iterator)


class RmqStreamWriter(DataSourceStreamArrowWriter):
    """Each micro-batch's rows are sent by its tasks; nothing is left to commit."""

    def __init__(self, options: SinkOptions) -> None:
        self.o = options

    def write(self, iterator: Iterator[pa.RecordBatch]) -> SentCount:
        return _write(self.o, iterator)
