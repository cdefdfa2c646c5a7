"""Write the committed seed corpus (fuzz/corpus/<target>/) from rmq's own encoders.

Seeds are valid inputs of every shape a target reads (both header encodings,
IPv4 and IPv6 hosts, plain and compressed register bodies, ...), so the search
starts inside the formats instead of at their first length check.  Re-run it
when an encoder changes: ``.venv/bin/python -m fuzz.make_corpus``.
"""

from __future__ import annotations

import hashlib
import zlib
from pathlib import Path

import orjson

from rmq.client.codec import encode_batch
from rmq.client.heartbeat import (
    ConsumeFromWhere,
    ConsumerData,
    ConsumeType,
    HeartbeatData,
    MessageModel,
    build_subscription,
)
from rmq.client.message import Message
from rmq.common.codes import RequestCode
from rmq.common.topic_config import RegisterBrokerBody, TopicConfig, TopicConfigSerializeWrapper
from rmq.remoting import RemotingCommand, SerializeType
from rmq.store.message import MessageExt
from rmq.store.message_codec import encode_message

CORPUS = Path(__file__).resolve().parent / "corpus"

SEND_HEADER = {"producerGroup": "pg", "topic": "TopicTest", "defaultTopic": "TBW102",
               "defaultTopicQueueNums": "4", "queueId": "1", "sysFlag": "0",
               "bornTimestamp": "1700000000000", "flag": "0",
               "properties": "KEYS\x01k1\x02TAGS\x01TagA\x02WAIT\x01true\x02", "reconsumeTimes": "0",
               "unitMode": "false", "batch": "false", "maxReconsumeTimes": "16"}
SEND_HEADER_V2 = {k: SEND_HEADER[v] for k, v in zip("abcdefghijklm", SEND_HEADER, strict=True)}


def _commands() -> list[RemotingCommand]:
    return [
        RemotingCommand.create_request(RequestCode.SEND_MESSAGE_V2, SEND_HEADER_V2, b"x" * 64),
        RemotingCommand.create_request(RequestCode.SEND_MESSAGE, SEND_HEADER, b"hello"),
        RemotingCommand.create_request(RequestCode.PULL_MESSAGE, {
            "consumerGroup": "cg", "topic": "TopicTest", "queueId": "0", "queueOffset": "5",
            "maxMsgNums": "32", "sysFlag": "2", "commitOffset": "0", "suspendTimeoutMillis": "15000",
            "subscription": "*", "subVersion": "0", "expressionType": "TAG"}),
        RemotingCommand.create_request(RequestCode.HEART_BEAT, None, _heartbeats()[0]),
        RemotingCommand.create_response(1, "a remark with unicode \u00e9\u4e2d", {"k": "v"}),
        RemotingCommand.create_request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "T"}),
    ]


def _frames() -> list[bytes]:
    out = []
    for stype in (SerializeType.JSON, SerializeType.ROCKETMQ):
        encoded = []
        for cmd in _commands():
            cmd.serialize_type = stype
            encoded.append(cmd.encode())
        out.extend(encoded)
        out.append(b"".join(encoded))
    return out


def _send_frames() -> list[bytes]:
    """Send requests as the send lane reads them: V2 and V1 spellings, and the
    C++ client's V1 header (numbers unquoted, remark "", a trailing newline)."""
    out = [cmd.encode() for cmd in _commands()[:2]]
    cpp = {**SEND_HEADER, "queueId": 1, "sysFlag": 0, "flag": 0, "AccessKey": "",
           "OnsChannel": "ALIYUN"}
    head = orjson.dumps({"code": 10, "extFields": cpp, "flag": 0, "language": "CPP",
                         "opaque": 0, "remark": "", "version": 63}) + b"\n"
    out.append(len(head).to_bytes(4, "big") + head + b"body")
    out[-1] = (len(out[-1])).to_bytes(4, "big") + out[-1]
    for cmd in _commands()[:2]:  # the same with the ROCKETMQ binary header
        cmd.serialize_type = 1
        out.append(cmd.encode())
    out.append(b"".join(out))
    return out


