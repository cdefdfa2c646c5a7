"""rmq-admin's mqadmin broker commands (cleanUnusedTopic, deleteExpiredCommitLog,
cleanExpiredCQ, producer, sendMsgStatus, checkMsgSendRT, clusterRT) as
subprocesses against a real rmq-namesrv + rmq-broker: mqadmin's output, --json,
what the store looks like afterwards, and one-line failures."""

from __future__ import annotations

import os
import re
import time

import orjson
import pytest
import pytest_asyncio

from rmq.client import Message, Producer
from rmq.testing.cluster import Cluster
from rmq.testing.messaging import running_cluster
from rmq.testing.wait import wait_until
from tests.integration.admin_cli import admin_fails, admin_json, admin_ok, admin_run

# once: the rmq-admin command line, no compiled/twin pair of its own
pytestmark = [pytest.mark.once, pytest.mark.asyncio(loop_scope="module"), pytest.mark.timeout(150)]
OLD, NEW, GONE = "TopicAdmOld", "TopicAdmNew", "TopicAdmGone"
# expired at once, cleaned every second, never by the clock during the test
STORE = (f"fileReservedTime=0\ncleanResourceInterval=1000\n"
         f"deleteWhen={(time.localtime().tm_hour + 12) % 24:02d}\n")


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def cluster(tmp_path_factory):
    async with running_cluster(tmp_path_factory.mktemp("admin-broker"), STORE) as c:
        yield c


def cq_dir(c: Cluster, topic: str):
    return c.tmp / "store-broker-a" / "consumequeue" / topic


async def send_bodies(c: Cluster, topic: str, count: int, size: int) -> None:
    async with Producer("pgAdmFill", client_config=c.client_config("fill")) as p:
        for _ in range(count):
            await p.send(Message(topic, os.urandom(size)))  # incompressible


async def test_clean_unused_topic_drops_queues_without_config(cluster):
    c, ns = cluster, cluster.namesrv_addr
    await c.create_topic(GONE, queues=2)
    await send_bodies(c, GONE, 4, 100)
    assert cq_dir(c, GONE).is_dir()
    # the topic's config disappears while the broker is down; its queues stay
    c.broker.stop()
    topics = c.tmp / "store-broker-a" / "config" / "topics.json"
    table = orjson.loads(topics.read_bytes())
    del table["topicConfigTable"][GONE]
    topics.write_bytes(orjson.dumps(table))
    c.start_broker()
    await c.wait_routable()
    assert cq_dir(c, GONE).is_dir()
    assert await admin_ok(ns, "cleanUnusedTopic", "-b", c.addr) == "success\n"
    assert not cq_dir(c, GONE).exists() or not any(cq_dir(c, GONE).iterdir())
    assert await admin_json(ns, "cleanUnusedTopic", "-c", "DefaultCluster") == \
        {"brokers": [c.addr], "result": True}
    assert await admin_ok(ns, "cleanUnusedTopic") == "success\n"  # every cluster
    assert "cluster NoCluster not found" in await admin_fails(
        ns, "cleanUnusedTopic", "-c", "NoCluster")
    assert "127.0.0.1:1" in await admin_fails(ns, "cleanUnusedTopic", "-b", "127.0.0.1:1")
    assert "not allowed with argument" in await admin_fails(
        ns, "cleanUnusedTopic", "-b", c.addr, "-c", "DefaultCluster", rc=2)


async def test_producer_lists_live_producers(cluster):
    c, ns = cluster, cluster.namesrv_addr
    async with Producer("pgAdmLive", client_config=c.client_config("live")) as p:
        await p.send(Message("broker-a", b"hello"))  # the broker knows it from now on
        out = await admin_ok(ns, "producer", "-b", c.addr)
        cid = p.instance.client_id
        line = next(x for x in out.splitlines() if "(pgAdmLive)" in x)
        assert re.fullmatch(
            rf"producer group \(pgAdmLive\) instance : clientId={re.escape(cid)},"
            r"remoteIP=127\.0\.0\.1:\d+, language=PYTHON, version=409, "
            r"lastUpdateTimestamp=\d+", line), line
        data = await admin_json(ns, "producer", "-b", c.addr)
        assert [i["clientId"] for i in data["pgAdmLive"]] == [cid]
    assert "127.0.0.1:1" in await admin_fails(ns, "producer", "-b", "127.0.0.1:1")


