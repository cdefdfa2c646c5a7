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
from tests.integration.test_broker_support import broker_conf, start_namesrv
from tests.support.procs import RmqProcess, free_port


def wait_for(predicate, timeout: float, what: str, step: float = 0.1):
    """Poll until ``predicate()`` returns something true; fail after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while True:
        got = predicate()
        if got:
            return got
        assert time.monotonic() < deadline, f"{what}: not reached in {timeout} s"
        time.sleep(step)


class Broker:
    """rmq-namesrv + one rmq-broker (``broker-a``), the broker restartable;
    with ``joining``, another broker (``name``) of that broker's name server."""

    def __init__(self, tmp: Path, name: str = "broker-a", joining: Broker | None = None) -> None:
        self.tmp = tmp
        if joining is None:
            self.ns_port = free_port()
            self.namesrv: RmqProcess | None = start_namesrv(tmp, self.ns_port)
        else:
            self.ns_port, self.namesrv = joining.ns_port, None
        self.port = free_port(span=4) + 2
        store = "store" if joining is None else f"store-{name}"
        self.conf = broker_conf(tmp, self.port, "brokerClusterName=DefaultCluster\n", name, store)
        self.store_dir = str(tmp / store)
        self.broker: RmqProcess | None = None
        self.runs = 0

    @property
    def namesrv_addr(self) -> str:
        return f"127.0.0.1:{self.ns_port}"

    def start(self) -> None:
        self.runs += 1
        self.broker = RmqProcess("rmq.broker.startup", ["-c", self.conf, "-n", self.namesrv_addr],
                                 self.tmp / f"broker-{self.port}-{self.runs}.out",
                                 env={"ROCKETMQ_HOME": str(self.tmp)})
        self.broker.start(wait_for_port=(self.port, self.port - 2))
        self.wait_route("TBW102")

    def stop(self) -> None:
        if self.broker is not None:
            self.broker.stop()

    def close(self) -> None:
        if self.broker is not None:
            self.broker.kill()
        if self.namesrv is not None:
            self.namesrv.kill()

    def route(self, topic: str):
        async def go():
            async with MQAdmin(self.namesrv_addr) as admin:
                try:
                    return await admin.topic_route(topic)
                except Exception:
                    return None
        return asyncio.run(go())

    def wait_route(self, topic: str, timeout: float = 20.0) -> None:
        wait_for(lambda: (r := self.route(topic)) is not None and any(
            str(self.port) in str(a) for b in r.brokerDatas for a in b.brokerAddrs.values()),
            timeout, f"route of {topic}")

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
