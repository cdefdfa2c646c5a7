"""A name server and a broker as real processes for the ``rmq`` data source
tests, driven from synchronous Spark tests, and a producer and a consumer
that know what they sent and read."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from rmq.client import LitePullConsumer, Message, MQAdmin, Producer
from rmq.client.config import ClientConfig
from rmq.testing.cluster import Cluster
from rmq.testing.wait import wait_until_blocking


class Broker(Cluster):
    """rmq-namesrv + one rmq-broker (``broker-a``), the broker restartable;
    with ``joining``, another broker (``name``) of that broker's name server;
    driven from synchronous Spark tests."""

    def __init__(self, tmp: Path, name: str = "broker-a", joining: Broker | None = None) -> None:
        super().__init__(tmp, broker_name=name, share_namesrv=joining,
                         store="store" if joining is None else f"store-{name}")

    def start(self) -> None:
        self.start_broker()
        self.wait_route("TBW102")

    def close(self) -> None:
        asyncio.run(super().close())

    def route(self, topic: str):
        async def go():
            async with MQAdmin(self.namesrv_addr) as admin:
                try:
                    return await admin.topic_route(topic)
                except Exception:
                    return None
        return asyncio.run(go())

    def wait_route(self, topic: str, timeout: float = 20.0) -> None:
        wait_until_blocking(lambda: (r := self.route(topic)) is not None and any(
            str(self.port) in str(a) for b in r.brokerDatas for a in b.brokerAddrs.values()),
            timeout, what=f"route of {topic}")

    def create_topic(self, topic: str, queues: int = 4) -> None:
        async def go():
            async with MQAdmin(self.namesrv_addr) as admin:
                await admin.create_topic(f"127.0.0.1:{self.port}", topic, queues, queues)
        asyncio.run(go())
        self.wait_route(topic)


@contextmanager
def running_broker(tmp: Path, name: str = "broker-a", joining: Broker | None = None) -> Iterator[Broker]:
    """A started :class:`Broker`, always stopped at the end."""
    b = Broker(tmp, name, joining)
    try:
        b.start()
        yield b
    finally:
        b.close()


@dataclass(frozen=True)
class Sent:
    """What the producer sent and the broker acknowledged."""

    topic: str
    msg_id: str
    body: bytes
    tags: str
    keys: str
    props: tuple[tuple[str, str], ...]
    queue_id: int
    queue_offset: int
    broker: str = "broker-a"


def body_of(topic: str, i: int) -> bytes:
    """Bodies of all sizes: every 25th is over 4 KiB, which the producer compresses."""
    text = f"{topic}-{i:06d}|".encode()
    return text * (400 if i % 25 == 0 else 1 + i % 7)


def produce(namesrv: str, topic: str, n: int, start: int = 0) -> list[Sent]:
    async def go() -> list[Sent]:
        out = []
        config = ClientConfig(namesrv_addr=namesrv, client_ip="127.0.0.1")
        async with Producer("spark-test-pg", client_config=config) as p:
            for i in range(start, start + n):
                props = {"seq": str(i), "kind": "odd" if i % 2 else "even"}
                m = Message(topic, body_of(topic, i), tags=f"T{i % 3}", keys=f"k{i}", properties=props)
                r = await p.send(m)
                out.append(Sent(topic, r.msg_id, m.body, m.tags, m.keys, tuple(sorted(props.items())),
                                r.message_queue.queue_id, r.queue_offset, r.message_queue.broker_name))
        return out
    return asyncio.run(go())


def consume(namesrv: str, topic: str, count: int, timeout: float = 60.0) -> list:
    """Every message of ``topic`` from offset 0, once ``count`` are there."""
    async def go():
        c = LitePullConsumer("spark-test-reader", namesrv, auto_commit=False,
                             client_config=ClientConfig(namesrv_addr=namesrv, client_ip="127.0.0.1"))
        mqs = await c.fetch_queues(topic)
        c.assign(mqs)
        await c.start()
        try:
            for mq in mqs:
                c.seek(mq, 0)
            got = []
            deadline = time.monotonic() + timeout
            while len(got) < count and time.monotonic() < deadline:
                got += await c.poll(timeout_ms=500)
            return got
        finally:
            await c.shutdown()
    return asyncio.run(go())
