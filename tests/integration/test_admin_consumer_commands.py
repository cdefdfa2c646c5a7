"""rmq-admin's mqadmin consumer and offset commands (cloneGroupOffset,
skipAccumulatedMessage, resetOffsetByTime offline, consumerStatus,
getConsumerConfig, startMonitoring) as subprocesses against a real
rmq-namesrv + rmq-broker with a live rmq push consumer."""

from __future__ import annotations

import re
import time

import orjson
import pytest
import pytest_asyncio

from rmq.client import Message, Producer, PushConsumer
from rmq.testing.cluster import Cluster
from rmq.testing.messaging import running_cluster
from rmq.testing.wait import wait_until
from tests.integration.admin_cli import (
    admin_fails,
    admin_json,
    admin_ok,
    admin_run,
    admin_until,
    recording_consumer,
)

# once: the rmq-admin command line, no compiled/twin pair of its own
pytestmark = [pytest.mark.once, pytest.mark.asyncio(loop_scope="module"), pytest.mark.timeout(120)]
TOPIC, GROUP = "TopicAdmCons", "cgAdmCons"


class Live:
    def __init__(self, c: Cluster, producer: Producer, consumer: PushConsumer,
                 received: list) -> None:
        self.c, self.producer, self.consumer, self.received = c, producer, consumer, received

    @property
    def ns(self) -> str:
        return self.c.namesrv_addr

    async def send(self, n: int) -> None:
        for i in range(n):
            await self.producer.send(Message(TOPIC, b"m%d" % i, tags="TagA"))


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def live(tmp_path_factory):
    async with running_cluster(tmp_path_factory.mktemp("admin-consumer")) as c:
        await c.create_topic(TOPIC, queues=4)
        async with Producer("pgAdmCons", client_config=c.client_config("cons-p")) as p:
            for i in range(8):
                await p.send(Message(TOPIC, b"m%d" % i, tags="TagA"))
            async with recording_consumer(c, GROUP, TOPIC, "TagA || TagB", 8) as (consumer, got):
                await consumer.persist_offsets(oneway=False)
                yield Live(c, p, consumer, got)


async def offsets(k: Live, group: str) -> list[tuple[int, int, int]]:
    """(queue, broker offset, consumer offset) of the topic for ``group``."""
    rows = await admin_json(k.ns, "consumerProgress", "-g", group, "-t", TOPIC)
    return [(r["queueId"], r["brokerOffset"], r["consumerOffset"]) for r in rows]


async def test_clone_skip_and_reset_offline(live):
    k = live
    out = await admin_ok(k.ns, "cloneGroupOffset", "-s", GROUP, "-d", "cgAdmClone", "-t", TOPIC)
    assert out == (f"clone group offset success. srcGroup[{GROUP}], destGroup=[cgAdmClone], "
                   f"topic[{TOPIC}]\n")
    assert await offsets(k, "cgAdmClone") == [(q, 2, 2) for q in range(4)]
    err = await admin_fails(k.ns, "cloneGroupOffset", "-s", "cgNobody", "-d", "x", "-t", TOPIC)
    assert "cgNobody" in err
    # a backlog for the clone, which has no consumer online: the tool moves its offsets
    await k.send(4)
    assert await offsets(k, "cgAdmClone") == [(q, 3, 2) for q in range(4)]
    out = await admin_ok(k.ns, "skipAccumulatedMessage", "-g", "cgAdmClone", "-t", TOPIC)
    lines = out.splitlines()
    assert lines[0].split() == ["#brokerName", "#queueId", "#brokerOffset", "#consumerOffset",
                                "#timestampOffset", "#rollbackOffset"]
    assert [x.split() for x in lines[1:]] == [["broker-a", str(q), "3", "2", "3", "3"]
                                              for q in range(4)]
    assert await offsets(k, "cgAdmClone") == [(q, 3, 3) for q in range(4)]
    # resetOffsetByTime falls back the same way (mqadmin's ResetOffsetByTimeOldCommand)
    rows = await admin_json(k.ns, "resetOffsetByTime", "-g", "cgAdmClone", "-t", TOPIC, "-s", "0")
    assert [(r["queueId"], r["rollbackOffset"]) for r in rows] == [(q, 0) for q in range(4)]
    assert await offsets(k, "cgAdmClone") == [(q, 3, 0) for q in range(4)]
    # the live group: the broker resets and tells its consumer
    await wait_until(lambda: len(k.received) >= 12, 20)
    out = await admin_ok(k.ns, "skipAccumulatedMessage", "-g", GROUP, "-t", TOPIC, "-f", "false")
    lines = out.splitlines()
    assert lines[0].split() == ["#brokerName", "#queueId", "#offset"]
    assert [x.split() for x in lines[1:]] == [["broker-a", str(q), "3"] for q in range(4)]
    assert "not exist" in await admin_fails(k.ns, "skipAccumulatedMessage", "-g", "cgNobody",
                                            "-t", TOPIC)


