"""Bad headers and bodies against a real broker: every request code with junk
fields; the broker's own request headers with one or two fields made wrong
(missing, not a number, outside Java's range, odd topics and groups); and
sends, batches, pulls and heartbeats whose properties, batch records, filter
expressions and heartbeat JSON are odd or broken.

Each request must get an answer (4.9.8 answers them too, mostly with
SYSTEM_ERROR and a remark), no answer may be an unexpected Python error
leaking out of a processor, and afterwards the broker still stores and serves
messages, the one sent before the storm included."""

from __future__ import annotations

import json
import random
import struct

import pytest

from rmq.common.codes import RequestCode, ResponseCode
from rmq.common.protocol import headers_admin as A
from rmq.common.protocol import headers_broker as B
from rmq.remoting import RemotingCommand
from rmq.testing.cluster import Cluster
from rmq.testing.fuzz import (
    NUMBERS,
    ODD,
    field_names,
    junk_requests,
    mutated_requests,
    storm,
)

R = RequestCode
TOPIC = "FuzzTopic"
KEEP = "KeepTopic"  # never named by the junk: its messages must all survive

# 4.9.8 sends no answer for these: GET_BROKER_CLUSTER_ACL_INFO on a broker
# without ACL, and END_TRANSACTION with a commitOrRollback it does not know
NO_ANSWER = {R.GET_BROKER_CLUSTER_ACL_INFO, R.END_TRANSACTION}

HEADERS = {
    R.SEND_MESSAGE_V2: B.SendMessageRequestHeaderV2,
    R.SEND_BATCH_MESSAGE: B.SendMessageRequestHeaderV2,
    R.SEND_REPLY_MESSAGE_V2: B.SendMessageRequestHeaderV2,
    R.PULL_MESSAGE: B.PullMessageRequestHeader,
    R.UNREGISTER_CLIENT: B.UnregisterClientRequestHeader,
    R.GET_CONSUMER_LIST_BY_GROUP: B.GetConsumerListByGroupRequestHeader,
    R.QUERY_CONSUMER_OFFSET: B.QueryConsumerOffsetRequestHeader,
    R.UPDATE_CONSUMER_OFFSET: B.UpdateConsumerOffsetRequestHeader,
    R.GET_MAX_OFFSET: B.QueueOffsetRequestHeader,
    R.GET_MIN_OFFSET: B.QueueOffsetRequestHeader,
    R.GET_EARLIEST_MSG_STORETIME: B.QueueOffsetRequestHeader,
    R.SEARCH_OFFSET_BY_TIMESTAMP: B.SearchOffsetRequestHeader,
    R.CONSUMER_SEND_MSG_BACK: B.ConsumerSendMsgBackRequestHeader,
    R.QUERY_MESSAGE: B.QueryMessageRequestHeader,
    R.VIEW_MESSAGE_BY_ID: B.ViewMessageRequestHeader,
    R.UPDATE_AND_CREATE_TOPIC: A.CreateTopicRequestHeader,
    R.DELETE_TOPIC_IN_BROKER: A.DeleteTopicRequestHeader,
    R.GET_TOPIC_STATS_INFO: A.GetTopicStatsInfoRequestHeader,
    R.GET_CONSUMER_CONNECTION_LIST: A.GetConsumerConnectionListRequestHeader,
    R.GET_PRODUCER_CONNECTION_LIST: A.GetProducerConnectionListRequestHeader,
    R.GET_CONSUME_STATS: A.GetConsumeStatsRequestHeader,
    R.QUERY_TOPIC_CONSUME_BY_WHO: A.QueryTopicConsumeByWhoRequestHeader,
    R.QUERY_CONSUME_TIME_SPAN: A.QueryConsumeTimeSpanRequestHeader,
    R.QUERY_CORRECTION_OFFSET: A.QueryCorrectionOffsetHeader,
    R.CLONE_GROUP_OFFSET: A.CloneGroupOffsetRequestHeader,
    R.VIEW_BROKER_STATS_DATA: A.ViewBrokerStatsDataRequestHeader,
    R.GET_BROKER_CONSUME_STATS: A.GetConsumeStatsInBrokerHeader,
    R.QUERY_CONSUME_QUEUE: A.QueryConsumeQueueRequestHeader,
    R.RESUME_CHECK_HALF_MESSAGE: A.ResumeCheckHalfMessageRequestHeader,
    R.INVOKE_BROKER_TO_RESET_OFFSET: A.ResetOffsetRequestHeader,
    R.INVOKE_BROKER_TO_GET_CONSUMER_STATUS: A.GetConsumerStatusRequestHeader,
    R.DELETE_SUBSCRIPTIONGROUP: A.DeleteSubscriptionGroupRequestHeader,
}
NAMES = [TOPIC, "g", "%RETRY%g", "%DLQ%g", "TBW102", "SCHEDULE_TOPIC_XXXX",
         "RMQ_SYS_TRANS_HALF_TOPIC", "broker-a", "DefaultCluster", "", "a" * 300, "t/x", "\u4e2d"]
