"""LMQ through a real broker (enableLmq + enableMultiDispatch): one send with
INNER_MULTI_DISPATCH lands in its topic and in every %LMQ% queue it names;
pulls, long polling and LMQ group offsets on those queues; DELETE_TOPIC of an
LMQ; the offsets file after a restart."""

from __future__ import annotations

import asyncio
import json
import time

import pytest
import pytest_asyncio

from rmq.client import Message, Producer
from rmq.client import headers as h
from rmq.client.codec import decode_messages
from rmq.common import message as mc
from rmq.common.codes import RequestCode as R
from rmq.common.codes import ResponseCode as RC
from rmq.testing.cluster import Cluster

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.timeout(90)]
PARENT, GROUP = "ChatParent", "%LMQ%readers"


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def cluster(tmp_path_factory):
    c = Cluster(tmp_path_factory.mktemp("lmq"), "enableLmq=true\nenableMultiDispatch=true\n")
    try:
        c.start_broker()
        await c.wait_routable()
        await c.create_topic(PARENT, queues=2)
        yield c
    finally:
        await c.close()


async def _pull(c: Cluster, topic: str, offset: int, suspend_ms: int = 0, group: str = GROUP,
                timeout_ms: int = 5000):
    flag = h.PULL_FLAG_SUBSCRIPTION | (h.PULL_FLAG_SUSPEND if suspend_ms else 0)
    ext = h.pull_header(group, topic, 0, offset, 32, flag, 0, suspend_ms, "*", 0, "TAG", "broker-a")
    r = await c.call(R.PULL_MESSAGE, ext, timeout_ms=timeout_ms)
    msgs = decode_messages(r.body) if r.code == RC.SUCCESS and r.body else []
    return r, msgs


async def test_one_send_many_queues(cluster):
    async with Producer("pg_lmq", client_config=cluster.client_config("lmq")) as p:
        for i in range(3):
            msg = Message(PARENT, b"hello %d" % i, tags="chat")
            msg.properties[mc.PROPERTY_INNER_MULTI_DISPATCH] = "%LMQ%room1,%LMQ%room2"
            await p.send(msg)
        only2 = Message(PARENT, b"room2 only")
        only2.properties[mc.PROPERTY_INNER_MULTI_DISPATCH] = "%LMQ%room2"
        await p.send(only2)
    r1, room1 = await _pull(cluster, "%LMQ%room1", 0)
    _, room2 = await _pull(cluster, "%LMQ%room2", 0)
    assert r1.code == RC.SUCCESS, r1.remark
    assert [m.body for m in room1] == [b"hello 0", b"hello 1", b"hello 2"]
    assert [m.body for m in room2] == [b"hello 0", b"hello 1", b"hello 2", b"room2 only"]
    assert all(m.topic == PARENT for m in room2)  # the stored record: its own topic, queue and offset
    assert [m.properties[mc.PROPERTY_INNER_MULTI_QUEUE_OFFSET] for m in room2] == ["0,0", "1,1", "2,2", "3"]
    assert room1[0].commit_log_offset == room2[0].commit_log_offset  # one record
    # an LMQ has one queue and no topic config; its max offset is known
    r = await cluster.call(R.GET_MAX_OFFSET, {"topic": "%LMQ%room2", "queueId": "0"})
    assert r.ext_fields["offset"] == "4"


async def test_long_polling_wakes_on_an_lmq(cluster):
    waiting = asyncio.ensure_future(_pull(cluster, "%LMQ%late", 0, suspend_ms=10_000, timeout_ms=15_000))
    await asyncio.sleep(0.5)
    assert not waiting.done()
    begin = time.monotonic()
    async with Producer("pg_lmq2", client_config=cluster.client_config("lmq2")) as p:
        msg = Message(PARENT, b"wake up")
        msg.properties[mc.PROPERTY_INNER_MULTI_DISPATCH] = "%LMQ%late"
        await p.send(msg)
    r, msgs = await waiting
    assert r.code == RC.SUCCESS and [m.body for m in msgs] == [b"wake up"]
    assert time.monotonic() - begin < 5


async def test_lmq_group_offsets_delete_and_restart(cluster):
    for queue_id in (0, 3):  # an LMQ group keeps one offset per topic, whatever the queue
        r = await cluster.call(R.UPDATE_CONSUMER_OFFSET, {"consumerGroup": GROUP, "topic": "%LMQ%room1",
                                                          "queueId": str(queue_id), "commitOffset": "2"})
        assert r.code == RC.SUCCESS
    r = await cluster.call(R.QUERY_CONSUMER_OFFSET, {"consumerGroup": GROUP, "topic": "%LMQ%room1", "queueId": "5"})
    assert r.code == RC.SUCCESS and r.ext_fields["offset"] == "2"
    r = await cluster.call(R.DELETE_TOPIC_IN_BROKER, {"topic": "%LMQ%room2"})
    assert r.code == RC.SUCCESS, r.remark
    r, msgs = await _pull(cluster, "%LMQ%room2", 0)
    assert not msgs
    cluster.broker.stop()
    offsets = json.loads((cluster.tmp / "store-broker-a" / "config" / "lmqConsumerOffset.json").read_text())
    assert offsets["lmqOffsetTable"] == {"%LMQ%room1@%LMQ%readers": 2}
    cluster.start_broker()
    await cluster.wait_routable(PARENT)
    r = await cluster.call(R.QUERY_CONSUMER_OFFSET, {"consumerGroup": GROUP, "topic": "%LMQ%room1", "queueId": "0"})
    assert r.ext_fields["offset"] == "2"
    _, room1 = await _pull(cluster, "%LMQ%room1", 1)
    assert [m.body for m in room1] == [b"hello 1", b"hello 2"]
