"""Messaging processors against a real rmq-namesrv + rmq-broker, driven with raw
remoting requests so that every code, header and remark is checked as sent."""

from __future__ import annotations

import asyncio
import time

import orjson
import pytest

from rmq.client.codec import decode_messages, encode_batch
from rmq.client.headers import pull_header, send_header_v2
from rmq.client.message import Message
from rmq.common.codes import RequestCode, ResponseCode
from rmq.common.message_id import decode_message_id
from rmq.testing.cluster import Cluster
from rmq.testing.wait import wait_until

R = RequestCode
RC = ResponseCode


def props(**kw: str) -> str:
    return "".join(f"{k}\x01{v}\x02" for k, v in kw.items())


async def send(c: Cluster, topic: str, body: bytes, queue_id: int = 0,
               properties: str = "", code: int = R.SEND_MESSAGE_V2, batch: bool = False,
               version: int | None = None, reconsume: int = 0, max_reconsume: int | None = None):
    ext = send_header_v2("pg", topic, "TBW102", 4, queue_id, 0, int(time.time() * 1000), 0,
                         properties, batch, "broker-a")
    ext["j"] = str(reconsume)
    if max_reconsume is not None:
        ext["l"] = str(max_reconsume)
    return await c.call(code, ext, body, version=version)


async def pull(c: Cluster, topic: str, queue_id: int, offset: int, sys_flag: int = 4,
               sub: str | None = "*", suspend_ms: int = 0, group: str = "cg", max_nums: int = 32,
               timeout_ms: int = 5000):
    ext = pull_header(group, topic, queue_id, offset, max_nums, sys_flag, 0, suspend_ms, sub, 0,
                      "TAG", "broker-a")
    return await c.call(R.PULL_MESSAGE, ext, timeout_ms=timeout_ms)


@pytest.fixture
async def cluster(tmp_path):
    c = Cluster(tmp_path, "maxMessageSize=65536\n",
                         env={"RMQ_REBALANCE_LOCK_MAX_LIVE_TIME": "1500"})
    c.start_broker()
    yield c
    await c.close()


@pytest.mark.timeout(90)
async def test_send_checks_and_answers(cluster):
    c = cluster
    r = await send(c, "TopicS", b"hello", 1, props(TAGS="TagA", KEYS="k1", WAIT="true",
                                                       UNIQ_KEY="ABCDEF0123"))
    assert r.code == RC.SUCCESS, r.remark
    ext = r.ext_fields
    assert ext["MSG_REGION"] == "DefaultRegion" and ext["TRACE_ON"] == "true"
    assert ext["queueId"] == "1" and ext["queueOffset"] == "0"
    (_host, phy) = decode_message_id(ext["msgId"])
    # the stored record: CLUSTER added, WAIT not stored, UNIQ_KEY kept
    view = await c.call(R.VIEW_MESSAGE_BY_ID, {"offset": str(phy)})
    assert view.code == RC.SUCCESS
    (m,) = decode_messages(view.body)
    assert m.properties["CLUSTER"] == "DefaultCluster" and "WAIT" not in m.properties
    assert m.properties["UNIQ_KEY"] == "ABCDEF0123" and m.body == b"hello"
    # SEND_MESSAGE with V1 names, the C++ client's spelling
    v1 = {"producerGroup": "pg", "topic": "TopicS", "defaultTopic": "TBW102",
          "defaultTopicQueueNums": 4, "queueId": 1, "sysFlag": 0, "bornTimestamp": "1",
          "flag": 0, "properties": "", "batch": "1", "unitMode": "0"}
    r = await c.call(R.SEND_MESSAGE, v1, b"v1")
    assert r.code == RC.SUCCESS and r.ext_fields["queueOffset"] == "1"
    # a required field missing
    bad = dict(v1)
    del bad["bornTimestamp"]
    r = await c.call(R.SEND_MESSAGE, bad, b"x")
    assert r.code == RC.SYSTEM_ERROR and "bornTimestamp" in r.remark
    # queue id out of range, forbidden topic, invalid topic, message too large
    r = await send(c, "TopicS", b"x", 9)
    assert r.code == RC.SYSTEM_ERROR and "queueId[9] is illegal" in r.remark
    assert "TopicConfig [topicName=TopicS, readQueueNums=" in r.remark  # Java's toString
    r = await send(c, "SCHEDULE_TOPIC_XXXX", b"x")
    assert r.code == RC.NO_PERMISSION
    r = await send(c, "bad topic!", b"x")
    assert r.code == RC.SYSTEM_ERROR
    r = await send(c, "TopicS", b"x" * 70000)
    assert r.code == RC.MESSAGE_ILLEGAL and "65536" in r.remark
    assert r.ext_fields["MSG_REGION"] == "DefaultRegion"
    r = await send(c, "TopicS", b"x", properties=props(BIG="v" * 33000))
    assert r.code == RC.MESSAGE_ILLEGAL
    # batch: consecutive offsets, comma-joined ids, element properties kept
    msgs = [Message("TopicS", f"b{i}".encode(), tags="TagB", keys=f"bk{i}") for i in range(5)]
    r = await send(c, "TopicS", encode_batch(msgs), 2, props(WAIT="true"),
                   code=R.SEND_BATCH_MESSAGE, batch=True)
    assert r.code == RC.SUCCESS, r.remark
    assert r.ext_fields["queueOffset"] == "0" and len(r.ext_fields["msgId"].split(",")) == 5
    p = await pull(c, "TopicS", 2, 0)
    got = decode_messages(p.body)
    assert [m.body for m in got] == [f"b{i}".encode() for i in range(5)]
    assert [m.queue_offset for m in got] == list(range(5))
    assert got[0].properties["TAGS"] == "TagB" and got[0].properties["CLUSTER"]
    # auto-create through TBW102
    r = await send(c, "TopicAuto", b"x", 3)
    assert r.code == RC.SUCCESS
    await c.wait_routable("TopicAuto")


