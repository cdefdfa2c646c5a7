"""Every rmq-admin command, run as a real subprocess, against a known cluster
(rmq-namesrv + rmq-broker processes, messages sent, a live consumer and
producer): table output and --json, and the cluster state each change leaves."""

from __future__ import annotations

import asyncio
import re
import time

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
from rmq.common import fastjson
from rmq.common.codes import RequestCode
from rmq.remoting import RemotingCommand
from rmq.testing.cluster import Cluster
from rmq.testing.procs import run_cli
from rmq.testing.wait import wait_until

# once: the rmq-admin command line, no compiled/twin pair of its own
pytestmark = [pytest.mark.once, pytest.mark.asyncio(loop_scope="module"), pytest.mark.timeout(90)]
TOPIC, GROUP, PGROUP = "TopicAdm", "cgAdmLive", "pgAdmLive"


class Known:
    """The cluster, the live clients and what was sent."""

    def __init__(self, cluster: Cluster) -> None:
        self.c = cluster
        self.received: list = []
        self.sent: list = []
        self.consumer: PushConsumer | None = None
        self.producer: Producer | None = None

    @property
    def ns(self) -> str:
        return self.c.namesrv_addr

    async def admin(self, *args: str, ok: bool = True) -> str:
        """stdout of ``rmq-admin args -n <ns>``; the loop keeps serving meanwhile."""
        res = await asyncio.to_thread(run_cli, "rmq.tools.admin", [args[0], "-n", self.ns,
                                                                   *args[1:]])
        if ok:
            assert res.returncode == 0, f"{args}: {res.stderr}"
            assert res.stderr == ""
        else:
            assert res.returncode == 1 and res.stdout == "", res.stdout
            assert len(res.stderr.strip().splitlines()) == 1, res.stderr
            return res.stderr
        return res.stdout

    async def json(self, *args: str):
        return orjson.loads(await self.admin(*args, "--json"))


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def known(tmp_path_factory):
    c = Cluster(tmp_path_factory.mktemp("admin"))
    k = Known(c)
    try:
        c.start_broker()
        await c.wait_routable()
        out = await k.admin("updateTopic", "-c", "DefaultCluster", "-t", TOPIC, "-r", "4",
                            "-w", "4")
        assert out.splitlines()[0].split() == ["broker", "topic", "readQueueNums",
                                               "writeQueueNums", "perm"]
        assert out.splitlines()[1].split() == [c.addr, TOPIC, "4", "4", "RW-"]
        await c.wait_routable(TOPIC)
        k.producer = Producer(PGROUP, client_config=c.client_config("adm-producer"))
        await k.producer.start()
        for i in range(8):
            k.sent.append(await k.producer.send(Message(
                TOPIC, b"body%d" % i, tags="TagA" if i % 2 else "TagB", keys=f"key{i}")))

        def listener(msgs, ctx):
            k.received.extend(msgs)
            return ConsumeStatus.CONSUME_SUCCESS

        k.consumer = PushConsumer(GROUP, listener=listener, config=ConsumerConfig(
            consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET),
            client_config=c.client_config("adm-consumer"))
        k.consumer.subscribe(TOPIC, "*")
        await k.consumer.start()
        await wait_until(lambda: len(k.received) == 8, 15)
        await k.consumer.persist_offsets(oneway=False)
        yield k
    finally:
        if k.consumer is not None:
            await k.consumer.shutdown()
        if k.producer is not None:
            await k.producer.shutdown()
        await c.close()


