"""``rmq-admin consumerProgress`` as 5.3.3's mqadmin shows it, against a real
rmq-namesrv + rmq-broker: GET_CONSUME_STATS answers each queue's
``pullOffset`` (where the group's last pull ended, 5.3.3's pullOffsetTable),
the tool prints ``inflight`` = pull offset - consumer offset per queue and
5.3.3's three summary lines. A POP group popping without acking shows what
5.3.3 shows: POP commits the consumer offset at the pop, so those messages
are in neither column (``rocketmq_consumer_inflight_messages`` counts them)."""

from __future__ import annotations

import pytest

from rmq.client.pop import PopClient
from rmq.common import fastjson
from rmq.common.codes import RequestCode, ResponseCode
from rmq.common.protocol.headers_admin import GetConsumeStatsRequestHeader
from rmq.testing.cluster import Cluster
from rmq.testing.messaging import running_cluster
from tests.integration.admin_cli import admin_json, admin_ok
from tests.integration.test_messaging_raw import pull, send

pytestmark = pytest.mark.timeout(90)
TOPIC = "ProgT"


@pytest.fixture
async def cluster(tmp_path):
    async with running_cluster(tmp_path, "flushConsumerOffsetInterval=60000\n") as c:
        yield c


async def commit(c: Cluster, group: str, qid: int, offset: int) -> None:
    r = await c.call(RequestCode.UPDATE_CONSUMER_OFFSET, {
        "consumerGroup": group, "topic": TOPIC, "queueId": str(qid),
        "commitOffset": str(offset)})
    assert r.code == ResponseCode.SUCCESS, r.remark


async def progress(c: Cluster, group: str) -> list[tuple[int, int, int, int, int]]:
    rows = await admin_json(c.namesrv_addr, "consumerProgress", "-g", group, "-t", TOPIC)
    return [(r["queueId"], r["brokerOffset"], r["consumerOffset"], r["diff"], r["inflight"])
            for r in rows]


async def test_inflight_of_pulls_and_pops(cluster):
    c = cluster
    await c.create_topic(TOPIC, 2)
    for i in range(10):
        r = await send(c, TOPIC, b"m%d" % i, i % 2)
        assert r.code == ResponseCode.SUCCESS, r.remark
    # a pull group: 3 of queue 0 and all 5 of queue 1 pulled, nothing committed
    r = await pull(c, TOPIC, 0, 0, group="cgProgPull", max_nums=3)
    assert r.code == ResponseCode.SUCCESS and r.ext_fields["nextBeginOffset"] == "3"
    r = await pull(c, TOPIC, 1, 0, group="cgProgPull")
    assert r.code == ResponseCode.SUCCESS and r.ext_fields["nextBeginOffset"] == "5"
    await commit(c, "cgProgPull", 1, 0)
    assert await progress(c, "cgProgPull") == [(0, 5, 0, 5, 3), (1, 5, 0, 5, 5)]
    # the broker's answer carries 5.3.3's OffsetWrapper.pullOffset
    r = await c.call(RequestCode.GET_CONSUME_STATS, GetConsumeStatsRequestHeader(
        consumerGroup="cgProgPull", topic=TOPIC))
    table = fastjson.loads(bytes(r.body))["offsetTable"]
    assert sorted(w["pullOffset"] for w in table.values()) == [3, 5]
    # committing catches up: in flight is what was pulled past the commit
    await commit(c, "cgProgPull", 0, 2)
    await commit(c, "cgProgPull", 1, 5)
    assert await progress(c, "cgProgPull") == [(0, 5, 2, 3, 1), (1, 5, 5, 0, 0)]
    out = await admin_ok(c.namesrv_addr, "consumerProgress", "-g", "cgProgPull", "-t", TOPIC)
    lines = out.splitlines()
    assert lines[0].split() == ["topic", "brokerName", "queueId", "brokerOffset",
                                "consumerOffset", "diff", "inflight", "lastTimestamp"]
    assert lines[-3].startswith("Consume TPS: ")
    assert lines[-2:] == ["Consume Diff Total: 3", "Consume Inflight Total: 1"]
    # topicList (5.3.3): the listed topics, whatever the group subscribes
    r = await c.call(RequestCode.GET_CONSUME_STATS, GetConsumeStatsRequestHeader(
        consumerGroup="cgProgPull", topic="NoSuchTopic", topicList=f"{TOPIC};"))
    assert len(fastjson.loads(bytes(r.body))["offsetTable"]) == 2

    # a POP group popping 6 without acking: its offsets move at the pop
    p = PopClient(c.addr, "broker-a", c.client)
    popped = 0
    for _ in range(20):
        r = await p.pop("cgProgPop", TOPIC, invisible_ms=60_000, max_nums=3, queue_id=-1)
        if r.code == ResponseCode.SUCCESS:
            popped += len(r.messages)
        if popped >= 6:
            break
    assert popped == 6
    rows = await progress(c, "cgProgPop")
    assert sum(r[2] for r in rows) == 6 and sum(r[3] for r in rows) == 4
    assert all(r[4] == 0 for r in rows), rows
