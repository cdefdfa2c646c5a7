"""4.9.8's statistics items on a real rmq-broker: after producing, consuming
(with one message sent back) and a delayed delivery with the rmq client,
VIEW_BROKER_STATS_DATA answers every item BrokerStatsManager counts under
4.9.8's keys, refuses the never-counted COMMERCIAL_* ones as 4.9.8 does, and
GET_BROKER_RUNTIME_INFO carries scheduleMessageOffset_<level>."""

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
from rmq.common.codes import RequestCode, ResponseCode
from rmq.testing.cluster import Cluster
from rmq.testing.messaging import running_cluster
from rmq.testing.wait import wait_until

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.timeout(120)]
TOPIC, GROUP, DELAYED = "TopicItems", "cgItems", "TopicItemsDelayed"
SENT = 6


async def view(c: Cluster, name: str, key: str):
    return await c.call(RequestCode.VIEW_BROKER_STATS_DATA, {"statsName": name, "statsKey": key})


async def minute_sum(c: Cluster, name: str, key: str) -> int:
    r = await view(c, name, key)
    assert r.code == ResponseCode.SUCCESS, (name, key, r.remark)
    data = orjson.loads(r.body)
    assert set(data) == {"statsMinute", "statsHour", "statsDay"}
    assert data["statsDay"]["sum"] >= data["statsMinute"]["sum"]
    return data["statsMinute"]["sum"]


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def cluster(tmp_path_factory):
    async with running_cluster(tmp_path_factory.mktemp("stats-items"),
                               "messageDelayLevel=1s 2s\n") as c:
        await c.create_topic(TOPIC, queues=1)
        await c.create_topic(DELAYED, queues=1)
        async with Producer("pgItems", client_config=c.client_config("items-p")) as p:
            for i in range(SENT):
                await p.send(Message(TOPIC, b"m%d" % i))
            await p.send(Message(DELAYED, b"later", delay_level=1))
        seen: list[bytes] = []
        returned: list[bytes] = []

        def on_messages(msgs, ctx):
            for m in msgs:
                if m.body == b"m0" and not returned:
                    returned.append(m.body)
                    return ConsumeStatus.RECONSUME_LATER  # CONSUMER_SEND_MSG_BACK
                seen.append(m.body)
            return ConsumeStatus.CONSUME_SUCCESS

        cfg = ConsumerConfig(consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
                             consume_message_batch_max_size=1)
        consumer = PushConsumer(GROUP, listener=on_messages, config=cfg,
                                client_config=c.client_config("items-c"))
        consumer.subscribe(TOPIC, "*")
        await consumer.start()
        try:
            await wait_until(lambda: len(seen) >= SENT - 1 and returned, 20)
        finally:
            await consumer.shutdown()
        yield c


async def test_put_and_get_items(cluster):
    c = cluster
    assert await minute_sum(c, "TOPIC_PUT_NUMS", TOPIC) == SENT
    assert await minute_sum(c, "QUEUE_PUT_NUMS", f"{TOPIC}@0") == SENT
    size = await minute_sum(c, "TOPIC_PUT_SIZE", TOPIC)
    assert size == await minute_sum(c, "QUEUE_PUT_SIZE", f"{TOPIC}@0")
    assert size > SENT * 100  # the stored records' bytes
    assert await minute_sum(c, "BROKER_PUT_NUMS", "DefaultCluster") >= SENT + 2
    got = await minute_sum(c, "GROUP_GET_NUMS", f"{TOPIC}@{GROUP}")
    assert got >= SENT
    assert await minute_sum(c, "QUEUE_GET_NUMS", f"{TOPIC}@0@{GROUP}") == got
    assert await minute_sum(c, "GROUP_GET_SIZE", f"{TOPIC}@{GROUP}") >= size
    assert await minute_sum(c, "BROKER_GET_NUMS", "DefaultCluster") >= got
    r = await view(c, "GROUP_GET_LATENCY", f"0@{TOPIC}@{GROUP}")
    assert r.code == ResponseCode.SUCCESS and orjson.loads(r.body)["statsMinute"]["avgpt"] >= 0


async def test_send_back_and_schedule_items(cluster):
    c = cluster
    assert await minute_sum(c, "SNDBCK_PUT_NUMS", f"{TOPIC}@{GROUP}") == 1
    key = "SCHEDULE_TOPIC_XXXX@0@SCHEDULE_CONSUMER"  # level 1's queue

    async def delivered() -> bool:
        r = await view(c, "QUEUE_GET_NUMS", key)
        return r.code == ResponseCode.SUCCESS and orjson.loads(r.body)["statsMinute"]["sum"] >= 1

    for _ in range(100):
        if await delivered():
            break
        await asyncio.sleep(0.1)
    assert await minute_sum(c, "QUEUE_GET_NUMS", key) >= 1
    assert await minute_sum(c, "QUEUE_GET_SIZE", key) > 0
    r = await c.call(RequestCode.GET_BROKER_RUNTIME_INFO)
    table = orjson.loads(r.body)["table"]
    assert {"scheduleMessageOffset_1", "scheduleMessageOffset_2"} <= set(table)
    delivered_offset, max_offset = table["scheduleMessageOffset_1"].split(",")
    assert int(max_offset) >= 1 and int(delivered_offset) <= int(max_offset)
    assert "remainHowManyDataToCommit" not in table  # no transient store pool


async def test_unknown_and_commercial_items_are_refused_as_4_9_8(cluster):
    for name, key in (("COMMERCIAL_SEND_TIMES", f"@{TOPIC}@@SEND_SUCCESS"),
                      ("TOPIC_PUT_NUMS", "NoSuchTopic"), ("NO_SUCH_ITEM", TOPIC)):
        r = await view(cluster, name, key)
        assert r.code == ResponseCode.SYSTEM_ERROR
        assert r.remark == f"The stats <{name}> <{key}> not exist"