async def test_topic_commands(known):
    k = known
    rows = await k.json("updateTopic", "-b", k.c.addr, "-t", "TopicAdm2", "-r", "2", "-w", "2",
                        "-p", "4")
    assert rows == [{"broker": k.c.addr, "perm": "R--", "readQueueNums": 2, "topic": "TopicAdm2",
                     "writeQueueNums": 2}]
    await k.c.wait_routable("TopicAdm2")
    out = await k.admin("topicList")
    assert out.splitlines()[0] == "topic" and {TOPIC, "TopicAdm2", "TBW102"} <= set(out.split())
    assert {"topic": TOPIC} in await k.json("topicList", "-c", "DefaultCluster")
    out = await k.admin("topicRoute", "-t", TOPIC)
    assert out.startswith("brokers\nbrokerName  cluster         brokerId  addr\n")
    assert f"broker-a    DefaultCluster  0         {k.c.addr}" in out
    assert "queues\nbrokerName  perm  readQueueNums  topicSysFlag  writeQueueNums\n" in out
    assert "broker-a    RW-   4              0             4" in out
    route = await k.json("topicRoute", "-t", "TopicAdm2")
    assert route["brokerDatas"][0]["brokerAddrs"] == {"0": k.c.addr}
    assert route["queueDatas"][0]["perm"] == 4
    status = await k.json("topicStatus", "-t", TOPIC)
    assert [(r["queueId"], r["minOffset"], r["maxOffset"]) for r in status] == \
        [(0, 0, 2), (1, 0, 2), (2, 0, 2), (3, 0, 2)]
    assert all(r["lastUpdateTimestamp"] > 0 for r in status)
    out = await k.admin("topicStatus", "-t", TOPIC)
    assert out.splitlines()[0].split() == ["brokerName", "queueId", "minOffset", "maxOffset",
                                           "lastUpdateTimestamp"]
    assert out.splitlines()[1].split()[:4] == ["broker-a", "0", "0", "2"]
    # deleteTopic: gone from the broker and the name server
    assert await k.json("deleteTopic", "-t", "TopicAdm2", "-c", "DefaultCluster") == \
        {"cluster": "DefaultCluster", "deleted": "TopicAdm2"}
    assert "TopicAdm2" not in (await k.admin("topicList")).split()
    err = await k.admin("topicRoute", "-t", "TopicAdm2", ok=False)
    assert "CODE: 17" in err
    r = await k.c.call(RequestCode.GET_ALL_TOPIC_CONFIG)
    assert b"TopicAdm2" not in bytes(r.body)


async def test_cluster_and_broker_commands(known):
    k = known
    out = await k.admin("clusterList")
    header, row = out.splitlines()
    assert header.split() == ["Cluster", "BrokerName", "BID", "Addr", "Version", "InTPS",
                              "OutTPS", "Timer(Progress)", "InTotalToday", "OutTotalToday"]
    assert row.split()[:5] == ["DefaultCluster", "broker-a", "0", k.c.addr, "V4_9_8"]
    (entry,) = await k.json("clusterList")
    assert entry["Addr"] == k.c.addr and int(entry["InTotalToday"]) >= 8
    assert re.fullmatch(r"\d+-\d+\(\d+\.\dw, \d+\.\d, \d+\.\d\)", entry["Timer(Progress)"])
    status = await k.json("brokerStatus", "-b", k.c.addr)
    assert status["brokerVersionDesc"] == "V4_9_8" and int(status["msgPutTotalTodayNow"]) >= 8
    out = await k.admin("brokerStatus", "-c", "DefaultCluster")
    assert any(line.split() == ["brokerVersionDesc", "V4_9_8"] for line in out.splitlines())
    config = await k.json("getBrokerConfig", "-b", k.c.addr)
    assert config["brokerName"] == "broker-a" and config["listenPort"] == str(k.c.port)
    out = await k.admin("getBrokerConfig", "-c", "DefaultCluster")
    assert any(line.split() == ["brokerClusterName", "DefaultCluster"]
               for line in out.splitlines())
    assert await k.json("updateBrokerConfig", "-b", k.c.addr, "-k", "fileReservedTime",
                        "-v", "96") == [{"broker": k.c.addr, "fileReservedTime": "96"}]
    out = await k.admin("updateBrokerConfig", "-c", "DefaultCluster", "-k", "maxMessageSize",
                        "-v", "2097152")
    assert out.splitlines()[1].split() == [k.c.addr, "2097152"]
    config = await k.json("getBrokerConfig", "-b", k.c.addr)
    assert config["fileReservedTime"] == "96" and config["maxMessageSize"] == "2097152"
    err = await k.admin("brokerStatus", "-b", "127.0.0.1:1", ok=False)
    assert "127.0.0.1:1" in err
    # an unreachable name server: named once, in one line
    res = await asyncio.to_thread(run_cli, "rmq.tools.admin", ["clusterList", "-n", "127.0.0.1:1"])
    assert res.returncode == 1 and res.stderr.count("connect to 127.0.0.1:1 failed") == 1


