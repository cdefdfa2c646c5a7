"""Messaging end to end with the rmq client against real processes: delay
levels across a restart, retry -> redelivery -> DLQ, and 100,000 messages
consumed by two consumers of a group across clean and SIGKILL restarts."""

from __future__ import annotations

import asyncio
import collections
import time

import pytest

from rmq.client import (
    ConsumeFromWhere,
    ConsumeStatus,
    Message,
    Producer,
    PushConsumer,
)
from rmq.client.codec import decode_messages
from rmq.common import fastjson
from rmq.common.codes import RequestCode, ResponseCode
from rmq.remoting.exceptions import RemotingError
from rmq.testing.cluster import Cluster
from rmq.testing.wait import wait_until
from tests.integration.test_messaging_raw import props, pull, send

R = RequestCode
RC = ResponseCode
DELAYS = "messageDelayLevel=1s 2s 1s 1s 1s 1s\n"
OVERLAP = 8 * 32  # one pull batch per queue


async def create_topic(c: Cluster, topic: str, queues: int) -> None:
    r = await c.call(R.UPDATE_AND_CREATE_TOPIC, {
        "topic": topic, "defaultTopic": "TBW102", "readQueueNums": str(queues),
        "writeQueueNums": str(queues), "perm": "6", "topicFilterType": "SINGLE_TAG"})
    assert r.code == RC.SUCCESS, r.remark
    await c.wait_routable(topic)


