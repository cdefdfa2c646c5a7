"""Pure parts of rmq.client: headers, heartbeat JSON, batch and pull-body codecs,
UNIQ_KEY use, allocation, selectors, latency faults, offset stores, process queues."""

from __future__ import annotations

import struct
import time
import zlib

import orjson
import pytest

from rmq.client import headers as h
from rmq.client.allocate import AllocateMessageQueueAveragely, AllocateMessageQueueAveragelyByCircle
from rmq.client.codec import MessageDecodeError, decode_messages, encode_batch, properties_string
from rmq.client.consumer_base import allocate_decision
from rmq.client.exceptions import MQBrokerError
from rmq.client.heartbeat import (
    ConsumeFromWhere,
    ConsumerData,
    ConsumeType,
    HeartbeatData,
    MessageModel,
    build_subscription,
)
from rmq.client.instance import publish_queues, subscribe_queues
from rmq.client.latency import MQFaultStrategy, not_available_duration
from rmq.client.message import Message, MessageQueue
from rmq.client.offset_store import LocalFileOffsetStore, ReadOffsetType, RemoteBrokerOffsetStore
from rmq.client.process_queue import ProcessQueue
from rmq.client.remoting_processor import parse_offset_table
from rmq.client.selector import select_by_hash
from rmq.common.protocol.headers_broker import (
    ConsumerSendMsgBackRequestHeader,
    PullMessageRequestHeader,
    SendMessageRequestHeaderV2,
    UnregisterClientRequestHeader,
)
from rmq.common.route import BrokerData, QueueData, TopicRouteData
from rmq.store import message_codec
from rmq.store.message import MessageExt as StoreMessageExt


def test_send_header_matches_the_typed_class():
    ext = h.send_header_v2("PG", "TopicTest", "TBW102", 4, 0, 0, 1700000000000, 0,
                           "UNIQ_KEY\x01ABC", False, "broker-a")
    typed = SendMessageRequestHeaderV2(a="PG", b="TopicTest", c="TBW102", d=4, e=0, f=0,
                                         g=1700000000000, h=0, i="UNIQ_KEY\x01ABC", j=0, k=False,
                                         m=False, n="broker-a")
    assert ext == typed.to_ext_fields()
    assert SendMessageRequestHeaderV2.from_ext_fields(ext) == typed


def test_pull_header_matches_the_typed_class():
    ext = h.pull_header("cg", "T", 3, 10, 32, 3, 9, 15000, None, 17, "TAG", "b")
    typed = PullMessageRequestHeader(consumerGroup="cg", topic="T", queueId=3, queueOffset=10,
                                       maxMsgNums=32, sysFlag=3, commitOffset=9,
                                       suspendTimeoutMillis=15000, subVersion=17,
                                       expressionType="TAG", bname="b")
    assert ext == typed.to_ext_fields()
    assert "subscription" not in ext


def test_header_field_names_are_java_names():
    ext = UnregisterClientRequestHeader(clientID="c", consumerGroup="g").to_ext_fields()
    assert ext == {"clientID": "c", "consumerGroup": "g"}
    ext = ConsumerSendMsgBackRequestHeader(offset=5, group="g", delayLevel=0).to_ext_fields()
    assert ext == {"offset": "5", "group": "g", "delayLevel": "0", "unitMode": "false"}


def test_subscription_expression_and_tag_codes():
    sub = build_subscription("T", "TagA || TagB")
    assert sub.tags_set == ["TagA", "TagB"]
    assert sub.code_set == [2598919, 2598920]
    assert sub.matches_tag("TagA") and not sub.matches_tag("TagC") and not sub.matches_tag(None)
    everything = build_subscription("T", "*")
    assert everything.sub_string == "*" and everything.tags_set == []
    assert everything.matches_tag(None)


def test_heartbeat_json_shape_round_trips():
    sub = build_subscription("TopicTest", "TagA || TagB")
    sub.sub_version = 1700000000000
    data = HeartbeatData("192.168.0.10@12345#1", ["pg"], [ConsumerData(
        "cg", ConsumeType.CONSUME_PASSIVELY, MessageModel.CLUSTERING,
        ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET, [sub])])
    body = data.encode()
    assert body == (
        b'{"clientID":"192.168.0.10@12345#1","consumerDataSet":[{"consumeFromWhere":'
        b'"CONSUME_FROM_LAST_OFFSET","consumeType":"CONSUME_PASSIVELY","groupName":"cg",'
        b'"messageModel":"CLUSTERING","subscriptionDataSet":[{"classFilterMode":false,'
        b'"codeSet":[2598919,2598920],"expressionType":"TAG","subString":"TagA || TagB",'
        b'"subVersion":1700000000000,"tagsSet":["TagA","TagB"],"topic":"TopicTest"}],'
        b'"unitMode":false}],"producerDataSet":[{"groupName":"pg"}]}')
    assert HeartbeatData.decode(body) == data