@pytest.mark.timeout(90)
async def test_pull_filtering_codes_and_long_polling(cluster):
    c = cluster
    for i in range(6):
        r = await send(c, "TopicP", f"m{i}".encode(), 0, props(TAGS="TagA" if i % 2 else "TagB"))
        assert r.code == RC.SUCCESS
    p = await pull(c, "TopicP", 0, 0, sub="TagA || TagC")
    assert p.code == RC.SUCCESS and p.remark == "FOUND"
    assert [m.body for m in decode_messages(p.body)] == [b"m1", b"m3", b"m5"]
    assert p.ext_fields == {"suggestWhichBrokerId": "0", "nextBeginOffset": "6",
                            "minOffset": "0", "maxOffset": "6"}
    p = await pull(c, "TopicP", 0, 6)
    assert p.code == RC.PULL_NOT_FOUND and p.ext_fields["nextBeginOffset"] == "6"
    p = await pull(c, "TopicP", 0, 10)  # past the end; 4.9.8 corrects to min when min is 0
    assert p.code == RC.PULL_OFFSET_MOVED and p.ext_fields["nextBeginOffset"] == "0"
    p = await pull(c, "TopicP", 1, 3)  # empty queue, offset != 0
    assert p.code == RC.PULL_OFFSET_MOVED and p.ext_fields["nextBeginOffset"] == "0"
    p = await pull(c, "TopicP", 1, 0)
    assert p.code == RC.PULL_NOT_FOUND
    p = await pull(c, "TopicP", 0, 0, sub="TagZ")
    assert p.code == RC.PULL_RETRY_IMMEDIATELY and p.ext_fields["nextBeginOffset"] == "6"
    p = await pull(c, "NoSuchTopic", 0, 0)
    assert p.code == RC.TOPIC_NOT_EXIST
    p = await pull(c, "TopicP", 0, 0, sys_flag=0, sub=None)
    assert p.code == RC.SUBSCRIPTION_NOT_EXIST  # no heartbeat and no subscription
    p = await pull(c, "TopicP", 7, 0)
    assert p.code == RC.SYSTEM_ERROR and "queueId[7] is illegal" in p.remark

    # long polling: answered as soon as a matching message arrives
    held = asyncio.ensure_future(pull(c, "TopicP", 0, 6, sys_flag=6, sub="TagA",
                                      suspend_ms=5000, timeout_ms=10000))
    await asyncio.sleep(0.3)
    assert not held.done()
    r = await send(c, "TopicP", b"other", 0, props(TAGS="TagB"))  # not for this filter
    await asyncio.sleep(0.2)
    assert not held.done()
    sent_at = time.monotonic()
    r = await send(c, "TopicP", b"wake", 0, props(TAGS="TagA"))
    assert r.code == RC.SUCCESS
    p = await held
    latency = time.monotonic() - sent_at
    assert p.code == RC.SUCCESS and [m.body for m in decode_messages(p.body)] == [b"wake"]
    assert latency < 0.05, latency
    # nothing arrives: answered PULL_NOT_FOUND after the suspend timeout
    start = time.monotonic()
    p = await pull(c, "TopicP", 0, 8, sys_flag=6, suspend_ms=700, timeout_ms=5000)
    waited = time.monotonic() - start
    assert p.code == RC.PULL_NOT_FOUND and 0.65 <= waited < 1.5, waited