async def test_consumer_status(live, tmp_path):
    k = live
    cid = k.consumer.instance.client_id
    out = await admin_ok(k.ns, "consumerStatus", "-g", GROUP, cwd=str(tmp_path))
    lines = out.splitlines()
    assert lines[0] == f"{'#Index':<10} {'#ClientId':<40} {'#Version':<20} #ConsumerRunningInfoFile"
    index, client, version, path = lines[1].split()
    assert (index, client, version) == ("1", cid, "V4_9_8")
    assert re.fullmatch(rf"\d{{13}}/{re.escape(cid)}", path)
    assert lines[2:] == ["", "", "Same subscription in the same group of consumer", "",
                         "Rebalance OK"]
    written = (tmp_path / path).read_text()
    assert written.startswith("#Consumer Properties#\n")
    assert f"{'consumerGroup':<40}: {GROUP}\n" in written

    info = await admin_ok(k.ns, "consumerStatus", "-g", GROUP, "-i", cid)
    assert info.startswith("#Consumer Properties#\n")
    subs = info.split("#Consumer Subscription#\n")[1].split("\n\n")[0].splitlines()
    assert subs == [f"001 Topic: {'%RETRY%' + GROUP:<40} ClassFilter: false    SubExpression: *",
                    f"002 Topic: {TOPIC:<40} ClassFilter: false    SubExpression: TagA || TagB"]
    offsets_section = info.split("#Consumer Offset#\n")[1].split("\n\n")[0].splitlines()
    assert offsets_section[0].split() == ["#Topic", "#Broker", "Name", "#QID", "#Consumer",
                                          "Offset"]
    rows = [x.split() for x in offsets_section[1:] if x.startswith(TOPIC)]
    assert rows == [[TOPIC, "broker-a", str(q), "3"] for q in range(4)]
    year = time.strftime("%Y")  # epoch times, as Java's client reports them
    assert re.search(rf"ProcessQueueInfo \[commitOffset=3, .*lastConsumeTimestamp={year}\d{{13}}\]",
                     info)
    assert "#Consumer RT&TPS#" in info and "#Consumer jstack#" not in info
    dumped = await admin_ok(k.ns, "consumerStatus", "-g", GROUP, "-i", cid, "-s")
    assert "#Consumer jstack#\nThread: MainThread" in dumped
    data = await admin_json(k.ns, "consumerStatus", "-g", GROUP, cwd=str(tmp_path))
    assert data["sameSubscription"] is True and list(data["clients"]) == [cid]
    assert data["clients"][cid]["properties"]["PROP_CONSUME_TYPE"] == "CONSUME_PASSIVELY"
    by_broker = await admin_ok(k.ns, "consumerStatus", "-g", GROUP, "-b", k.c.addr,
                               cwd=str(tmp_path))
    assert by_broker.splitlines()[1].split()[1] == cid
    assert "not online" in await admin_fails(k.ns, "consumerStatus", "-g", GROUP, "-i", "nobody")
    assert "cgNobody" in await admin_fails(k.ns, "consumerStatus", "-g", "cgNobody")