def test_heartbeat_accepts_cpp_ordinals():
    body = (b'{"clientID":"1-127.0.0.1@DEFAULT","consumerDataSet":[{"consumeFromWhere":0,'
            b'"consumeType":1,"groupName":"g","messageModel":1,"subscriptionDataSet":[{"topic":'
            b'"T","subString":"*","subVersion":"12"}]}],"producerDataSet":[]}')
    data = HeartbeatData.decode(body)
    c = data.consumers[0]
    assert c.consume_type is ConsumeType.CONSUME_PASSIVELY
    assert c.message_model is MessageModel.CLUSTERING
    assert c.subscriptions[0].sub_version == 12


def test_batch_encoding_matches_the_observed_element():
    msg = Message("T", b"Hello", flag=0, properties={"k": "v", "WAIT": "true", "TAGS": "TagA"})
    body = encode_batch([msg])
    assert body.hex() == ("00000032000000000000000000000000000000054865"
                          "6c6c6f00176b01760257414954017472756502544147530154616741")


def test_batch_body_is_accepted_by_the_store_batch_codec():
    msgs = [Message("T", f"m{i}".encode(), tags="A", flag=i) for i in range(5)]
    size, count = message_codec.batch_size(encode_batch(msgs), 0, 1, 0)
    assert count == 5 and size > 0


def _stored(body: bytes, props: dict, sys_flag: int = 0, offset: int = 4096, qoff: int = 5):
    msg = StoreMessageExt(topic="TopicTest", flag=7, properties=props, body=body, queue_id=1,
                          queue_offset=qoff, sys_flag=sys_flag, born_timestamp=1700000000000,
                          born_host=("192.168.0.10", 55555), store_timestamp=1700000000123,
                          store_host=("192.168.0.1", 10911), commit_log_offset=offset,
                          reconsume_times=2, body_crc=zlib.crc32(body) & 0x7FFFFFFF)
    return message_codec.encode_message(msg)


def test_pull_body_decoding_reads_every_field():
    raw = _stored(b"Hello", {"UNIQ_KEY": "C0A8000A00002A9F0000000000000001", "TAGS": "TagA"})
    raw2 = _stored(b"World", {"TAGS": "TagB"}, offset=4096 + len(raw), qoff=6)
    msgs = decode_messages(raw + raw2, "broker-a", 0, 7)
    assert len(msgs) == 2
    m = msgs[0]
    assert (m.topic, m.queue_id, m.queue_offset, m.flag, m.body) == ("TopicTest", 1, 5, 7, b"Hello")
    assert m.born_host == "192.168.0.10:55555" and m.store_host == "192.168.0.1:10911"
    assert m.reconsume_times == 2 and m.commit_log_offset == 4096
    assert m.offset_msg_id == "C0A8000100002A9F0000000000001000"
    assert m.msg_id == "C0A8000A00002A9F0000000000000001"
    assert m.tags == "TagA" and m.properties["MIN_OFFSET"] == "0"
    assert m.properties["MAX_OFFSET"] == "7" and m.broker_name == "broker-a"
    assert msgs[1].msg_id == msgs[1].offset_msg_id and msgs[1].queue_offset == 6


def test_pull_body_decompresses_zlib_bodies():
    payload = b"x" * 10000
    raw = _stored(zlib.compress(payload, 5), {"TAGS": "A"}, sys_flag=0x301)
    assert decode_messages(raw)[0].body == payload


def test_truncated_pull_body_is_an_error():
    raw = _stored(b"Hello", {"TAGS": "A"})
    with pytest.raises(MessageDecodeError):
        decode_messages(raw[:-3])


def test_properties_string_has_no_trailing_separator():
    assert properties_string({"a": "1", "b": "2"}) == "a\x011\x02b\x012"


def _mqs(n: int, broker: str = "b") -> list[MessageQueue]:
    return [MessageQueue("T", broker, i) for i in range(n)]


@pytest.mark.parametrize("n_mq,n_cid", [(8, 2), (8, 3), (3, 5), (16, 3), (1, 1), (7, 7)])
def test_allocate_averagely_covers_every_queue_once(n_mq, n_cid):
    mqs, cids = _mqs(n_mq), [f"c{i}" for i in range(n_cid)]
    strategy = AllocateMessageQueueAveragely()
    shares = [strategy.allocate("g", c, mqs, cids) for c in cids]
    flat = [mq for s in shares for mq in s]
    assert sorted(flat) == mqs
    sizes = [len(s) for s in shares]
    assert max(sizes) - min(sizes) <= 1