@pytest.mark.timeout(90)
async def test_groups_offsets_locks_and_queries(cluster):
    c = cluster
    hb = {"clientID": "127.0.0.1@A", "producerDataSet": [{"groupName": "pg"}],
          "consumerDataSet": [{"groupName": "cg", "consumeType": 1, "messageModel": "CLUSTERING",
                               "consumeFromWhere": 0, "subscriptionDataSet": [
                                   {"topic": "TopicQ", "subString": "*", "subVersion": "5"}]}]}
    r = await c.call(R.HEART_BEAT, body=orjson.dumps(hb))
    assert r.code == RC.SUCCESS and r.version == 409
    r = await c.call(R.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": "cg"})
    assert orjson.loads(r.body) == {"consumerIdList": ["127.0.0.1@A"]}
    r = await c.call(R.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": "nobody"})
    assert r.code == RC.SYSTEM_ERROR and r.remark == "no consumer for this group, nobody"
    # the %RETRY% topic exists now
    await c.wait_routable("%RETRY%cg")

    keys = ["order-1", "order-2"]
    ids = []
    for i, key in enumerate(keys):
        r = await send(c, "TopicQ", f"q{i}".encode(), 0, props(KEYS=f"{key} shared",
                                                               UNIQ_KEY=f"UNIQ{i}"))
        ids.append(r.ext_fields["msgId"])
    # heartbeat subscription used when the pull carries none
    p = await pull(c, "TopicQ", 0, 0, sys_flag=0, sub=None)
    assert p.code == RC.SUCCESS and len(decode_messages(p.body)) == 2
    p = await pull(c, "TopicQ", 0, 0, sys_flag=0, sub=None)
    r = await c.call(R.PULL_MESSAGE, pull_header("cg", "TopicQ", 0, 0, 32, 0, 0, 0, None, 99,
                                                  "TAG", "broker-a"))
    assert r.code == RC.SUBSCRIPTION_NOT_LATEST

    # offsets: young queue -> 0, then committed values (also through a pull)
    q = {"consumerGroup": "cg", "topic": "TopicQ", "queueId": "0"}
    r = await c.call(R.QUERY_CONSUMER_OFFSET, q)
    assert r.code == RC.SUCCESS and r.ext_fields["offset"] == "0"
    r = await c.call(R.UPDATE_CONSUMER_OFFSET, {**q, "commitOffset": "1"})
    assert r.code == RC.SUCCESS
    r = await c.call(R.QUERY_CONSUMER_OFFSET, q)
    assert r.ext_fields["offset"] == "1"
    await c.call(R.PULL_MESSAGE, pull_header("cg", "TopicQ", 0, 1, 32, 5, 2, 0, "*", 0, "TAG",
                                             "broker-a"))
    r = await c.call(R.QUERY_CONSUMER_OFFSET, q)
    assert r.ext_fields["offset"] == "2"

    # queries: by key, by unique key, by offset id
    now = int(time.time() * 1000)
    qh = {"topic": "TopicQ", "key": "shared", "maxNum": "32", "beginTimestamp": "0",
          "endTimestamp": str(now + 60000)}
    r = await c.call(R.QUERY_MESSAGE, qh)
    assert r.code == RC.SUCCESS
    assert sorted(m.body for m in decode_messages(r.body)) == [b"q0", b"q1"]
    r = await c.call(R.QUERY_MESSAGE, {**qh, "key": "UNIQ1", "maxNum": "1",
                                       "_UNIQUE_KEY_QUERY": "true"})
    assert [m.body for m in decode_messages(r.body)] == [b"q1"]
    r = await c.call(R.QUERY_MESSAGE, {**qh, "key": "absent"})
    assert r.code == RC.QUERY_NOT_FOUND and "indexLastUpdateTimestamp" in r.ext_fields
    _host, phy = decode_message_id(ids[0])
    r = await c.call(R.VIEW_MESSAGE_BY_ID, {"offset": str(phy)})
    assert decode_messages(r.body)[0].body == b"q0"
    r = await c.call(R.VIEW_MESSAGE_BY_ID, {"offset": str(10**12)})
    assert r.code == RC.SYSTEM_ERROR and "can not find message" in r.remark

    # orderly locks: contention, unlock, expiry (1.5 s in this broker's environment)
    def mqs(*qids):
        return [{"brokerName": "broker-a", "queueId": q, "topic": "TopicQ"} for q in qids]

    async def lock(client, *qids):
        body = orjson.dumps({"clientId": client, "consumerGroup": "cg", "mqSet": mqs(*qids)})
        r = await c.call(R.LOCK_BATCH_MQ, body=body)
        assert r.code == RC.SUCCESS
        return sorted(m["queueId"] for m in orjson.loads(r.body)["lockOKMQSet"])

    assert await lock("A", 0, 1) == [0, 1]
    assert await lock("B", 0, 2) == [2]
    assert await lock("A", 0, 1) == [0, 1]  # re-lock by the owner
    r = await c.call(R.UNLOCK_BATCH_MQ, body=orjson.dumps(
        {"clientId": "A", "consumerGroup": "cg", "mqSet": mqs(0)}))
    assert r.code == RC.SUCCESS
    assert await lock("B", 0, 1) == [0]
    # A's lock expires (RMQ_REBALANCE_LOCK_MAX_LIVE_TIME): B gets queue 1
    assert await wait_until(lambda: lock("B", 1), 10, 0.1, "A's lock expired") == [1]

    r = await c.call(R.UNREGISTER_CLIENT, {"clientID": "127.0.0.1@A", "consumerGroup": "cg",
                                           "producerGroup": "pg"})
    assert r.code == RC.SUCCESS
    r = await c.call(R.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": "cg"})
    assert r.code == RC.SYSTEM_ERROR


@pytest.mark.timeout(60)
async def test_unknown_topic_without_auto_create(tmp_path):
    c = Cluster(tmp_path, "autoCreateTopicEnable=false\n")
    try:
        c.start_broker()
        r = await send(c, "TopicNew", b"x")
        assert r.code == RC.TOPIC_NOT_EXIST
        assert r.remark.startswith("topic[TopicNew] not exist, apply first please!")
        assert "autoCreateTopicEnable" in r.remark
    finally:
        await c.close()


@pytest.mark.timeout(60)
async def test_slave_refuses_writes(tmp_path):
    c = Cluster(tmp_path, "brokerRole=SLAVE\nbrokerId=1\n")
    try:
        c.start_broker()
        r = await send(c, "BenchmarkTest", b"x")
        assert r.code == RC.SERVICE_NOT_AVAILABLE and "slave" in r.remark
        r = await c.call(R.END_TRANSACTION, {"producerGroup": "pg", "tranStateTableOffset": "0",
                                             "commitLogOffset": "0", "commitOrRollback": "8",
                                             "msgId": "x"})
        assert r.code == RC.SLAVE_NOT_AVAILABLE
    finally:
        await c.close()