def _pull_frames() -> list[bytes]:
    """Pull requests as the pull lane reads them, JSON and ROCKETMQ headers."""
    ext = {"consumerGroup": "cg", "topic": "TopicTest", "queueId": "1", "queueOffset": "32",
           "maxMsgNums": "32", "sysFlag": "6", "commitOffset": "0",
           "suspendTimeoutMillis": "15000", "subscription": "TagA || TagB", "subVersion": "0",
           "expressionType": "TAG"}
    out = [RemotingCommand(11, 0, 409, 7, 0, None, ext, None, stype).encode() for stype in (0, 1)]
    out.append(b"".join(out))
    wide = {**ext, "subscription": "TagA || 标签 || \U0001F600"}  # tags past ASCII
    out += [RemotingCommand(11, 0, 409, 8, 0, None, wide, None, stype).encode()
            for stype in (0, 1)]
    return out


def _pop_frames() -> list[bytes]:
    """POP_MESSAGE, ACK_MESSAGE and BATCH_ACK_MESSAGE runs as the pop lane walks them."""
    pop = {"consumerGroup": "cg", "topic": "TopicTest", "queueId": "-1", "maxMsgNums": "32",
           "invisibleTime": "60000", "pollTime": "0", "bornTime": "0", "initMode": "0",
           "expType": "TAG", "exp": "*", "order": "false", "bname": "broker-a"}
    ack = {"consumerGroup": "cg", "topic": "TopicTest", "queueId": "1", "offset": "40",
           "extraInfo": "32 1700000000000 60000 3 0 broker-a 1 40"}
    batch = b'{"acks":[{"c":"cg","t":"TopicTest","r":"0","so":32,"q":1,"rq":3,' \
            b'"pt":1700000000000,"it":60000,"b":"/w=="}],"brokerName":"broker-a"}'
    out = [RemotingCommand(200050, 0, 409, 7, 0, None, pop, None, 0).encode(),
           RemotingCommand(200051, 0, 409, 8, 0, None, ack, None, 0).encode(),
           RemotingCommand(200151, 0, 409, 9, 0, None, None, batch, 0).encode()]
    out.append(b"".join(out))
    declined = {**pop, "consumerGroup": "decline"}
    out.append(out[0] + RemotingCommand(200050, 0, 409, 10, 0, None, declined, None, 0).encode()
               + out[2])
    return out


def _headers(stype: int) -> list[bytes]:
    out = []
    for cmd in _commands():
        cmd.serialize_type = stype
        frame = cmd.encode()[4:]
        hlen = int.from_bytes(frame[:4], "big") & 0xFFFFFF
        out.append(frame[4:4 + hlen])
    return out


def _stored() -> list[bytes]:
    v4 = ("127.0.0.1", 10911)
    v6 = ("::1", 10911)
    msgs = [
        MessageExt(topic="TopicTest", body=b"body" * 8, properties={"TAGS": "TagA", "KEYS": "k1 k2",
                   "UNIQ_KEY": "7F0000010001"}, queue_id=1, queue_offset=2, born_host=v4,
                   store_host=v4, born_timestamp=1700000000000, store_timestamp=1700000000001),
        MessageExt(topic="%RETRY%cg", body=b"", properties={"DELAY": "3"}, sys_flag=0x30,
                   born_host=v6, store_host=v6),
        MessageExt(topic="T", body=bytes(range(256)), properties={}),
    ]
    records = [encode_message(m) for m in msgs]
    blank = (64).to_bytes(4, "big") + (0xBBCCDDEE).to_bytes(4, "big") + bytes(56)
    return records + [b"".join(records), records[0][:-3] + b"\xff\xff\xff", blank]


def _batches() -> list[bytes]:
    msgs = [Message("TopicTest", b"m%d" % i, tags="TagA", keys=f"k{i}") for i in range(3)]
    wire = encode_batch(msgs)
    single = encode_batch([Message("TopicTest", b"", flag=7)])
    return [b"\x00" + wire, b"\x01" + wire, b"\x00" + single]