async def poll_queue(c: Cluster, topic: str, queue_id: int, offset: int,
                     timeout: float) -> tuple[float, list]:
    """Pull until something is there; (monotonic arrival time, messages)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        try:
            p = await pull(c, topic, queue_id, offset)
        except RemotingError:  # the connection of the previous broker run
            await asyncio.sleep(0.05)
            continue
        if p.code == RC.SUCCESS:
            return time.monotonic(), decode_messages(p.body)
        assert loop.time() < deadline, f"nothing arrived in {topic}/{queue_id}"
        await asyncio.sleep(0.02)


@pytest.mark.timeout(90)
async def test_delay_levels_on_time_and_across_restart(tmp_path):
    c = Cluster(tmp_path, DELAYS)
    try:
        c.start_broker()
        await create_topic(c, "TopicD", 1)
        sent = time.monotonic()
        r = await send(c, "TopicD", b"later", 0, props(DELAY="2", TAGS="T"))
        assert r.code == RC.SUCCESS
        p = await pull(c, "TopicD", 0, 0)
        assert p.code == RC.PULL_NOT_FOUND  # parked in SCHEDULE_TOPIC_XXXX
        arrived, msgs = await poll_queue(c, "TopicD", 0, 0, 5)
        assert 2.0 <= arrived - sent <= 3.0, arrived - sent
        assert msgs[0].body == b"later" and msgs[0].properties["REAL_TOPIC"] == "TopicD"
        # parked when the broker stops; delivered after the restart, exactly once
        r = await send(c, "TopicD", b"after-restart", 0, props(DELAY="2"))
        assert r.code == RC.SUCCESS
        c.broker.stop()
        c.start_broker()
        _, msgs = await poll_queue(c, "TopicD", 0, 1, 10)
        assert [m.body for m in msgs] == [b"after-restart"]
        await asyncio.sleep(2.5)
        p = await pull(c, "TopicD", 0, 2)
        assert p.code == RC.PULL_NOT_FOUND  # nothing delivered twice
    finally:
        await c.close()


@pytest.mark.timeout(90)
async def test_asynchronous_delayed_delivery_under_sync_flush(tmp_path):
    """enableScheduleAsyncDeliver: many re-stores in flight, each waiting for
    its group commit; every message delivered once, in order, and the saved
    level offset is past them all."""
    c = Cluster(tmp_path, DELAYS + "flushDiskType=SYNC_FLUSH\nenableScheduleAsyncDeliver=true\n"
                                            "scheduleAsyncDeliverMaxPendingLimit=16\n")
    try:
        c.start_broker()
        await create_topic(c, "TopicA", 1)
        bodies = [b"async-%03d" % i for i in range(120)]
        for body in bodies:
            assert (await send(c, "TopicA", body, 0, props(DELAY="1"))).code == RC.SUCCESS
        got: list = []
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 20
        while len(got) < len(bodies):
            assert loop.time() < deadline, f"only {len(got)} delivered"
            _, msgs = await poll_queue(c, "TopicA", 0, len(got), 10)
            got.extend(msgs)
        assert [m.body for m in got] == bodies
        await asyncio.sleep(1.5)
        assert (await pull(c, "TopicA", 0, len(bodies))).code == RC.PULL_NOT_FOUND  # once each
        c.broker.stop()
        offsets = fastjson.loads((tmp_path / "store-broker-a" / "config" / "delayOffset.json").read_bytes())
        assert {int(k): v for k, v in offsets["offsetTable"].items()}[1] == len(bodies)
    finally:
        await c.close()


@pytest.mark.timeout(120)
async def test_retry_redelivery_then_dlq(tmp_path):
    c = Cluster(tmp_path, DELAYS)
    try:
        c.start_broker()
        await create_topic(c, "TopicR", 1)
        deliveries: list[tuple[int, float, str]] = []

        def listener(msgs, ctx):
            for m in msgs:
                deliveries.append((m.reconsume_times, time.monotonic(), m.topic))
            return ConsumeStatus.RECONSUME_LATER

        consumer = PushConsumer("cgr", listener=listener,
                                client_config=c.client_config("retry"))
        consumer.config.consume_from_where = ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
        consumer.config.max_reconsume_times = 2
        consumer.subscribe("TopicR", "*")
        await consumer.start()
        async with Producer("pgr", client_config=c.client_config("retry-p")) as producer:
            await producer.send(Message("TopicR", b"fails", tags="X", keys="fk"))
        try:
            await wait_until(lambda: len(deliveries) >= 3, 30)
            dlq = await poll_queue(c, "%DLQ%cgr", 0, 0, 10)
        finally:
            await consumer.shutdown()
        assert [d[0] for d in deliveries] == [0, 1, 2]
        assert all(d[2] == "TopicR" for d in deliveries)  # RETRY_TOPIC restored
        # level 3 + reconsumeTimes: levels 3 and 4 are 1 s each in this broker
        for before, after in zip(deliveries, deliveries[1:], strict=False):
            assert 0.9 <= after[1] - before[1] <= 4.0
        (dead,) = dlq[1]
        assert dead.body == b"fails" and dead.properties["RETRY_TOPIC"] == "TopicR"
        assert dead.reconsume_times == 3 and dead.properties.get("ORIGIN_MESSAGE_ID")
        r = await c.call(R.GET_ROUTEINFO_BY_TOPIC, {"topic": "%DLQ%cgr"})
        assert r is not None
    finally:
        await c.close()


class Tally:
    """Deliveries per message key and which consumer saw which queues."""

    def __init__(self) -> None:
        self.count: collections.Counter[str] = collections.Counter()
        self.queues: dict[str, set[int]] = collections.defaultdict(set)

    def listener(self, name: str):
        def on_messages(msgs, ctx):
            for m in msgs:
                self.count[m.properties["KEYS"]] += 1
                self.queues[name].add(m.queue_id)
            return ConsumeStatus.CONSUME_SUCCESS
        return on_messages

    def unique(self) -> int:
        return len(self.count)

    def duplicates(self) -> int:
        return sum(self.count.values()) - len(self.count)


async def start_consumers(c: Cluster, tally: Tally) -> list[PushConsumer]:
    out = []
    for name in ("A", "B"):
        consumer = PushConsumer("cg100k", listener=tally.listener(name),
                                client_config=c.client_config(f"c{name}"))
        consumer.config.consume_from_where = ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
        consumer.config.consume_message_batch_max_size = 32
        consumer.subscribe("Topic100k", "*")
        await consumer.start()
        out.append(consumer)
    await wait_until(lambda: all(
        sum(mq.topic == "Topic100k" for mq in x.owned_queues()) == 4 for x in out), 30, 0.2)
    return out


async def produce(c: Cluster, start: int, count: int) -> None:
    async with Producer("pg100k", client_config=c.client_config("p100k")) as producer:
        queues = await producer.fetch_publish_queues("Topic100k")
        assert len(queues) == 8
        batch = 250
        for base in range(start, start + count, batch):
            msgs = [Message("Topic100k", b"x" * 100, keys=f"m{i}")
                    for i in range(base, base + batch)]
            await producer.send_batch(msgs, mq=queues[(base // batch) % 8])


@pytest.mark.timeout(240)
async def test_100k_two_consumers_clean_and_sigkill_restarts(tmp_path):
    c = Cluster(tmp_path)
    tally = Tally()
    try:
        c.start_broker()
        await create_topic(c, "Topic100k", 8)
        consumers = await start_consumers(c, tally)
        await produce(c, 0, 50_000)
        await wait_until(lambda: tally.unique() == 50_000, 60, 0.2)
        assert tally.queues["A"].isdisjoint(tally.queues["B"])
        assert len(tally.queues["A"]) == 4 and len(tally.queues["B"]) == 4
        # a rebalance overlap may hand one pull batch of a queue to both consumers
        assert tally.duplicates() <= OVERLAP
        before = tally.duplicates()
        for consumer in consumers:
            await consumer.shutdown()  # commits offsets
        # clean restart: committed offsets survive, nothing is redelivered
        c.broker.stop()
        c.start_broker()
        await c.wait_routable("Topic100k")
        await produce(c, 50_000, 25_000)
        consumers = await start_consumers(c, tally)
        await wait_until(lambda: tally.unique() == 75_000, 60, 0.2)
        await asyncio.sleep(0.5)
        assert tally.duplicates() - before <= OVERLAP  # nothing of the first 50,000 again
        before = tally.duplicates()
        for consumer in consumers:
            await consumer.shutdown()
        # SIGKILL: offsets committed since the broker's last persist may be lost;
        # those messages come again (counted), none is lost
        await produce(c, 75_000, 25_000)
        c.broker.kill()
        c.start_broker()
        await c.wait_routable("Topic100k")
        consumers = await start_consumers(c, tally)
        await wait_until(lambda: tally.unique() == 100_000, 60, 0.2)
        await asyncio.sleep(0.5)
        for consumer in consumers:
            await consumer.shutdown()
        assert tally.unique() == 100_000
        print(f"duplicates after SIGKILL: {tally.duplicates() - before}")
        assert tally.duplicates() - before <= 25_000 + OVERLAP
    finally:
        await c.close()
