"""rmq-broker as a real process with a real name server: registration, admin codes,
restart, SIGTERM/SIGKILL, start-up failures."""

from __future__ import annotations

import asyncio
import signal
import socket

import pytest

from rmq.common import fastjson
from rmq.common.codes import RequestCode, ResponseCode
from rmq.common.properties import parse_properties
from rmq.testing.cluster import Cluster, broker_conf
from rmq.testing.procs import RmqProcess, free_port
from rmq.testing.wait import wait_until_blocking

R = RequestCode


async def _wait_output(proc: RmqProcess, text: str, timeout: float = 15.0) -> None:
    """Until ``text`` is in the process's output (bounded)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while text not in proc.output():
        assert loop.time() < deadline, f"{text!r} not in output:\n{proc.output()[-2000:]}"
        await asyncio.sleep(0.05)


@pytest.fixture
async def cluster(tmp_path):
    c = Cluster(tmp_path)
    yield c
    await c.close()


@pytest.mark.timeout(90)
async def test_route_admin_codes_restart_and_sigterm(cluster):
    broker = cluster.start_broker()
    await cluster.wait_registered()
    # registration runs inside start(); the boot line is printed right after it
    await _wait_output(broker, "boot success")
    # the broker's own system topics are routed at once
    route = await cluster.route("broker-a")
    assert route.code == ResponseCode.SUCCESS
    assert f"127.0.0.1:{cluster.port}" in bytes(route.body).decode()

    create = {"topic": "TopicA", "defaultTopic": "TBW102", "readQueueNums": "4",
              "writeQueueNums": "4", "perm": "6", "topicFilterType": "SINGLE_TAG",
              "topicSysFlag": "0", "order": "false"}
    assert (await cluster.call(R.UPDATE_AND_CREATE_TOPIC, create)).code == 0
    route = await cluster.route("TopicA")
    assert route.code == 0 and '"writeQueueNums":4' in bytes(route.body).decode()
    bad = dict(create, topic="SCHEDULE_TOPIC_XXXX")
    refused = await cluster.call(R.UPDATE_AND_CREATE_TOPIC, bad)
    assert refused.code == 1 and "conflict with system topic" in refused.remark

    topics = fastjson.loads(bytes((await cluster.call(R.GET_ALL_TOPIC_CONFIG)).body))
    assert topics["topicConfigTable"]["TopicA"]["readQueueNums"] == 4
    stats = await cluster.call(R.GET_TOPIC_STATS_INFO, {"topic": "TopicA"})
    assert stats.code == 0 and len(fastjson.loads(bytes(stats.body))["offsetTable"]) == 4
    assert (await cluster.call(R.GET_TOPIC_STATS_INFO, {"topic": "Nope"})).code == 17
    for code in (R.GET_MAX_OFFSET, R.GET_MIN_OFFSET, R.GET_EARLIEST_MSG_STORETIME):
        r = await cluster.call(code, {"topic": "TopicA", "queueId": "0"})
        assert r.code == 0, (code, r.remark)
    r = await cluster.call(R.SEARCH_OFFSET_BY_TIMESTAMP,
                           {"topic": "TopicA", "queueId": "0", "timestamp": "0"})
    assert r.code == 0 and r.ext_fields["offset"] == "0"

    group = {"groupName": "cg1", "retryMaxTimes": 3}
    assert (await cluster.call(R.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
                               body=fastjson.dumps(group))).code == 0
    groups = fastjson.loads(bytes((await cluster.call(R.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)).body))
    assert groups["subscriptionGroupTable"]["cg1"]["retryMaxTimes"] == 3
    assert (await cluster.call(R.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
                               body=fastjson.dumps({"groupName": "cg2"}))).code == 0
    assert (await cluster.call(R.DELETE_SUBSCRIPTIONGROUP,
                               {"groupName": "cg2", "removeOffset": "true"})).code == 0

    info = fastjson.loads(bytes((await cluster.call(R.GET_BROKER_RUNTIME_INFO)).body))["table"]
    for key in ("brokerVersionDesc", "msgPutTotalTodayNow", "commitLogDirCapacity", "putTps",
                "sendThreadPoolQueueCapacity", "pageCacheLockTimeMills", "bootTimestamp"):
        assert key in info, key
    assert info["brokerVersionDesc"] == "V4_9_8" and info["sendThreadPoolQueueCapacity"] == "10000"

    conf = await cluster.call(R.GET_BROKER_CONFIG)
    assert conf.code == 0 and "version" in conf.ext_fields
    assert parse_properties(bytes(conf.body).decode())["brokerName"] == "broker-a"
    black = await cluster.call(R.UPDATE_BROKER_CONFIG, body=b"brokerConfigPath=/x\n")
    assert black.code == ResponseCode.NO_PERMISSION
    assert (await cluster.call(R.UPDATE_BROKER_CONFIG,
                               body=b"flushConsumerOffsetInterval=1000\n")).code == 0
    with open(cluster.conf) as f:
        assert "flushConsumerOffsetInterval=1000" in f.read()

    offsets = await cluster.call(R.GET_ALL_CONSUMER_OFFSET)
    assert fastjson.loads(bytes(offsets.body)) == {"offsetTable": {}}
    no_delay = await cluster.call(R.GET_ALL_DELAY_OFFSET)  # no delayed message yet
    assert no_delay.code == 1 and no_delay.remark == "No delay offset in this broker"
    systopics = fastjson.loads(bytes((await cluster.call(R.GET_SYSTEM_TOPIC_LIST_FROM_BROKER)).body))
    assert "SCHEDULE_TOPIC_XXXX" in systopics["topicList"]
    assert (await cluster.call(R.GET_CONSUMER_CONNECTION_LIST,
                               {"consumerGroup": "cg1"})).code == ResponseCode.CONSUMER_NOT_ONLINE
    assert (await cluster.call(R.GET_PRODUCER_CONNECTION_LIST,
                               {"producerGroup": "pg"})).code == 1
    stats = await cluster.call(R.GET_CONSUME_STATS, {"consumerGroup": "cg1", "topic": "TopicA"})
    assert stats.code == 0 and len(fastjson.loads(bytes(stats.body))["offsetTable"]) == 4
    for code in (R.CLEAN_EXPIRED_CONSUMEQUEUE, R.DELETE_EXPIRED_COMMITLOG, R.CLEAN_UNUSED_TOPIC):
        assert (await cluster.call(code)).code == 0
    unknown = await cluster.call(9999)
    assert unknown.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED

    # SIGTERM: clean store, gone from the route at once
    broker.signal(signal.SIGTERM)
    assert broker.wait(30) == 0
    assert not (cluster.store_dir / "abort").exists()
    assert (await cluster.route("TopicA")).code == ResponseCode.TOPIC_NOT_EXIST

    # restart keeps topics and groups; no abnormal recovery
    cluster.start_broker()
    await cluster.wait_registered()
    store_log = (cluster.tmp / "logs" / "rocketmqlogs" / "store.log").read_text()
    assert "last shutdown abnormally" not in store_log
    assert store_log.count("last shutdown normally") == 2
    topics = fastjson.loads(bytes((await cluster.call(R.GET_ALL_TOPIC_CONFIG)).body))
    assert "TopicA" in topics["topicConfigTable"]
    groups = fastjson.loads(bytes((await cluster.call(R.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)).body))
    assert "cg1" in groups["subscriptionGroupTable"] and "cg2" not in groups[
        "subscriptionGroupTable"]
    assert (await cluster.route("TopicA")).code == 0
    # delete the topic in the broker
    assert (await cluster.call(R.DELETE_TOPIC_IN_BROKER, {"topic": "TopicA"})).code == 0
    topics = fastjson.loads(bytes((await cluster.call(R.GET_ALL_TOPIC_CONFIG)).body))
    assert "TopicA" not in topics["topicConfigTable"]


@pytest.mark.timeout(60)
async def test_second_broker_on_same_store_and_port_in_use(cluster):
    cluster.start_broker()
    await cluster.wait_registered()
    other_port = free_port(span=4) + 2
    conf = broker_conf(cluster.tmp, other_port, name="broker-b",
                       store=cluster.store_dir.name)  # same store directory
    second = RmqProcess("rmq.broker.startup", ["-c", conf], cluster.tmp / "b2.out",
                        env={"ROCKETMQ_HOME": str(cluster.tmp)}).start()
    assert second.wait(30) == 255
    assert "Lock failed" in second.output()

    taken = socket.socket()
    taken.bind(("0.0.0.0", 0))
    taken.listen()
    busy_port = taken.getsockname()[1]
    try:
        conf = broker_conf(cluster.tmp, busy_port, store="store-busy")
        third = RmqProcess("rmq.broker.startup", ["-c", conf], cluster.tmp / "b3.out",
                           env={"ROCKETMQ_HOME": str(cluster.tmp)}).start()
        assert third.wait(30) == 255
        assert "broker start failed" in third.output()
        assert f"cannot listen on 0.0.0.0:{busy_port}: " in third.output()
        assert not (cluster.tmp / "store-busy" / "abort").exists()
    finally:
        taken.close()


@pytest.mark.timeout(60)
async def test_sigkill_leaves_abort_file_for_abnormal_recovery(cluster):
    broker = cluster.start_broker()
    await cluster.wait_registered()
    assert (await cluster.route("broker-a")).code == 0
    broker.kill()
    assert (cluster.store_dir / "abort").exists()
    cluster.start_broker()
    await cluster.wait_registered()
    assert (await cluster.route("broker-a")).code == 0
    log = (cluster.tmp / "logs" / "rocketmqlogs" / "store.log").read_text()
    assert log.count("last shutdown normally") == 1  # the first, fresh start
    assert "last shutdown abnormally" in log


@pytest.mark.timeout(60)
def test_isolate_log_enable_gives_each_broker_its_log_directory(tmp_path):
    port = free_port(span=4) + 2
    conf = broker_conf(tmp_path, port, "isolateLogEnable=true\nbrokerId=0\n", name="broker-iso")
    broker = RmqProcess("rmq.broker.startup", ["-c", conf], tmp_path / "iso.out",
                        env={"ROCKETMQ_HOME": str(tmp_path)}).start(wait_for_port=port)
    try:
        logs = tmp_path / "logs" / "rocketmqlogs"
        # the line follows the port's opening
        wait_until_blocking(lambda: "boot success" in (logs / "broker-iso_0" / "broker.log")
                            .read_text(), 15, 0.1, "boot success in the broker's own log")
        assert (logs / "broker-iso_0" / "store.log").exists()
        assert not (logs / "broker.log").exists()
    finally:
        broker.kill()
