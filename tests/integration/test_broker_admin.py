"""The consumer-facing admin codes of 4.9.8 on a real broker, with the rmq client
as producer and push consumer: calls forwarded to the consumer (running info,
consume directly, consumer status, reset offset), offset and statistics queries,
producer info, half-message resume, the ACL codes of a broker without ACL, and
the reply push to a requester connected on the fast port."""

from __future__ import annotations

import pytest

from rmq.client import (
    ClientConfig,
    ConsumeFromWhere,
    ConsumeStatus,
    Message,
    Producer,
    PushConsumer,
)
from rmq.client.heartbeat import (
    ConsumerData,
    ConsumeType,
    HeartbeatData,
    MessageModel,
)
from rmq.common import fastjson
from rmq.common.codes import RequestCode, ResponseCode
from rmq.remoting import RemotingClient, RemotingCommand
from rmq.remoting.exceptions import RemotingTimeoutError
from rmq.testing.cluster import Cluster
from rmq.testing.wait import wait_until

R = RequestCode
RC = ResponseCode
TOPIC = "TopicAdm"


def body(resp: RemotingCommand):
    assert resp.code == RC.SUCCESS, (resp.code, resp.remark)
    return fastjson.loads(bytes(resp.body))


def client_config(c: Cluster, name: str) -> ClientConfig:
    return ClientConfig(namesrv_addr=f"127.0.0.1:{c.ns_port}", client_ip="127.0.0.1",
                        instance_name=name, persist_consumer_offset_interval=300)


async def committed(c: Cluster, group: str) -> int:
    stats = body(await c.call(R.GET_CONSUME_STATS, {"consumerGroup": group, "topic": TOPIC}))
    return sum(v["consumerOffset"] for v in stats["offsetTable"].values())