JUNK = NAMES + NUMBERS + ODD


PROPERTIES = [
    "TAGS\x01a\x02", "UNIQ_KEY\x01\x02", "DELAY\x01-1\x02", "DELAY\x0199999999999\x02",
    "DELAY\x01x\x02", "TRAN_MSG\x01true\x02", "TRAN_MSG\x01true\x02PGROUP\x01\x02",
    "KEYS\x01" + "a " * 200 + "\x02", "\x01\x01\x02\x02", "WAIT\x01\x02", "MAX_OFFSET\x01x\x02",
    "REAL_TOPIC\x01\x02REAL_QID\x01x\x02", "RETRY_TOPIC\x01%RETRY%g\x02",
    "CLUSTER\x01other\x02MSG_TYPE\x01reply\x02REPLY_TO_CLIENT\x01c\x02",
    "\u4e2d\x01\u6587\x02", "a" * 40000, "TAGS\x01" + "t" * 300 + "\x02"]
EXPRESSIONS = ["a > 1", "a between 1 and", "TAGS in ('a')", "((((", "a = 'x' and b is not null",
               "1 = 1", "a > 99999999999999999999999", "a LIKE '%'", "", "NOT", "a in ()",
               "a = 1.5e400", "*", "a || b", "||"]


def _batch_body(rnd: random.Random) -> bytes:
    """SEND_BATCH_MESSAGE records with wrong sizes, magic codes, property
    lengths and truncations among the well-formed ones."""
    out = b""
    for _ in range(rnd.randrange(0, 4)):
        body = rnd.randbytes(rnd.randrange(0, 40))
        props = rnd.choice([b"", b"TAGS\x01a\x02", b"\x01\x02", b"KEYS\x01" + b"k" * 300,
                            b"\xff\xfe", b"WAIT\x01true"])
        size = 20 + len(body) + 2 + len(props)
        size = rnd.choice([size, size, 0, -1, 2**31 - 1, size + 7, 3])
        rec = struct.pack(">iiiii", size, rnd.choice([0, -626843481]), rnd.randrange(2**31),
                          rnd.choice([0, 1, -1]), len(body)) + body + \
            struct.pack(">h", rnd.choice([len(props), -1, 32767])) + props
        if rnd.random() < 0.2:
            rec = rec[:rnd.randrange(len(rec) + 1)]
        out += rec
    return out


def _heartbeat(rnd: random.Random) -> bytes:
    sub = {"topic": rnd.choice([TOPIC, None, 5]), "subString": rnd.choice(EXPRESSIONS),
           "expressionType": rnd.choice(["SQL92", "TAG"]), "tagsSet": rnd.choice([[], ["a"], [1]]),
           "codeSet": [], "subVersion": 1}
    consumer = {"groupName": rnd.choice(["g", None, 7]), "consumeType": "CONSUME_PASSIVELY",
                "messageModel": "CLUSTERING", "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET",
                "subscriptionDataSet": rnd.choice([[sub], "x"]), "unitMode": False}
    return json.dumps({
        "clientID": rnd.choice(["c1", 5, None, ""]),
        "producerDataSet": rnd.choice([[{"groupName": "p"}], [{}], "x", [None]]),
        "consumerDataSet": rnd.choice([[consumer], [{"groupName": "g", "consumeType": 7}], []]),
    }).encode()