def test_allocate_averagely_is_contiguous_like_java():
    mqs, cids = _mqs(8), ["a", "b", "c"]
    s = AllocateMessageQueueAveragely()
    assert [mq.queue_id for mq in s.allocate("g", "a", mqs, cids)] == [0, 1, 2]
    assert [mq.queue_id for mq in s.allocate("g", "b", mqs, cids)] == [3, 4, 5]
    assert [mq.queue_id for mq in s.allocate("g", "c", mqs, cids)] == [6, 7]
    assert s.allocate("g", "zz", mqs, cids) == []
    c = AllocateMessageQueueAveragelyByCircle()
    assert [mq.queue_id for mq in c.allocate("g", "b", mqs, cids)] == [1, 4, 7]


def test_rebalance_decision_sorts_inputs_and_handles_broadcasting():
    mqs = _mqs(4, "b2") + _mqs(4, "b1")
    s = AllocateMessageQueueAveragely()
    mine = allocate_decision(s, "g", "x", list(reversed(mqs)), ["y", "x"], MessageModel.CLUSTERING)
    assert mine == sorted(mqs)[:4]
    assert allocate_decision(s, "g", "x", mqs, [], MessageModel.BROADCASTING) == sorted(mqs)
    assert allocate_decision(s, "g", "x", mqs, [], MessageModel.CLUSTERING) == []


def test_select_by_hash_is_stable_and_java_compatible():
    mqs = _mqs(8)
    assert select_by_hash(mqs, Message("T", b"x"), 13) == mqs[5]
    assert select_by_hash(mqs, Message("T", b"x"), -13) == mqs[5]
    # "TagA".hashCode() == 2598919 in Java (PROTOCOL.md 5.6) -> 2598919 % 8 == 7
    assert select_by_hash(mqs, Message("T", b"x"), "TagA") == mqs[7]


def test_latency_fault_avoids_a_failed_broker_until_its_quarantine_ends():
    now = [100.0]
    f = MQFaultStrategy(True, clock=lambda: now[0])
    mqs = _mqs(2, "a") + _mqs(2, "b")
    f.update("a", 10, isolation=True)
    assert {f.select(mqs, i, None).broker_name for i in range(8)} == {"b"}
    now[0] += 601
    assert {f.select(mqs, i, None).broker_name for i in range(8)} == {"a", "b"}
    assert not_available_duration(40) == 0 and not_available_duration(600) == 30000


def test_latency_fault_falls_back_when_every_broker_is_quarantined():
    f = MQFaultStrategy(True)
    mqs = _mqs(2, "a")
    f.update("a", 0, isolation=True)
    assert f.select(mqs, 0, "a").broker_name == "a"


def test_retry_avoids_the_last_broker_without_fault_tolerance():
    f = MQFaultStrategy(False)
    mqs = _mqs(1, "a") + _mqs(1, "b")
    assert f.select(mqs, 0, "a").broker_name == "b"


def _route() -> TopicRouteData:
    return TopicRouteData(
        queueDatas=[QueueData("b2", 4, 4, 6), QueueData("b1", 2, 3, 6), QueueData("b3", 4, 4, 4)],
        brokerDatas=[BrokerData("c", "b1", {0: "h:1"}), BrokerData("c", "b2", {1: "h:2"}),
                     BrokerData("c", "b3", {0: "h:3"})])


def test_publish_queues_need_a_master_and_write_permission():
    assert publish_queues("T", _route()) == [MessageQueue("T", "b1", i) for i in range(3)]
    route = _route()
    route.orderTopicConf = "b1:2;b2:1"
    assert publish_queues("T", route) == [MessageQueue("T", "b1", 0), MessageQueue("T", "b1", 1),
                                          MessageQueue("T", "b2", 0)]


def test_subscribe_queues_use_read_counts():
    qs = subscribe_queues("T", _route())
    assert len(qs) == 2 + 4 + 4 and qs == sorted(qs)


class _Broker:
    """The two offset calls, answered from a dict (what a broker stores)."""

    def __init__(self) -> None:
        self.stored: dict[MessageQueue, int] = {}
        self.oneway: list[bool] = []

    async def query_consumer_offset(self, group, mq):
        if mq not in self.stored:
            raise MQBrokerError(22, "Not found")
        return self.stored[mq]

    async def update_consumer_offset(self, group, mq, offset, oneway):
        self.stored[mq] = offset
        self.oneway.append(oneway)


async def test_remote_offset_store_reads_commits_and_reports_missing():
    broker = _Broker()
    store = RemoteBrokerOffsetStore("g", broker)
    mq = MessageQueue("T", "b", 0)
    assert await store.read(mq, ReadOffsetType.READ_FROM_STORE) == -1
    store.update(mq, 10)
    store.update(mq, 5, increase_only=True)
    assert await store.read(mq, ReadOffsetType.READ_FROM_MEMORY) == 10
    await store.persist_all({mq}, oneway=False)
    assert broker.stored[mq] == 10 and broker.oneway == [False]
    store.remove(mq)
    assert await store.read(mq, ReadOffsetType.MEMORY_FIRST_THEN_STORE) == 10