@pytest.mark.timeout(120)
async def test_consumer_admin_codes(cluster):
    c = cluster
    create = {"topic": TOPIC, "defaultTopic": "TBW102", "readQueueNums": "4",
              "writeQueueNums": "4", "perm": "6", "topicFilterType": "SINGLE_TAG"}
    assert (await c.call(R.UPDATE_AND_CREATE_TOPIC, create)).code == 0
    seen: list[bytes] = []

    def listener(msgs, ctx):
        seen.extend(m.body for m in msgs)
        return ConsumeStatus.CONSUME_SUCCESS

    consumer = PushConsumer("cgA", listener=listener, client_config=client_config(c, "cons"))
    consumer.config.consume_from_where = ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
    consumer.subscribe(TOPIC, "*")
    producer = Producer("pgA", client_config=client_config(c, "prod"))
    await producer.start()
    try:
        results = [await producer.send(Message(TOPIC, f"m{i}".encode(), tags="T"))
                   for i in range(10)]
        await consumer.start()
        client_id = consumer.instance.client_id

        async def all_committed() -> bool:
            return len(seen) >= 10 and await committed(c, "cgA") == 10
        await wait_until(all_committed, 20)

        # GET_ALL_PRODUCER_INFO: the live producer
        info = body(await c.call(R.GET_ALL_PRODUCER_INFO))["data"]
        assert [p["clientId"] for p in info["pgA"]] == [producer.instance.client_id]
        assert info["pgA"][0]["language"] == "PYTHON" and info["pgA"][0]["version"] == 409

        # 307 forwarded to the consumer, 1 for an unknown client
        running = body(await c.call(R.GET_CONSUMER_RUNNING_INFO,
                                    {"consumerGroup": "cgA", "clientId": client_id,
                                     "jstackEnable": "false"}))
        assert running["properties"]["PROP_CONSUME_TYPE"] == "CONSUME_PASSIVELY"
        missing = await c.call(R.GET_CONSUMER_RUNNING_INFO,
                               {"consumerGroup": "cgA", "clientId": "nobody"})
        assert missing.code == RC.SYSTEM_ERROR
        assert missing.remark == "The Consumer <cgA> <nobody> not online"

        # 309: the broker loads the message at the offset id and forwards it
        direct = body(await c.call(R.CONSUME_MESSAGE_DIRECTLY,
                                   {"consumerGroup": "cgA", "clientId": client_id,
                                    "msgId": results[3].offset_msg_id}))
        assert direct["consumeResult"] == "CR_SUCCESS"
        assert seen.count(b"m3") == 2

        # 223: the consumer's offsets per queue
        status = body(await c.call(R.INVOKE_BROKER_TO_GET_CONSUMER_STATUS,
                                   {"topic": TOPIC, "group": "cgA"}))
        assert list(status["consumerTable"]) == [client_id]
        assert sum(status["consumerTable"][client_id].values()) == 10
        assert (await c.call(R.INVOKE_BROKER_TO_GET_CONSUMER_STATUS,
                             {"topic": TOPIC, "group": "nogroup"})).code == RC.SYSTEM_ERROR

        # offsets and statistics
        spans = body(await c.call(R.QUERY_CONSUME_TIME_SPAN, {"topic": TOPIC, "group": "cgA"}))
        assert len(spans["consumeTimeSpanSet"]) == 4
        assert all(s["delayTime"] == 0 for s in spans["consumeTimeSpanSet"])
        assert (await c.call(R.QUERY_CONSUME_TIME_SPAN,
                             {"topic": "Nope", "group": "cgA"})).code == RC.TOPIC_NOT_EXIST
        by_who = body(await c.call(R.QUERY_TOPIC_CONSUME_BY_WHO, {"topic": TOPIC}))
        assert "cgA" in by_who["groupList"]
        stats = body(await c.call(R.VIEW_BROKER_STATS_DATA,
                                  {"statsName": "TOPIC_PUT_NUMS", "statsKey": TOPIC}))
        assert stats["statsMinute"]["sum"] == 10 and stats["statsDay"]["sum"] == 10
        unknown = await c.call(R.VIEW_BROKER_STATS_DATA,
                               {"statsName": "TOPIC_PUT_NUMS", "statsKey": "Nope"})
        assert unknown.code == 1 and unknown.remark == "The stats <TOPIC_PUT_NUMS> <Nope> not exist"
        consume = body(await c.call(R.GET_BROKER_CONSUME_STATS, {"isOrder": "false"}))
        assert consume["brokerAddr"] == c.addr and consume["totalDiff"] == 0
        groups = {g: v for entry in consume["consumeStatsList"] for g, v in entry.items()}
        assert len(groups["cgA"]) == 1 and len(groups["cgA"][0]["offsetTable"]) == 4
        cq = body(await c.call(R.QUERY_CONSUME_QUEUE,
                               {"topic": TOPIC, "queueId": "0", "index": "0", "count": "2",
                                "consumerGroup": "cgA"}))
        assert cq["maxQueueIndex"] >= 1 and 1 <= len(cq["queueData"]) <= 2
        assert cq["subscriptionData"]["topic"] == TOPIC
        assert (await c.call(R.QUERY_CONSUME_QUEUE,
                             {"topic": "Nope", "queueId": "0", "index": "0",
                              "count": "1"})).remark == "0@Nope is not exist!"

        # clone the offsets to an offline group, correction offsets
        assert (await c.call(R.CLONE_GROUP_OFFSET,
                             {"srcGroup": "cgA", "destGroup": "cgB", "topic": TOPIC,
                              "offline": "true"})).code == 0
        assert await committed(c, "cgB") == 10
        correction = body(await c.call(R.QUERY_CORRECTION_OFFSET,
                                       {"compareGroup": "cgA", "topic": TOPIC}))
        assert sum(correction["correctionOffsets"].values()) == 10

        # 222: reset to the beginning: pushed to the consumer, set in the broker
        not_online = await c.call(R.INVOKE_BROKER_TO_RESET_OFFSET,
                                  {"topic": TOPIC, "group": "cgB", "timestamp": "0",
                                   "isForce": "true"})
        assert not_online.code == RC.CONSUMER_NOT_ONLINE
        no_offsets = await c.call(R.INVOKE_BROKER_TO_RESET_OFFSET,
                                  {"topic": TOPIC, "group": "cgZ", "timestamp": "0",
                                   "isForce": "true"})
        assert no_offsets.code == 1 and no_offsets.remark == "THe consumer group <cgZ> not exist"
        before = len(seen)
        reset = body(await c.call(R.INVOKE_BROKER_TO_RESET_OFFSET,
                                  {"topic": TOPIC, "group": "cgA", "timestamp": "0",
                                   "isForce": "true"}))
        assert sorted(reset["offsetTable"].values()) == [0, 0, 0, 0]

        async def consumed_again() -> bool:
            return len(seen) >= before + 10
        await wait_until(consumed_again, 20)
        assert sorted(seen[before:]) == sorted(f"m{i}".encode() for i in range(10))
    finally:
        await consumer.shutdown()
        await producer.shutdown()

    # RESUME_CHECK_HALF_MESSAGE puts the message back into the half topic
    half = {"topic": "RMQ_SYS_TRANS_HALF_TOPIC", "queueId": "0"}
    before_half = int((await c.call(R.GET_MAX_OFFSET, half)).ext_fields["offset"])
    assert (await c.call(R.RESUME_CHECK_HALF_MESSAGE,
                         {"msgId": results[0].offset_msg_id})).code == 0
    assert int((await c.call(R.GET_MAX_OFFSET, half)).ext_fields["offset"]) == before_half + 1
    assert (await c.call(R.RESUME_CHECK_HALF_MESSAGE, {"msgId": "zz"})).code == 1