async def test_get_consumer_config(live):
    k = live
    out = await admin_ok(k.ns, "getConsumerConfig", "-g", GROUP)
    lines = out.splitlines()
    assert lines[0] == "=" * 29 + "DefaultCluster:broker-a" + "=" * 29
    fields = dict(x.split("=  ", 1) for x in lines[1:])
    assert {k.rstrip(): v for k, v in fields.items()} == {
        "groupName": GROUP, "consumeEnable": "true", "consumeFromMinEnable": "true",
        "consumeBroadcastEnable": "true", "retryQueueNums": "1", "retryMaxTimes": "16",
        "brokerId": "0", "whichBrokerWhenConsumeSlowly": "1",
        "notifyConsumerIdsChangedEnable": "true"}
    assert list(fields)[0] == f"{'groupName':<40}"
    data = await admin_json(k.ns, "getConsumerConfig", "-g", GROUP)
    assert data[0]["clusterName"] == "DefaultCluster" and data[0]["config"]["groupName"] == GROUP
    assert "no broker has subscription group cgNobody" in await admin_fails(
        k.ns, "getConsumerConfig", "-g", "cgNobody")


async def test_start_monitoring(live):
    """Two rounds of backlog reports, and an offset-moved event reported as the
    broker writes it (a pull far past the end of a queue)."""
    k = live
    await k.send(4)  # a backlog the consumer works off

    async def moved(line: str) -> None:
        if line.endswith("endRound") and not triggered:
            triggered.append(True)
            r = await admin_run(k.ns, "queryMsgByOffset", "-t", TOPIC, "-b", "broker-a",
                                "-i", "1", "-o", "999")
            assert r.rc == 1

    triggered: list = []
    lines = await admin_until(
        k.ns, ("startMonitoring", "--roundInterval", "1000"),
        lambda ls: sum(x.endswith("endRound") for x in ls) >= 2
        and any("reportDeleteMsgsEvent" in x for x in ls), timeout=90, on_line=moved)
    assert lines[0] == "[MONITOR] =========================================beginRound"
    undone = [x for x in lines if "reportUndoneMsgs" in x and f"topic={TOPIC}," in x]
    assert re.fullmatch(
        rf"\[MONITOR\] reportUndoneMsgs: UndoneMsgs \[consumerGroup={GROUP}, topic={TOPIC}, "
        r"undoneMsgsTotal=\d+, undoneMsgsSingleMQ=\d+, undoneMsgsDelayTimeMills=-?\d+\]",
        undone[0]), undone[0]
    event = next(x for x in lines if "reportDeleteMsgsEvent" in x)
    assert re.fullmatch(
        r"\[MONITOR\] reportDeleteMsgsEvent: DeleteMsgsEvent \[offsetMovedEvent=OffsetMovedEvent "
        rf"\[consumerGroup=TOOLS_CONSUMER, messageQueue=MessageQueue \[topic={TOPIC}, "
        r"brokerName=broker-a, queueId=1\], offsetRequest=999, offsetNew=\d+\], "
        r"eventTimestamp=\d+\]", event), event
    js = await admin_ok(k.ns, "startMonitoring", "--roundInterval", "200", "--rounds", "1",
                        "--json")
    reports = [orjson.loads(x) for x in js.splitlines()]
    assert reports[0] == {"report": "beginRound"} and reports[-1] == {"report": "endRound"}
    assert any(r.get("consumerGroup") == GROUP and r.get("topic") == TOPIC for r in reports)
    assert "127.0.0.1:1" in await admin_fails("127.0.0.1:1", "startMonitoring", "--rounds", "1")
