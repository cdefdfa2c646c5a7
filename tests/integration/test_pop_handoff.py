"""The revive topic as a RocketMQ 5.3.3 broker shares it, against a real
rmq-broker: rmq's records carry TIMER_DELIVER_MS (5.3.3's revive service moves
its clock only with it), the revive offset is kept as 5.3.3 keeps it (the last
record done with), and checkpoints 5.3.3 wrote, which reach the revive topic
through the timer with their acks due at their revive time, are revived only
once those acks had their time to arrive (an acked message is not redelivered)."""

from __future__ import annotations

import asyncio
import time

import pytest

from rmq.broker.pop_records import REVIVE_GROUP, AckMsg, PopCheckPoint, revive_topic
from rmq.client.codec import decode_messages
from rmq.client.pop import PopClient, handle_of
from rmq.common.codes import RequestCode, ResponseCode
from rmq.testing.cluster import Cluster
from rmq.testing.wait import wait_until
from tests.integration.test_messaging_raw import props, pull, send
from tests.integration.test_pop import G, create_group, fill

pytestmark = pytest.mark.timeout(90)
RC = ResponseCode
REVIVE = revive_topic("DefaultCluster")


def now_ms() -> int:
    return time.time_ns() // 1_000_000


async def revive_offset(c: Cluster, qid: int) -> int:
    r = await c.call(RequestCode.QUERY_CONSUMER_OFFSET, {
        "consumerGroup": REVIVE_GROUP, "topic": REVIVE, "queueId": str(qid)})
    return int(r.ext_fields["offset"]) if r.code == RC.SUCCESS else -1


async def max_offset(c: Cluster, topic: str, qid: int) -> int:
    r = await c.call(RequestCode.GET_MAX_OFFSET, {"topic": topic, "queueId": str(qid)})
    return int(r.ext_fields["offset"])


async def pop_bodies(p: PopClient, topic: str, until_ms: int) -> list[tuple[bytes, int]]:
    """(body, reconsumeTimes) of everything popped (and acked) until ``until_ms``."""
    got = []
    while now_ms() < until_ms:
        r = await p.pop(G, topic, invisible_ms=60_000, max_nums=32)
        if r.code == RC.SUCCESS:
            for m in r.messages:
                got.append((bytes(m.body), m.reconsume_times))
                await p.ack(G, topic, handle_of(m))
        else:
            await asyncio.sleep(0.1)
    return got


async def test_records_and_revive_offset_as_5_3_3_reads_them(cluster):
    c = cluster
    await c.create_topic("PopHA", queues=1)
    await fill(c, "PopHA", 2, queues=1)
    p = PopClient(c.addr, "broker-a", c.client)
    r = await p.pop(G, "PopHA", invisible_ms=1500, max_nums=2)
    assert r.code == RC.SUCCESS and len(r.messages) == 2
    qid = r.revive_qid
    await p.ack(G, "PopHA", handle_of(r.messages[0]))
    # the ck and the ack: stored at once, TIMER_DELIVER_MS not after their store time
    pulled = await pull(c, REVIVE, qid, 0, group="cgReviveRead")
    records = decode_messages(pulled.body)
    assert [m.properties["TAGS"] for m in records] == ["ck", "ack"]
    for m in records:
        assert 0 <= m.store_timestamp - int(m.properties["TIMER_DELIVER_MS"]) < 1000
        assert "TIMER_OUT_MS" not in m.properties
    got = await pop_bodies(p, "PopHA", now_ms() + 4000)
    assert got == [(b"m1", 1)]

    # everything settled: 5.3.3 reads on from the offset after the one kept
    async def settled() -> bool:
        return await revive_offset(c, qid) == await max_offset(c, REVIVE, qid) - 1
    await wait_until(settled, 10)
    c.broker.kill()
    c.start_broker()
    await c.wait_routable("PopHA")
    p = PopClient(c.addr, "broker-a", c.client)
    assert await pop_bodies(p, "PopHA", now_ms() + 3000) == []


async def test_checkpoints_through_the_timer_wait_for_their_acks(cluster):
    c = cluster
    await c.create_topic("PopHB", queues=1)
    await create_group(c, G)
    await fill(c, "PopHB", 2, queues=1)
    r = await c.call(RequestCode.UPDATE_CONSUMER_OFFSET, {
        "consumerGroup": G, "topic": "PopHB", "queueId": "0", "commitOffset": "2"})
    assert r.code == RC.SUCCESS
    # what a 5.3.3 pop of both and an ack of the first leave in revive queue 0:
    # the ck due at reviveTime - 1 s, the ack at popTime + invisibleTime, both timers
    pop_time, invisible = now_ms(), 4000
    ck = PopCheckPoint("PopHB", G, 0, 0, pop_time, invisible, [0, 1], "broker-a")
    body, ack_tag = AckMsg("PopHB", G, 0, 0, pop_time, "broker-a", [0]).encode()
    for data, tag, due in ((ck.encode(), "ck", pop_time + invisible - 1000),
                           (body, ack_tag, pop_time + invisible)):
        r = await send(c, REVIVE, data, 0, props(TAGS=tag, TIMER_DELIVER_MS=str(due)))
        assert r.code == RC.SUCCESS, r.remark
    p = PopClient(c.addr, "broker-a", c.client)
    got = await pop_bodies(p, "PopHB", pop_time + invisible + 6000)
    assert got == [(b"m1", 1)]