async def test_local_offset_store_survives_a_restart(tmp_path):
    mq1, mq2 = MessageQueue("T", "b", 0), MessageQueue("T", "b", 1)
    store = LocalFileOffsetStore("g", "cid", str(tmp_path))
    store.update(mq1, 7)
    store.update(mq2, 9)
    await store.persist(mq1)
    data = orjson.loads(store.path.read_bytes())
    assert data["offsetTable"] == {mq1.key(): 7, mq2.key(): 9}
    again = LocalFileOffsetStore("g", "cid", str(tmp_path))
    await again.load()
    assert await again.read(mq2, ReadOffsetType.READ_FROM_MEMORY) == 9


def _ext(off: int, body: bytes = b"x"):
    from rmq.client.message import MessageExt

    m = MessageExt()
    m.queue_offset, m.body = off, body
    return m


def test_process_queue_commits_the_lowest_unconsumed_offset():
    pq = ProcessQueue()
    msgs = [_ext(i) for i in range(10, 15)]
    pq.put(msgs)
    assert pq.count == 5 and pq.msg_size == 5
    assert pq.remove([msgs[1], msgs[2]]) == 10
    assert pq.remove([msgs[0]]) == 13
    assert pq.remove([msgs[3], msgs[4]]) == 15
    assert pq.count == 0 and pq.msg_size == 0


def test_process_queue_keeps_the_first_copy_of_a_re_pulled_offset():
    pq = ProcessQueue()
    first = [_ext(i) for i in range(3)]
    pq.put(first)
    again = [_ext(i) for i in range(1, 5)]
    pq.put(again)
    assert pq.count == 5 and pq.msg_size == 5 and pq.queue_offset_max == 4
    assert pq.msgs[1] is first[1] and pq.msgs[4] is again[3]
    assert pq.remove(first + again) == 5 and pq.msg_size == 0
    assert pq.remove(first) == 5  # removing what is gone changes nothing


def test_process_queue_orderly_take_commit_rollback():
    pq = ProcessQueue()
    pq.put([_ext(i) for i in range(3)])
    taken = pq.take(2)
    assert [m.queue_offset for m in taken] == [0, 1]
    pq.rollback()
    assert [m.queue_offset for m in pq.take(2)] == [0, 1]
    assert pq.commit() == 2
    assert [m.queue_offset for m in pq.take(5)] == [2]


def test_reset_offset_bodies_java_and_cpp():
    mq = MessageQueue("T", "b", 1)
    java = b'{"offsetTable":{{"brokerName":"b","queueId":1,"topic":"T"}:42}}'
    quoted = orjson.dumps({"offsetTable": {mq.key(): 42}})
    cpp = b'{"offsetTable":[{"brokerName":"b","offset":42,"queueId":1,"topic":"T"}]}'
    for body in (java, quoted, cpp):
        assert parse_offset_table(body) == {mq: 42}


def test_message_properties_from_arguments():
    m = Message("T", b"b", tags="A", keys=["k1", "k2"], delay_level=3,
                properties={"u": "v"}, wait_store_msg_ok=False)
    assert m.properties == {"u": "v", "TAGS": "A", "KEYS": "k1 k2", "DELAY": "3", "WAIT": "false"}
    assert m.delay_level == 3 and m.tags == "A"


def test_uniq_key_layout():
    from rmq.common.message_id import create_uniq_id

    uid = create_uniq_id()
    assert len(uid) == 32 and uid == uid.upper()
    assert struct.unpack(">H", bytes.fromhex(uid[28:]))[0] >= 0


@pytest.mark.parametrize(("sys_flag", "flag", "batch"), [(0, 0, False), (0x301, 7, False),
                                                         (0, 0, True), (0, -3, True)])
def test_send_request_from_template_equals_the_built_header(sys_flag, flag, batch):
    from rmq.client import ClientConfig, Producer

    p = Producer("pg", client_config=ClientConfig(namesrv_addr="127.0.0.1:1",
                                                   client_ip="127.0.0.1"))
    mq = MessageQueue("T", "broker-a", 3)
    for props in ("UNIQ_KEY\x01A", "UNIQ_KEY\x01B\x02TAGS\x01x"):
        req = p._request(mq, "T", b"body", sys_flag, flag, props, batch)
        want = h.send_header_v2("pg", "T", p.config.create_topic_key,
                                p.config.default_topic_queue_nums, 3, sys_flag,
                                int(req.ext_fields["g"]), flag, props, batch, "broker-a")
        assert list(req.ext_fields.items()) == list(want.items())
        assert abs(int(req.ext_fields["g"]) - time.time() * 1000) < 60_000