def body_requests(rnd: random.Random, rounds: int) -> list[RemotingCommand]:
    """Sends, batches, pulls and heartbeats with odd bodies and expressions."""
    send = {"a": "g", "b": TOPIC, "c": "TBW102", "d": "4", "e": "0", "f": "0",
            "g": "1700000000000", "h": "0", "j": "0", "k": "false", "m": "false"}
    out = []
    for _ in range(rounds):
        ext = dict(send, i=rnd.choice(PROPERTIES), f=rnd.choice(["0", "4", "8", "12", "1", "64"]))
        out.append(RemotingCommand.create_request(R.SEND_MESSAGE_V2, ext,
                                                  rnd.choice([b"x", b"", bytes(5000)])))
        ext = dict(send, i=rnd.choice(PROPERTIES), m="true")
        out.append(RemotingCommand.create_request(R.SEND_BATCH_MESSAGE, ext, _batch_body(rnd)))
        out.append(RemotingCommand.create_request(R.PULL_MESSAGE, {
            "consumerGroup": "g", "topic": TOPIC, "queueId": str(rnd.randrange(-1, 5)),
            "queueOffset": rnd.choice(["0", "-5", "999999999"]),
            "maxMsgNums": rnd.choice(["0", "-1", "32", "100000"]),
            "sysFlag": rnd.choice(["0", "4", "5", "8", "15"]), "commitOffset": "0",
            "suspendTimeoutMillis": "0", "subscription": rnd.choice(EXPRESSIONS),
            "subVersion": rnd.choice(["0", "-1"]),
            "expressionType": rnd.choice(["SQL92", "TAG", "sql92", "x"])}))
        out.append(RemotingCommand.create_request(R.HEART_BEAT, None, _heartbeat(rnd)))
    return out


async def send_plain(c: Cluster, body: bytes) -> RemotingCommand:
    ext = {"a": "fuzz", "b": KEEP, "c": "TBW102", "d": "4", "e": "0", "f": "0",
           "g": "1700000000000", "h": "0", "i": "WAIT\x01true\x02", "j": "0", "k": "false",
           "m": "false"}
    return await c.call(R.SEND_MESSAGE_V2, ext, body)


async def pull_all(c: Cluster) -> RemotingCommand:
    return await c.call(R.PULL_MESSAGE, {
        "consumerGroup": "keepGroup", "topic": KEEP, "queueId": "0", "queueOffset": "0",
        "maxMsgNums": "32", "sysFlag": "4", "commitOffset": "0", "suspendTimeoutMillis": "0",
        "subscription": "*", "subVersion": "0", "expressionType": "TAG"})


@pytest.fixture
async def cluster(tmp_path):
    c = Cluster(tmp_path, "autoCreateTopicEnable=true\n")
    c.start_broker()
    await c.wait_registered()
    yield c
    await c.close()


@pytest.mark.timeout(240)
async def test_bad_requests_get_answers_and_lose_nothing(cluster):
    c = cluster
    r = await c.call(R.UPDATE_AND_CREATE_TOPIC, {
        "topic": KEEP, "defaultTopic": "TBW102", "readQueueNums": "4", "writeQueueNums": "4",
        "perm": "6", "topicFilterType": "SINGLE_TAG"})
    assert r.code == ResponseCode.SUCCESS, r.remark
    before = await send_plain(c, b"sent before the storm")
    assert before.code == ResponseCode.SUCCESS, before.remark

    rnd = random.Random(20261121)
    codes = [int(code) for code in RequestCode if code not in NO_ANSWER]
    requests = junk_requests(rnd, 4, codes, field_names(A, B), JUNK) + \
        mutated_requests(rnd, 25, HEADERS, NAMES[:4], JUNK) + body_requests(rnd, 150)
    rnd.shuffle(requests)
    leaked, codes = await storm(c.client, c.addr, requests)
    assert not leaked, leaked[:5]
    assert ResponseCode.SYSTEM_ERROR in codes and ResponseCode.SUCCESS in codes

    assert c.broker.proc.poll() is None, "the broker died"
    after = await send_plain(c, b"sent after the storm")
    assert after.code == ResponseCode.SUCCESS, after.remark
    pulled = await pull_all(c)
    assert pulled.code == ResponseCode.SUCCESS, pulled.remark
    body = bytes(pulled.body)
    assert b"sent before the storm" in body and b"sent after the storm" in body
