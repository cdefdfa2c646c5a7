"""``rmq-admin consumerProgress`` as 5.3.3's mqadmin shows it, against a real
rmq-namesrv + rmq-broker (LMQ enabled, for ``-c``): GET_CONSUME_STATS answers each queue's
``pullOffset`` (where the group's last pull ended, 5.3.3's pullOffsetTable),
the tool prints ``inflight`` = pull offset - consumer offset per queue and
5.3.3's three summary lines. A POP group popping without acking shows what
5.3.3 shows: POP commits the consumer offset at the pop, so those messages
are in neither column (``rocketmq_consumer_inflight_messages`` counts them).
``-s true`` adds the client holding each queue, ``-c`` routes an LMQ topic by
its cluster, and no ``-g`` lists every group with a retry topic."""

from __future__ import annotations

import pytest

from rmq.client import Message, Producer
from rmq.client.pop import PopClient
from rmq.common import fastjson
from rmq.common.codes import RequestCode, ResponseCode
from rmq.common.java import CURRENT_VERSION_DESC
from rmq.common.message import PROPERTY_INNER_MULTI_DISPATCH
from rmq.common.protocol.headers_admin import GetConsumeStatsRequestHeader
from rmq.testing.cluster import Cluster
from rmq.testing.messaging import running_cluster
from tests.integration.admin_cli import admin_fails, admin_json, admin_ok, recording_consumer
from tests.integration.test_messaging_raw import pull, send

pytestmark = pytest.mark.timeout(90)
TOPIC = "ProgT"
# 5.3.3's printf layouts (ConsumerProgressSubCommand)
QUEUES = "%-64s  %-32s  %-4s  %-20s  %-20s  %-20s %-20s%s"
QUEUES_IP = "%-64s  %-32s  %-4s  %-20s  %-20s  %-20s %-20s %-20s%s"
GROUPS = "%-64s  %-6s  %-24s %-5s  %-14s  %-7s  %s"
GROUP_ROW = "%-64s  %-6d  %-24s %-5s  %-14s  %-7d  %d"


@pytest.fixture
async def cluster(tmp_path):
    async with running_cluster(tmp_path, "flushConsumerOffsetInterval=60000\nenableLmq=true\n"
                               "enableMultiDispatch=true\n") as c:
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
    assert lines[0] == QUEUES % ("#Topic", "#Broker Name", "#QID", "#Broker Offset",
                                 "#Consumer Offset", "#Diff", "#Inflight", "#LastTime")
    assert lines[1].split()[:7] == [TOPIC, "broker-a", "0", "5", "2", "3", "1"]
    assert lines[-4] == ""
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


async def test_client_ip_per_queue(cluster):
    """``-s true``: the IP part of the client id of the consumer whose running
    info (GET_CONSUMER_RUNNING_INFO through the broker) holds the queue."""
    c = cluster
    await c.create_topic(TOPIC, 2)
    for i in range(4):
        r = await send(c, TOPIC, b"m%d" % i, i % 2)
        assert r.code == ResponseCode.SUCCESS, r.remark
    async with recording_consumer(c, "cgProgIP", TOPIC, wait_for=4) as (consumer, _):
        await consumer.persist_offsets(oneway=False)
        ip = consumer.instance.client_id.split("@")[0]
        rows = await admin_json(c.namesrv_addr, "consumerProgress", "-g", "cgProgIP", "-t",
                                TOPIC, "-s", "true")
        assert [(r["queueId"], r["consumerOffset"], r["clientIP"]) for r in rows] == \
            [(0, 2, ip), (1, 2, ip)]
        lines = (await admin_ok(c.namesrv_addr, "consumerProgress", "-g", "cgProgIP", "-t",
                                TOPIC, "-s", "true")).splitlines()
        assert lines[0] == QUEUES_IP % ("#Topic", "#Broker Name", "#QID", "#Broker Offset",
                                        "#Consumer Offset", "#Client IP", "#Diff", "#Inflight",
                                        "#LastTime")
        assert [line.split()[:6] for line in lines[1:3]] == \
            [[TOPIC, "broker-a", str(q), "2", "2", ip] for q in (0, 1)]
        assert lines[-2:] == ["Consume Diff Total: 0", "Consume Inflight Total: 0"]
        # -s false (or any other word, as Java's equalsIgnoreCase) keeps 5.3.3's plain table
        rows = await admin_json(c.namesrv_addr, "consumerProgress", "-g", "cgProgIP", "-t",
                                TOPIC, "-s", "no")
        assert all("clientIP" not in r for r in rows)
    # a group with no client online: every queue shows N/A
    lines = (await admin_ok(c.namesrv_addr, "consumerProgress", "-g", "cgProgIP", "-s",
                            "TRUE")).splitlines()
    assert [line.split()[5] for line in lines[1:3]] == ["N/A", "N/A"]


