"""rmq-admin's mqadmin topic and name-server commands (addWritePerm,
updateNamesrvConfig, updateTopicPerm, topicClusterList, updateOrderConf,
allocateMQ) as subprocesses against a real rmq-namesrv + rmq-broker: mqadmin's
output lines, --json, the state each change leaves, and one-line failures."""

from __future__ import annotations

import asyncio

import orjson
import pytest
import pytest_asyncio

from rmq.common.codes import RequestCode
from rmq.testing.cluster import Cluster
from rmq.testing.messaging import running_cluster
from tests.integration.admin_cli import admin_fails, admin_json, admin_ok, admin_run

# once: the rmq-admin command line, no compiled/twin pair of its own
pytestmark = [pytest.mark.once, pytest.mark.asyncio(loop_scope="module"), pytest.mark.timeout(120)]
TOPIC = "TopicAdmTopic"


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def cluster(tmp_path_factory):
    async with running_cluster(tmp_path_factory.mktemp("admin-topic")) as c:
        await c.create_topic(TOPIC, queues=4)
        yield c


async def route_perm(c: Cluster, topic: str) -> int:
    route = await admin_json(c.namesrv_addr, "topicRoute", "-t", topic)
    return route["queueDatas"][0]["perm"]


async def wait_perm(c: Cluster, topic: str, perm: int, timeout: float = 20.0) -> None:
    """The route shows ``perm`` (the broker registers its change at once; a
    registration already in flight may still carry the old one)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while (seen := await route_perm(c, topic)) != perm:
        assert loop.time() < deadline, f"perm {seen}, expected {perm}"
        await asyncio.sleep(0.3)


async def test_add_write_perm_restores_what_wipe_took(cluster):
    c, ns = cluster, cluster.namesrv_addr
    await admin_ok(ns, "wipeWritePerm", "-b", "broker-a")
    assert await route_perm(c, TOPIC) == 4
    out = await admin_ok(ns, "addWritePerm", "-b", "broker-a")
    line = out.strip()
    assert line.startswith(f"add write perm of broker[broker-a] in name server[{ns}] OK, ")
    count = int(line.rsplit(" ", 1)[1])  # every topic of the broker, as 4.9.8 counts
    assert count >= 1
    assert await route_perm(c, TOPIC) == 6
    rows = await admin_json(ns, "addWritePerm", "-b", "broker-a")
    assert rows == [{"addTopicCount": count, "brokerName": "broker-a", "namesrv": ns}]
    # a second, unreachable name server: the reachable one is still done, exit 1
    r = await admin_run(f"{ns};127.0.0.1:1", "addWritePerm", "-b", "broker-a")
    assert r.rc == 1
    assert r.out.splitlines() == [
        f"add write perm of broker[broker-a] in name server[{ns}] OK, {count}",
        "add write perm of broker[broker-a] in name server[127.0.0.1:1] Failed"]
    assert len(r.err.strip().splitlines()) == 1 and "127.0.0.1:1" in r.err
    err = await admin_fails(ns, "addWritePerm", rc=2)
    assert "-b/--brokerName" in err


async def test_update_namesrv_config(cluster):
    ns = cluster.namesrv_addr
    out = await admin_ok(ns, "updateNamesrvConfig", "-k", "orderMessageEnable", "-v", "true")
    assert out == f"update name server config success![{ns}]\norderMessageEnable : true\n"
    assert (await admin_json(ns, "getNamesrvConfig"))[ns]["orderMessageEnable"] == "true"
    data = await admin_json(ns, "updateNamesrvConfig", "-k", "orderMessageEnable", "-v", "false")
    assert data == {"key": "orderMessageEnable", "namesrv": [ns], "value": "false"}
    assert (await admin_json(ns, "getNamesrvConfig"))[ns]["orderMessageEnable"] == "false"
    err = await admin_fails(ns, "updateNamesrvConfig", "-k", "kvConfigPath", "-v", "/x")
    assert "black list" in err
    err = await admin_fails(ns, "updateNamesrvConfig", "-k", "brokerChannelExpiredMillis",
                             "-v", "soon")
    assert "brokerChannelExpiredMillis" in err
    err = await admin_fails("127.0.0.1:1", "updateNamesrvConfig", "-k", "a", "-v", "b")
    assert "127.0.0.1:1" in err


async def test_update_topic_perm(cluster):
    c, ns = cluster, cluster.namesrv_addr
    out = await admin_ok(ns, "updateTopicPerm", "-b", c.addr, "-t", TOPIC, "-p", "4")
    assert out.splitlines() == [
        f"update topic perm from 6 to 4 in {c.addr} success.",
        f"TopicConfig [topicName={TOPIC}, readQueueNums=4, writeQueueNums=4, perm=R--, "
        "topicFilterType=SINGLE_TAG, topicSysFlag=0, order=false]."]
    await wait_perm(c, TOPIC, 4)
    r = await c.call(RequestCode.GET_ALL_TOPIC_CONFIG)
    table = orjson.loads(bytes(r.body))["topicConfigTable"]
    assert table[TOPIC]["perm"] == 4 and table[TOPIC]["writeQueueNums"] == 4
    assert await admin_ok(ns, "updateTopicPerm", "-b", c.addr, "-t", TOPIC, "-p", "4") == \
        "new perm equals to the old one!\n"
    rows = await admin_json(ns, "updateTopicPerm", "-c", "DefaultCluster", "-t", TOPIC, "-p", "6")
    assert rows == [{"broker": c.addr, "oldPerm": 4, "perm": 6, "topic": TOPIC}]
    await wait_perm(c, TOPIC, 6)
    err = await admin_fails(ns, "updateTopicPerm", "-b", "127.0.0.1:2", "-t", TOPIC, "-p", "2")
    assert "broker not exit or broker is not master" in err
    err = await admin_fails(ns, "updateTopicPerm", "-b", c.addr, "-t", TOPIC, "-p", "5", rc=2)
    assert "perm must be 2 (W), 4 (R) or 6 (RW)" in err
    err = await admin_fails(ns, "updateTopicPerm", "-c", "NoCluster", "-t", TOPIC, "-p", "6")
    assert "cluster NoCluster not found" in err
    assert "CODE: 17" in await admin_fails(ns, "updateTopicPerm", "-c", "DefaultCluster",
                                           "-t", "NoSuchTopic", "-p", "6")


async def test_topic_cluster_list(cluster):
    ns = cluster.namesrv_addr
    assert await admin_ok(ns, "topicClusterList", "-t", TOPIC) == "DefaultCluster\n"
    assert await admin_json(ns, "topicClusterList", "-t", TOPIC) == ["DefaultCluster"]
    assert "CODE: 17" in await admin_fails(ns, "topicClusterList", "-t", "NoSuchTopic")


async def test_update_order_conf(cluster):
    ns = cluster.namesrv_addr
    out = await admin_ok(ns, "updateOrderConf", "-t", TOPIC, "-m", "put", "-v", "broker-a:2")
    assert out == f"update orderConf success. topic=[{TOPIC}], orderConf=[broker-a:2]\n"
    out = await admin_ok(ns, "updateOrderConf", "-t", TOPIC, "-m", "get")
    assert out == f"get orderConf success. topic=[{TOPIC}], orderConf=[broker-a:2] \n"
    # with orderMessageEnable the name server serves the topic's route with it
    await admin_ok(ns, "updateNamesrvConfig", "-k", "orderMessageEnable", "-v", "true")
    route = await admin_json(ns, "topicRoute", "-t", TOPIC)
    assert route["orderTopicConf"] == "broker-a:2"
    await admin_ok(ns, "updateNamesrvConfig", "-k", "orderMessageEnable", "-v", "false")
    assert await admin_json(ns, "updateOrderConf", "-t", TOPIC, "-m", "get") == \
        {"orderConf": "broker-a:2", "topic": TOPIC}
    out = await admin_ok(ns, "updateOrderConf", "-t", TOPIC, "-m", "delete")
    assert out == f"delete orderConf success. topic=[{TOPIC}]\n"
    assert "CODE: 22" in await admin_fails(ns, "updateOrderConf", "-t", TOPIC, "-m", "get")
    assert "please set orderConf with option -v." in await admin_fails(
        ns, "updateOrderConf", "-t", TOPIC, "-m", "put")
    assert "bad orderConf" in await admin_fails(
        ns, "updateOrderConf", "-t", TOPIC, "-m", "put", "-v", "broker-a")
    assert "invalid choice" in await admin_fails(
        ns, "updateOrderConf", "-t", TOPIC, "-m", "post", rc=2)


async def test_allocate_mq(cluster):
    ns = cluster.namesrv_addr
    out = await admin_ok(ns, "allocateMQ", "-t", TOPIC, "-i", "10.0.0.1,10.0.0.2")
    result = orjson.loads(out)["result"]

    def q(i: int) -> dict:
        return {"brokerName": "broker-a", "queueId": i, "topic": TOPIC}

    assert result == {"10.0.0.1": [q(0), q(1)], "10.0.0.2": [q(2), q(3)]}
    three = (await admin_json(ns, "allocateMQ", "-t", TOPIC, "-i", "a,b,c"))["result"]
    assert [len(three[k]) for k in ("a", "b", "c")] == [2, 1, 1]
    assert "bad ipList" in await admin_fails(ns, "allocateMQ", "-t", TOPIC, "-i", "a,,b")
    assert "CODE: 17" in await admin_fails(ns, "allocateMQ", "-t", "NoSuchTopic", "-i", "a")
