"""rmq-admin's mqadmin export commands (exportMetadata, exportConfigs,
exportMetrics) as subprocesses against a real rmq-namesrv + rmq-broker: the
files they write, what is left out of them, and one-line failures."""

from __future__ import annotations

import orjson
import pytest
import pytest_asyncio

from rmq.client import Message, Producer
from rmq.testing.messaging import running_cluster
from tests.integration.admin_cli import admin_fails, admin_json, admin_ok, recording_consumer

# once: the rmq-admin command line, no compiled/twin pair of its own
pytestmark = [pytest.mark.once, pytest.mark.asyncio(loop_scope="module"), pytest.mark.timeout(120)]
TOPIC, GROUP = "TopicAdmExport", "cgAdmExport"


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def cluster(tmp_path_factory):
    async with running_cluster(tmp_path_factory.mktemp("admin-export")) as c:
        await c.create_topic(TOPIC, queues=3)
        async with Producer("pgAdmExport", client_config=c.client_config("export-p")) as p:
            for i in range(3):
                await p.send(Message(TOPIC, b"now%d" % i))
            await p.send(Message(TOPIC, b"later", delay_level=1))  # through SCHEDULE_TOPIC
        async with recording_consumer(c, GROUP, TOPIC, "*", 4):
            yield c


def read(path) -> tuple[str, dict]:
    text = path.read_text()
    return text, orjson.loads(text)


async def test_export_metadata(cluster, tmp_path):
    c, ns = cluster, cluster.namesrv_addr
    out = await admin_ok(ns, "exportMetadata", "-c", "DefaultCluster", "-f", str(tmp_path / "m"))
    assert out == f"export {tmp_path / 'm' / 'metadata.json'} success\n"
    text, meta = read(tmp_path / "m" / "metadata.json")
    assert text.startswith('{\n\t"exportTime":')  # fastjson's pretty form
    assert TOPIC in meta["topicConfigTable"] and meta["topicConfigTable"][TOPIC]["writeQueueNums"] == 3
    assert not {"TBW102", "SCHEDULE_TOPIC_XXXX", "broker-a", f"%RETRY%{GROUP}"} & set(
        meta["topicConfigTable"])
    assert GROUP in meta["subscriptionGroupTable"]
    assert not {"TOOLS_CONSUMER", "CID_RMQ_SYS_TRANS"} & set(meta["subscriptionGroupTable"])
    data = await admin_json(ns, "exportMetadata", "-c", "DefaultCluster", "-t", "-s",
                            "-f", str(tmp_path / "t"))
    assert data["file"] == str(tmp_path / "t" / "topic.json")
    _, topics = read(tmp_path / "t" / "topic.json")
    assert set(topics) == {"exportTime", "topicConfigTable"}
    assert f"%RETRY%{GROUP}" in topics["topicConfigTable"]
    await admin_ok(ns, "exportMetadata", "-b", c.addr, "-g", "-f", str(tmp_path / "b"))
    _, groups = read(tmp_path / "b" / "subscriptionGroup.json")
    assert "dataVersion" in groups and GROUP in groups["subscriptionGroupTable"]
    await admin_ok(ns, "exportMetadata", "-b", c.addr, "-t", "-f", str(tmp_path / "b"))
    _, topics = read(tmp_path / "b" / "topic.json")
    assert "dataVersion" in topics and TOPIC in topics["topicConfigTable"]
    assert "choose a cluster (-c) or a broker (-b)" in await admin_fails(ns, "exportMetadata")
    blocked = tmp_path / "file"
    blocked.write_text("")
    err = await admin_fails(ns, "exportMetadata", "-c", "DefaultCluster", "-f", str(blocked))
    assert str(blocked) in err
    assert "cluster NoCluster not found" in await admin_fails(ns, "exportMetadata", "-c",
                                                              "NoCluster")


async def test_export_configs(cluster, tmp_path):
    ns = cluster.namesrv_addr
    out = await admin_ok(ns, "exportConfigs", "-c", "DefaultCluster", "-f", str(tmp_path))
    assert out == f"export {tmp_path / 'configs.json'} success\n"
    _, configs = read(tmp_path / "configs.json")
    assert configs["clusterScale"] == {"masterBrokerSize": 1, "namesrvSize": 1,
                                       "slaveBrokerSize": 0}
    broker = configs["brokerConfigs"]["broker-a"]
    assert broker["brokerName"] == "broker-a" and broker["brokerRole"] == "ASYNC_MASTER"
    assert broker["brokerClusterName"] == "DefaultCluster" and "messageDelayLevel" in broker
    assert set(broker) <= {"brokerClusterName", "brokerId", "brokerName", "brokerRole",
                           "fileReservedTime", "filterServerNums", "flushDiskType",
                           "maxMessageSize", "messageDelayLevel", "msgTraceTopicName",
                           "slaveReadEnable", "traceOn", "traceTopicEnable", "useTLS",
                           "autoCreateTopicEnable", "autoCreateSubscriptionGroup"}
    assert "cluster NoCluster not found" in await admin_fails(ns, "exportConfigs", "-c",
                                                              "NoCluster")


async def test_export_metrics(cluster, tmp_path):
    ns = cluster.namesrv_addr
    out = await admin_ok(ns, "exportMetrics", "-c", "DefaultCluster", "-f", str(tmp_path))
    assert out == f"export {tmp_path / 'metrics.json'} success\n"
    _, metrics = read(tmp_path / "metrics.json")
    broker = metrics["evaluateReport"]["broker-a"]
    quota = broker["runtimeQuota"]
    assert quota["topicSize"] >= 1 and quota["groupSize"] >= 1
    assert float(quota["diskRatio"]["commitLogDiskRatio"]) > 0
    assert quota["oneDayNum"]["scheduleOneDayInNum"] >= 1  # the delayed message
    assert set(quota["tps"]) == {"normalInTps", "normalOutTps", "transInTps", "scheduleInTps"}
    assert broker["runtimeVersion"]["rocketmqVersion"] == "V4_9_8"
    assert "PYTHON%V4_9_8" in broker["runtimeVersion"]["clientInfo"]
    assert broker["runtimeEnv"]["cpuNum"] is not None
    totals = metrics["totalData"]
    assert totals["totalOneDayNum"]["scheduleOneDayInNum"] == \
        quota["oneDayNum"]["scheduleOneDayInNum"]
    assert set(totals["totalTps"]) == {"totalNormalInTps", "totalNormalOutTps",
                                       "totalTransInTps", "totalScheduleInTps"}
    assert "cluster NoCluster not found" in await admin_fails(ns, "exportMetrics", "-c",
                                                              "NoCluster")
    assert "127.0.0.1:1" in await admin_fails("127.0.0.1:1", "exportMetrics", "-c", "x")