async def test_a_group_without_offsets_is_an_error(cluster):
    """A group its brokers hold no offset of (here: one heartbeat, so its
    retry topic routes) fails as 5.3.3's examineConsumeStats fails it."""
    c = cluster
    await c.create_topic(TOPIC, 2)
    hb = {"clientID": "127.0.0.1@none", "consumerDataSet": [{
        "groupName": "cgProgNone", "consumeType": "CONSUME_PASSIVELY",
        "messageModel": "CLUSTERING", "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET",
        "subscriptionDataSet": [{"topic": TOPIC, "subString": "*", "subVersion": 1}]}]}
    r = await c.call(RequestCode.HEART_BEAT, body=fastjson.dumps(hb))
    assert r.code == ResponseCode.SUCCESS, r.remark
    await c.wait_routable("%RETRY%cgProgNone")
    err = await admin_fails(c.namesrv_addr, "consumerProgress", "-g", "cgProgNone")
    assert err.endswith("CODE: 206  DESC: Not found the consumer group consume stats, because "
                        "return offset table is empty, maybe the consumer not consume any "
                        "message"), err


async def test_every_group(cluster):
    """No ``-g``: a line per ``%RETRY%`` topic the name server lists, with the
    group's clients (count, lowest version, PUSH/PULL, model) and its lag."""
    c = cluster
    await c.create_topic(TOPIC, 2)
    async with recording_consumer(c, "cgProgGone", TOPIC) as (consumer, _):
        await consumer.persist_offsets(oneway=False)
    for i in range(3):
        r = await send(c, TOPIC, b"m%d" % i, 0)
        assert r.code == ResponseCode.SUCCESS, r.remark
    async with recording_consumer(c, "cgProgLive", TOPIC, wait_for=3) as (consumer, _):
        await consumer.persist_offsets(oneway=False)
        rows = {r["group"]: r for r in await admin_json(c.namesrv_addr, "consumerProgress")}
        assert rows["cgProgLive"] == {"group": "cgProgLive", "count": 1,
                                      "version": CURRENT_VERSION_DESC, "type": "PUSH",
                                      "model": "CLUSTERING", "tps": rows["cgProgLive"]["tps"],
                                      "diffTotal": 0}
        assert rows["cgProgGone"] == {"group": "cgProgGone", "count": 0, "version": "OFFLINE",
                                      "type": "", "model": "", "tps": 0, "diffTotal": 3}
        lines = (await admin_ok(c.namesrv_addr, "consumerProgress")).splitlines()
    assert lines[0] == GROUPS % ("#Group", "#Count", "#Version", "#Type", "#Model", "#TPS",
                                 "#Diff Total")
    gone = next(line for line in lines if line.startswith("cgProgGone "))
    assert gone == GROUP_ROW % ("cgProgGone", 0, "OFFLINE", "", "", 0, 3)
    live = next(line for line in lines if line.startswith("cgProgLive "))
    assert live.split()[1:5] == ["1", CURRENT_VERSION_DESC, "PUSH", "CLUSTERING"]


async def test_lmq_routed_by_cluster(cluster):
    """``-c``: an LMQ has no route of its own; 5.3.3 routes its stats by the
    cluster name, a topic every broker registers."""
    c = cluster
    await c.create_topic(TOPIC, 1)
    async with Producer("pgProgLmq", client_config=c.client_config("prog-lmq")) as p:
        for i in range(3):
            msg = Message(TOPIC, b"m%d" % i)
            msg.properties[PROPERTY_INNER_MULTI_DISPATCH] = "%LMQ%progRoom"
            await p.send(msg)
    group = "%LMQ%progReaders"
    r = await c.call(RequestCode.UPDATE_CONSUMER_OFFSET, {
        "consumerGroup": group, "topic": "%LMQ%progRoom", "queueId": "0", "commitOffset": "1"})
    assert r.code == ResponseCode.SUCCESS, r.remark
    err = await admin_fails(c.namesrv_addr, "consumerProgress", "-g", group, "-t", "%LMQ%progRoom")
    assert err.startswith("rmq-admin consumerProgress: ")
    rows = await admin_json(c.namesrv_addr, "consumerProgress", "-g", group, "-t",
                            "%LMQ%progRoom", "-c", "DefaultCluster")
    assert [(r["topic"], r["queueId"], r["brokerOffset"], r["consumerOffset"], r["diff"])
            for r in rows] == [("%LMQ%progRoom", 0, 3, 1, 2)]