async def test_subscription_group_commands(known):
    k = known

    async def groups() -> dict:
        r = await k.c.call(RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)
        return fastjson.loads(bytes(r.body))["subscriptionGroupTable"]

    out = await k.admin("updateSubGroup", "-c", "DefaultCluster", "-g", "cgAdm", "-r", "3",
                        "-s", "true", "-d", "false")
    head, row = out.splitlines()
    assert dict(zip(head.split(), row.split(), strict=True))["retryMaxTimes"] == "3"
    assert dict(zip(head.split(), row.split(), strict=True))["consumeEnable"] == "true"
    rows = await k.json("updateSubGroup", "-b", k.c.addr, "-g", "cgAdm2", "-q", "2")
    assert rows[0]["groupName"] == "cgAdm2" and rows[0]["retryQueueNums"] == 2
    table = await groups()
    assert table["cgAdm"]["retryMaxTimes"] == 3 and table["cgAdm2"]["retryQueueNums"] == 2
    out = await k.admin("deleteSubGroup", "-b", k.c.addr, "-g", "cgAdm")
    assert out.splitlines()[1].split() == [k.c.addr, "cgAdm"]
    assert await k.json("deleteSubGroup", "-c", "DefaultCluster", "-g", "cgAdm2", "-r",
                        "true") == [{"broker": k.c.addr, "deleted": "cgAdm2"}]
    table = await groups()
    assert "cgAdm" not in table and "cgAdm2" not in table