def _heartbeats() -> list[bytes]:
    consumer = ConsumerData("cg", ConsumeType.CONSUME_PASSIVELY, MessageModel.CLUSTERING,
                            ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET,
                            [build_subscription("TopicTest", "TagA || TagB"),
                             build_subscription("%RETRY%cg", "*")])
    plain = HeartbeatData("127.0.0.1@1234", ["pg"], [consumer]).encode()
    # the C++ client's dialect: fastjson accepts unquoted keys and single quotes
    lenient = (b"{clientID:'127.0.0.1@1',producerDataSet:[{groupName:'pg'}],"
               b"consumerDataSet:[]}")
    return [plain, lenient, HeartbeatData("c@1").encode()]


def _register_bodies() -> list[bytes]:
    wrapper = TopicConfigSerializeWrapper({
        "TopicTest": TopicConfig("TopicTest", 8, 8, 6, "SINGLE_TAG", 0, False),
        "Ordered": TopicConfig("Ordered", 4, 4, 2, "MULTI_TAG", 1, True)})
    body = RegisterBrokerBody(wrapper, ["127.0.0.1:7777"])
    inflated = zlib.decompress(body.encode(compress=True))
    return [b"\x00" + body.encode(), b"\x01" + inflated]


SQL = ["a > 0", "b = 'abc' AND c BETWEEN 1.0 AND 3", "TAGS IN ('TagA', 'TagB') OR a IS NULL",
       "NOT (a <> 1) AND b <> 'x'", "d = TRUE", "a > -2.5E3",
       "b NOT IN ('x') AND n IS NOT NULL", "a >= 10 OR c < 1.5E-2 OR a NOT BETWEEN -1 AND 1"]

PROPERTIES = [
    "brokerClusterName = DefaultCluster\nbrokerName=broker-a\nbrokerId: 0\n"
    "deleteWhen=04\nfileReservedTime=48\nbrokerRole=ASYNC_MASTER\nflushDiskType=ASYNC_FLUSH\n",
    "# comment\n! another\nkey\\ with\\ spaces = value \\\n    continued\n"
    "unicode=\\u00e9t\\u00E9\ntab\\tkey=\\n\\r\\f\nempty=\n  leading = spaces\n",
]

PLAIN_ACL = [
    "globalWhiteRemoteAddresses:\n  - 10.10.103.*\n  - 192.168.0.{1,2}\naccounts:\n"
    "  - accessKey: RocketMQ\n    secretKey: 12345678\n    whiteRemoteAddress: 192.168.1.1-100\n"
    "    admin: false\n    defaultTopicPerm: DENY\n    defaultGroupPerm: SUB\n"
    "    topicPerms:\n      - topicA=DENY\n      - topicB=PUB|SUB\n    groupPerms:\n"
    "      - groupA=DENY\n  - accessKey: rocketmq2\n    secretKey: 12345678\n    admin: true\n"
    "dataVersion:\n  - counter: 1\n    timestamp: 1700000000000\n",
    "accounts:\n  - accessKey: ipv6account\n    secretKey: secret-key\n"
    "    whiteRemoteAddress: '1050:0000:0000:0000:0005:0600:300c:*'\n",
]


def seeds() -> dict[str, list[bytes]]:
    return {
        "frames": _frames(),
        "header_json": _headers(SerializeType.JSON),
        "header_rocketmq": _headers(SerializeType.ROCKETMQ),
        "stored_message": [b"\x00" + r for r in _stored()] + [b"\x01" + r for r in _stored()[:1]],
        "batch": _batches(),
        "heartbeat": _heartbeats(),
        "register_broker": _register_bodies(),
        "sql92": [s.encode() for s in SQL],
        "properties": [p.encode() for p in PROPERTIES],
        "plain_acl": [p.encode() for p in PLAIN_ACL],
        "send_head": _send_frames(),
        "pull_head": _pull_frames(),
        "pop_frames": _pop_frames(),
    }


def main() -> int:
    for target, items in seeds().items():
        d = CORPUS / target
        d.mkdir(parents=True, exist_ok=True)
        for data in items:
            (d / f"seed-{hashlib.sha1(data).hexdigest()[:16]}").write_bytes(data)
        print(f"{target}: {len(items)} seeds")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