async def test_send_msg_status(cluster):
    ns = cluster.namesrv_addr
    out = await admin_ok(ns, "sendMsgStatus", "-b", "broker-a", "-s", "30", "-c", "3")
    lines = out.splitlines()
    assert len(lines) == 3
    for line in lines:
        assert re.fullmatch(
            r"rt=\d+ms, SendResult=SendResult \[sendStatus=SEND_OK, msgId=[0-9A-F]{32}, "
            r"offsetMsgId=[0-9A-F]{32}, messageQueue=MessageQueue \[topic=broker-a, "
            r"brokerName=broker-a, queueId=0\], queueOffset=\d+\]", line), line
    rows = [orjson.loads(x) for x in (await admin_ok(
        ns, "sendMsgStatus", "-b", "broker-a", "-c", "2", "--json")).splitlines()]
    assert [r["sendResult"]["sendStatus"] for r in rows] == ["SEND_OK", "SEND_OK"]
    # -s 30: 33 bytes (whole units of 11); the warm-up before is 22
    first = int(re.search(r"queueOffset=(\d+)", lines[0]).group(1))
    for offset, units in ((first, 3), (first - 1, 2)):
        m = await admin_json(ns, "queryMsgByOffset", "-t", "broker-a", "-b", "broker-a",
                             "-i", "0", "-o", str(offset))
        assert m["body"] == "hello jodie" * units
    err = await admin_fails(ns, "sendMsgStatus", "-b", "broker-a", "-c", "0", rc=2)
    assert "must be a whole number >= 1" in err
    assert "broker noBroker not found" in await admin_fails(ns, "sendMsgStatus", "-b", "noBroker")


async def test_check_msg_send_rt(cluster):
    c, ns = cluster, cluster.namesrv_addr
    await c.create_topic("TopicAdmRT", queues=2)
    out = await admin_ok(ns, "checkMsgSendRT", "-t", "TopicAdmRT", "-a", "4", "-s", "64")
    lines = out.splitlines()
    assert lines[0] == f"{'#Broker Name':<32}  {'#QID':<4}  {'#Send Result':<20}    #RT"
    rows = [line.split() for line in lines[1:5]]
    assert [r[:3] for r in rows] == [["broker-a", "0", "true"], ["broker-a", "1", "true"]] * 2
    assert re.fullmatch(r"Avg RT: \d+\.\d\d", lines[5])
    js = [orjson.loads(x) for x in (await admin_ok(
        ns, "checkMsgSendRT", "-t", "TopicAdmRT", "-a", "1", "--json")).splitlines()]
    assert js[0]["queueId"] == 0 and js[0]["sendResult"] is True and js[1] == {"avgRT": "NaN"}


async def test_cluster_rt(cluster):
    ns = cluster.namesrv_addr
    out = await admin_ok(ns, "clusterRT", "-a", "3", "-s", "16", "--rounds", "1")
    head, row = out.splitlines()
    assert head.split() == ["#Cluster", "Name", "#Broker", "Name", "#RT", "#successCount",
                            "#failCount"]
    cells = row.split()
    assert cells[:2] == ["DefaultCluster", "broker-a"] and cells[3:] == ["3", "0"]
    assert re.fullmatch(r"\d+\.\d\d", cells[2])
    out = await admin_ok(ns, "clusterRT", "-a", "2", "-c", "DefaultCluster", "-p", "true",
                         "-m", "room1", "-i", "1", "--rounds", "2")
    lines = out.splitlines()
    assert len(lines) == 2
    assert all(re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\|room1\|DefaultCluster\|"
                            r"broker-a\|\d+", x) for x in lines), lines
    err = await admin_fails(ns, "clusterRT", "-c", "NoCluster", "--rounds", "1")
    assert "cluster [NoCluster] not exist" in err
    assert "127.0.0.1:1" in await admin_fails("127.0.0.1:1", "clusterRT", "--rounds", "1")


async def test_delete_expired_commit_log_then_clean_expired_cq(cluster):
    """The old topic's messages fill the first commit log file, the new topic's
    start the second; once the first is deleted, the old topic's consume queues
    point at nothing and cleanExpiredCQ drops them."""
    c, ns = cluster, cluster.namesrv_addr
    await c.create_topic(OLD, queues=1)
    await c.create_topic(NEW, queues=1)
    commit_log = c.tmp / "store-broker-a" / "commitlog"
    await send_bodies(c, OLD, 8, 100 * 1024)
    await send_bodies(c, NEW, 4, 100 * 1024)
    await wait_until(lambda: len(list(commit_log.iterdir())) >= 2, 20)
    first = sorted(commit_log.iterdir())[0]
    assert await admin_ok(ns, "deleteExpiredCommitLog", "-b", c.addr) == "success\n"
    # the clean service's first round comes 60 s after the broker started
    await wait_until(lambda: not first.exists(), 100, step=0.5, what="first commit log file")
    assert cq_dir(c, OLD).is_dir()
    assert await admin_ok(ns, "cleanExpiredCQ", "-c", "DefaultCluster") == "success\n"
    assert not any(cq_dir(c, OLD).glob("*/*")), list(cq_dir(c, OLD).glob("*/*"))
    assert any(cq_dir(c, NEW).glob("*/*"))
    status = await admin_json(ns, "topicStatus", "-t", NEW)
    assert status[0]["maxOffset"] == 4
    assert await admin_json(ns, "cleanExpiredCQ", "-b", c.addr) == \
        {"brokers": [c.addr], "result": True}
    assert await admin_ok(ns, "deleteExpiredCommitLog", "-c", "DefaultCluster") == "success\n"
    r = await admin_run(ns, "cleanExpiredCQ", "-h")
    assert r.rc == 0 and "--brokerAddr" in r.out and "--cluster" in r.out