async def test_connection_and_progress_commands(known):
    k = known
    cid = k.consumer.instance.client_id
    out = await k.admin("consumerConnection", "-g", GROUP)
    assert out.startswith("connections\nclientId")
    assert cid in out and "PYTHON" in out
    assert [TOPIC, "*"] in [line.split() for line in out.splitlines()]
    assert "CONSUME_PASSIVELY" in out and "CLUSTERING" in out
    conn = await k.json("consumerConnection", "-g", GROUP)
    assert [c["clientId"] for c in conn["connectionSet"]] == [cid]
    assert conn["consumeFromWhere"] == "CONSUME_FROM_FIRST_OFFSET"
    assert set(conn["subscriptionTable"]) == {TOPIC, f"%RETRY%{GROUP}"}
    out = await k.admin("producerConnection", "-g", PGROUP, "-t", TOPIC)
    assert out.splitlines()[0].split() == ["clientId", "clientAddr", "language", "version"]
    assert out.splitlines()[1].split()[0] == k.producer.instance.client_id
    conn = await k.json("producerConnection", "-g", PGROUP, "-t", TOPIC)
    assert [c["language"] for c in conn["connectionSet"]] == ["PYTHON"]
    err = await k.admin("consumerConnection", "-g", "noSuchGroup", ok=False)
    assert "not online" in err or "CODE" in err
    rows = await k.json("consumerProgress", "-g", GROUP, "-t", TOPIC)
    assert [(r["queueId"], r["brokerOffset"], r["consumerOffset"], r["diff"]) for r in rows] == \
        [(0, 2, 2, 0), (1, 2, 2, 0), (2, 2, 2, 0), (3, 2, 2, 0)]
    out = await k.admin("consumerProgress", "-g", GROUP)
    assert out.splitlines()[0].split() == ["#Topic", "#Broker", "Name", "#QID", "#Broker",
                                           "Offset", "#Consumer", "Offset", "#Diff", "#Inflight",
                                           "#LastTime"]
    assert sum(1 for line in out.splitlines() if line.startswith(TOPIC)) == 4
    assert out.splitlines()[-1] == "Consume Inflight Total: 0"
    # the last consume time as mqadmin prints it, not epoch milliseconds
    queue_lines = [line for line in out.splitlines()[1:] if line.startswith(TOPIC)]
    times = [line.split("  ")[-1].strip() for line in queue_lines]
    assert all(re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d|N/A", t) for t in times)
    assert any(t != "N/A" for t in times)
    err = await k.admin("consumerProgress", "-g", "noSuchGroup", ok=False)
    assert "no such consumer group noSuchGroup" in err


async def test_message_query_commands(known):
    k = known
    first = k.sent[0]
    out = await k.admin("queryMsgById", "-i", first.offset_msg_id)
    lines = dict(line.split(":", 1) for line in out.splitlines())
    assert lines["msgId"].strip() == first.msg_id and lines["body"].strip() == "body0"
    assert lines["brokerName"].strip() == "broker-a" and lines["keys"].strip() == "key0"
    assert orjson.loads(lines["properties"].strip())["TAGS"] == "TagB"
    assert re.fullmatch(r" *\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}", lines["storeTimestamp"])
    viewed = await k.json("queryMsgById", "-i", first.offset_msg_id)
    assert viewed["offsetMsgId"] == first.offset_msg_id and viewed["queueId"] == \
        first.message_queue.queue_id
    out = await k.admin("queryMsgByKey", "-t", TOPIC, "-k", "key3")
    head, row = out.splitlines()
    assert head.split() == ["msgId", "queueId", "queueOffset", "tags", "keys", "storeTimestamp"]
    assert row.split()[:5] == [k.sent[3].msg_id, str(k.sent[3].message_queue.queue_id),
                               str(k.sent[3].queue_offset), "TagA", "key3"]
    found = await k.json("queryMsgByKey", "-t", TOPIC, "-k", "key5")
    assert [m["msgId"] for m in found] == [k.sent[5].msg_id] and "body" not in found[0]
    out = await k.admin("queryMsgByUniqueKey", "-t", TOPIC, "-i", k.sent[6].msg_id)
    assert "body:             body6" in out
    assert (await k.json("queryMsgByUniqueKey", "-t", TOPIC, "-i", k.sent[6].msg_id))[
        "offsetMsgId"] == k.sent[6].offset_msg_id
    err = await k.admin("queryMsgByUniqueKey", "-t", TOPIC, "-i", "00" * 16, ok=False)
    assert "no message" in err
    s = k.sent[2]
    q, o = str(s.message_queue.queue_id), str(s.queue_offset)
    out = await k.admin("queryMsgByOffset", "-t", TOPIC, "-b", "broker-a", "-i", q, "-o", o)
    assert f"msgId:            {s.msg_id}" in out
    m = await k.json("queryMsgByOffset", "-t", TOPIC, "-b", "broker-a", "-i", q, "-o", o)
    assert m["body"] == "body2" and m["queueOffset"] == s.queue_offset
    assert "no message" in await k.admin("queryMsgByOffset", "-t", TOPIC, "-b", "broker-a",
                                         "-i", q, "-o", "99", ok=False)


async def test_print_consume_and_send_commands(known):
    k = known
    out = await k.admin("printMsg", "-t", TOPIC)
    assert out.splitlines()[0].split() == ["msgId", "queueId", "queueOffset", "tags", "keys",
                                           "storeTimestamp", "body"]
    assert len(out.splitlines()) == 9
    tagged = await k.json("printMsg", "-t", TOPIC, "-s", "TagA")
    assert sorted(m["body"] for m in tagged) == ["body1", "body3", "body5", "body7"]
    assert len(await k.json("printMsg", "-t", TOPIC, "-c", "3")) == 3
    later = await k.json("printMsg", "-t", TOPIC, "-b", str(int(time.time() * 1000) + 60000))
    assert later == []
    s = k.sent[4]
    got = await k.json("consumeMessage", "-t", TOPIC, "-b", "broker-a", "-i",
                       str(s.message_queue.queue_id), "-o", str(s.queue_offset))
    assert [m["body"] for m in got][0] == "body4"
    out = await k.admin("consumeMessage", "-t", TOPIC, "-c", "2")
    assert len(out.splitlines()) == 3
    out = await k.admin("sendMessage", "-t", TOPIC, "-p", "from-cli", "-c", "TagC", "-k", "cli")
    fields = {line[:12].strip(): line[12:].strip() for line in out.splitlines()}
    assert fields["Send Status"] == "SEND_OK" and fields["Broker Name"] == "broker-a"
    sent = await k.json("sendMessage", "-t", TOPIC, "-p", "to-q3", "-b", "broker-a", "-i", "3")
    assert sent["Queue Id"] == 3 and sent["Send Status"] == "SEND_OK"
    await wait_until(lambda: {b"from-cli", b"to-q3"} <= {m.body for m in k.received}, 10)
    m = next(m for m in k.received if m.body == b"from-cli")
    assert m.tags == "TagC" and m.keys == "cli" and m.msg_id == fields["MsgId"]
    assert "-b and -i go together" in await k.admin("sendMessage", "-t", TOPIC, "-p", "x",
                                                    "-b", "broker-a", ok=False)


async def test_reset_offset_by_time_redelivers(known):
    k = known
    await wait_until(lambda: len(k.received) >= 10, 10)
    await k.consumer.persist_offsets(oneway=False)
    before = len(k.received)
    rows = await k.json("resetOffsetByTime", "-g", GROUP, "-t", TOPIC, "-s", "0")
    assert [(r["queueId"], r["offset"]) for r in rows] == [(0, 0), (1, 0), (2, 0), (3, 0)]
    # the broker pushed RESET_CONSUMER_CLIENT_OFFSET: everything comes again
    await wait_until(lambda: len(k.received) - before >= 10, 20)
    again = [m.body for m in k.received[before:]]
    assert {b"body%d" % i for i in range(8)} <= set(again)
    out = await k.admin("resetOffsetByTime", "-g", GROUP, "-t", TOPIC, "-s", "now")
    assert out.splitlines()[0].split() == ["brokerName", "queueId", "offset"]
    err = await k.admin("resetOffsetByTime", "-g", "cgNobody", "-t", TOPIC, "-s", "now",
                        ok=False)
    assert "cgNobody" in err and "not exist" in err


async def test_namesrv_commands_and_wipe_write_perm(known):
    k = known
    config = (await k.json("getNamesrvConfig"))[k.ns]
    assert config["listenPort"] == str(k.c.ns_port)
    out = await k.admin("getNamesrvConfig")
    assert out.startswith(f"{k.ns}  {{") and f'"listenPort":"{k.c.ns_port}"' in out
    assert await k.json("updateKvConfig", "-s", "ORDER_TOPIC_CONFIG", "-k", TOPIC, "-v",
                        "broker-a:4") == {"key": TOPIC, "namespace": "ORDER_TOPIC_CONFIG",
                                          "value": "broker-a:4"}
    r = await k.c.client.invoke(k.ns, RemotingCommand.create_request(
        RequestCode.GET_KV_CONFIG, {"namespace": "ORDER_TOPIC_CONFIG", "key": TOPIC}), 3000)
    assert r.ext_fields["value"] == "broker-a:4"
    out = await k.admin("deleteKvConfig", "-s", "ORDER_TOPIC_CONFIG", "-k", TOPIC)
    assert out.split() == ["namespace", "ORDER_TOPIC_CONFIG", "deleted", TOPIC]
    # last: the broker's topics become read-only on the name server.  A registration
    # still in flight from earlier commands legitimately restores the broker's own
    # perm (as with 4.9.8), so the wipe is repeated until the route shows it.
    for _ in range(5):
        out = await k.admin("wipeWritePerm", "-b", "broker-a")
        head, row = out.splitlines()
        assert head.split() == ["namesrv", "wipeTopicCount"] and row.split()[0] == k.ns
        assert int(row.split()[1]) >= 1
        route = await k.json("topicRoute", "-t", TOPIC)
        if route["queueDatas"][0]["perm"] == 4:
            break
        await asyncio.sleep(0.5)
    assert route["queueDatas"][0]["perm"] == 4
    assert (await k.json("wipeWritePerm", "-b", "broker-a"))[0]["namesrv"] == k.ns
