"""enableConsumeQueueExt + enableCalcFilterBitMap against real rmq-namesrv +
rmq-broker processes: SQL92 and TAG push consumers of the rmq client get
exactly their messages, ``rmq-admin queryCq`` shows each entry's ext unit,
bitmap and whether the group's bloom bits let it through, and after SIGKILL
the restarted broker recovers the ext files and goes on filtering."""

from __future__ import annotations

import asyncio

import orjson
import pytest
import pytest_asyncio

from rmq.client import (
    ConsumeFromWhere,
    ConsumerConfig,
    ConsumeStatus,
    Message,
    Producer,
    PushConsumer,
)
from rmq.client.message_selector import MessageSelector
from rmq.filter.bloom import BloomFilter
from rmq.testing.cluster import Cluster
from rmq.testing.messaging import running_cluster
from rmq.testing.wait import wait_until
from tests.integration.admin_cli import admin_json

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.timeout(120)]
TOPIC = "TopicBits"
SELECTOR = "a >= 10 AND a < 20"
EXT = "enablePropertyFilter=true\nenableConsumeQueueExt=true\nenableCalcFilterBitMap=true\n"


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def cluster(tmp_path_factory):
    async with running_cluster(tmp_path_factory.mktemp("cqext"), EXT) as c:
        await c.create_topic(TOPIC, 1)
        yield c


def push(cluster: Cluster, group: str, name: str, selector: MessageSelector,
         seen: list[int]) -> PushConsumer:
    def on_messages(msgs, ctx):
        seen.extend(int(m.properties["a"]) for m in msgs)
        return ConsumeStatus.CONSUME_SUCCESS

    cfg = ConsumerConfig(consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)
    c = PushConsumer(group, listener=on_messages, config=cfg,
                     client_config=cluster.client_config(name))
    c.subscribe(TOPIC, selector)
    return c


async def send_range(cluster: Cluster, numbers: range) -> None:
    async with Producer("pg_bits", client_config=cluster.client_config("bits-p")) as p:
        for i in numbers:
            r = await p.send(Message(TOPIC, b"m%d" % i, tags=f"T{i % 2}",
                                     properties={"a": str(i)}))
            assert r.msg_id


async def test_filtering_with_bitmaps_survives_a_crash(cluster):
    sql_seen: list[int] = []
    tag_seen: list[int] = []
    sql = push(cluster, "cg_bits", "bits-c1", MessageSelector.by_sql(SELECTOR), sql_seen)
    tag = push(cluster, "cg_odd", "bits-c2", MessageSelector.by_tag("T1"), tag_seen)
    await sql.start()
    await tag.start()
    try:
        # the groups' filter data is born (at their first heartbeat, before the
        # rebalance that gives them queues) before the messages
        await wait_until(lambda: sql.owned_queues() and tag.owned_queues(), 15)
        await send_range(cluster, range(40))
        await wait_until(lambda: len(sql_seen) >= 10 and len(tag_seen) >= 20, 20)
        await asyncio.sleep(0.5)
        assert sorted(sql_seen) == list(range(10, 20))
        assert sorted(tag_seen) == list(range(1, 40, 2))

        data = await admin_json(cluster.namesrv_addr, "queryCq", "-t", TOPIC, "-q", "0",
                                "-i", "0", "-c", "40", "-b", cluster.addr, "-g", "cg_bits")
        entries = data["queueData"]
        assert len(entries) == 40
        bits = BloomFilter(20, 32).m
        for i, e in enumerate(entries):
            assert e["tagsCode"] <= -(1 << 31) - 1, e  # an ext address
            unit = orjson.loads(e["extendDataJson"])
            assert unit["tagsCode"] == hash_of(f"T{i % 2}") and unit["msgStoreTime"] > 0
            assert len(e["bitMap"]) == bits and set(e["bitMap"]) <= {"0", "1"}
            assert e["eval"] == (10 <= i < 20), (i, e)

        cluster.broker.kill()  # SIGKILL
        cluster.start_broker()
        await cluster.wait_routable(TOPIC)
        await send_range(cluster, range(40, 60))
        await send_range(cluster, range(12, 14))
        await wait_until(lambda: len(sql_seen) >= 12 and len(tag_seen) >= 31, 30)
        await asyncio.sleep(0.5)
        assert sorted(set(sql_seen)) == list(range(10, 20))
        assert sorted(sql_seen).count(12) >= 2 and sorted(sql_seen).count(13) >= 2
        assert set(range(41, 60, 2)) <= set(tag_seen)
    finally:
        await sql.shutdown()
        await tag.shutdown()


def hash_of(tag: str) -> int:
    h = 0
    for ch in tag:
        h = (31 * h + ord(ch)) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h