@pytest.mark.timeout(60)
async def test_acl_codes_without_acl_and_old_client_version(cluster):
    c = cluster
    r = await c.call(R.UPDATE_AND_CREATE_ACL_CONFIG, {"accessKey": "ak", "secretKey": "12345678"})
    assert r.code == RC.UPDATE_AND_CREATE_ACL_CONFIG_FAILED and r.remark is None
    assert (await c.call(R.UPDATE_AND_CREATE_ACL_CONFIG, {})).code == RC.SYSTEM_ERROR
    assert (await c.call(R.DELETE_ACL_CONFIG, {"accessKey": "ak"})).code == \
        RC.DELETE_ACL_CONFIG_FAILED
    assert (await c.call(R.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG,
                         {"globalWhiteAddrs": "10.*", "aclFileFullPath": "x"})).code == \
        RC.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED
    with pytest.raises(RemotingTimeoutError):  # 4.9.8 without ACL never answers
        await c.client.invoke(c.addr, RemotingCommand.create_request(
            R.GET_BROKER_CLUSTER_ACL_INFO), 1000)

    # a consumer whose heartbeat says version 50 (< V3_1_8_SNAPSHOT)
    old = RemotingClient()
    try:
        hb = HeartbeatData("127.0.0.1@old", [], [ConsumerData(
            "cgOld", ConsumeType.CONSUME_PASSIVELY, MessageModel.CLUSTERING,
            ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET)])
        request = RemotingCommand.create_request(R.HEART_BEAT, None, hb.encode())
        request.version = 50
        assert (await old.invoke(c.addr, request, 3000)).code == 0
        r = await c.call(R.GET_CONSUMER_RUNNING_INFO,
                         {"consumerGroup": "cgOld", "clientId": "127.0.0.1@old"})
        assert r.code == 1 and "too low to finish" in r.remark
    finally:
        await old.close()


class ReplyReceiver:
    """A requester: answers PUSH_REPLY_MESSAGE_TO_CLIENT and keeps the bodies."""

    def __init__(self) -> None:
        self.bodies: list[bytes] = []

    def process_request(self, channel, request):
        self.bodies.append(bytes(request.body))
        return RemotingCommand.create_response(RC.SUCCESS)


@pytest.mark.timeout(60)
async def test_reply_pushed_to_requester_on_fast_port(cluster):
    c = cluster
    receiver = ReplyReceiver()
    requester = RemotingClient()
    requester.register_processor(R.PUSH_REPLY_MESSAGE_TO_CLIENT, receiver)
    fast = f"127.0.0.1:{c.port - 2}"
    try:
        hb = HeartbeatData("127.0.0.1@requester", ["pgReq"], [])
        assert (await requester.invoke(
            fast, RemotingCommand.create_request(R.HEART_BEAT, None, hb.encode()), 3000)).code == 0
        reply_to = "REPLY_TO_CLIENT\x01127.0.0.1@requester\x02CORRELATION_ID\x01c1\x02"
        ext = {"a": "pgReply", "b": "TopicReply", "c": "TBW102", "d": "4", "e": "0", "f": "0",
               "g": "0", "h": "0", "i": reply_to, "j": "0", "k": "false", "m": "false"}
        r = await c.call(R.SEND_REPLY_MESSAGE_V2, ext, b"the reply")
        assert r.code == RC.SUCCESS, r.remark
        assert receiver.bodies == [b"the reply"]
    finally:
        await requester.close()
