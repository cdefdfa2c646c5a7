"""The pure parts of the gRPC endpoint (rmq.proxy): 5.x message -> broker
properties with 5.3.3's checks, message and topic types, Guava's
consistentHash, delay levels, route queue permissions, the outgoing message,
and the code generator's descriptor extraction."""

from __future__ import annotations

import pytest
from google.protobuf.duration_pb2 import Duration
from google.protobuf.timestamp_pb2 import Timestamp

from rmq.common import message as mc
from rmq.common.codes import ResponseCode as RC
from rmq.proxy import codegen
from rmq.proxy.messages import (
    accept_message_types,
    build_properties,
    check_body,
    check_type,
    consistent_hash,
    delay_level,
    group_queue,
    message_type_of,
    sys_flag_of,
    to_proto_message,
)
from rmq.proxy.route import check_topic, endpoints_for, queues_of
from rmq.proxy.status import Code, ProxyError, code_of_response
from rmq.proxy.v2 import definition_pb2 as pb
from rmq.store.message import MessageExt

NOW = 1_700_000_000_000
LEVELS = {1: 1000, 2: 5000, 3: 10000, 4: 30000, 5: 60000}


def message(**sp) -> pb.Message:
    m = pb.Message(topic=pb.Resource(name="T"), body=b"x",
                   system_properties=pb.SystemProperties(message_id="ID1", **sp))
    return m


def refused(code: int, msg: pb.Message, **kw) -> None:
    with pytest.raises(ProxyError) as exc:
        build_properties(msg, "T", "1.2.3.4:5", kw.get("levels"), NOW)
    assert exc.value.code == code, exc.value.message


def test_guava_consistent_hash_golden_values():
    # Guava HashingTest's golden values of Hashing.consistentHash
    assert [consistent_hash(i, 100) for i in range(20)] == \
        [0, 55, 62, 8, 45, 59, 86, 97, 82, 59, 73, 37, 17, 56, 86, 21, 90, 37, 38, 83]
    assert consistent_hash(10863919174838991, 11) == 6
    assert consistent_hash(2016238256797177309, 11) == 3
    assert consistent_hash(2, 100001) == 80343
    assert consistent_hash(2202, 100001) == 15018


def test_group_queue_is_stable_and_in_range():
    picks = {group_queue("order-1", range(8)) for _ in range(5)}
    assert len(picks) == 1 and picks.pop() in range(8)
    assert group_queue("order-1", [5]) == 5


def test_properties_of_a_normal_message():
    m = message(tag="TagA", keys=["k1", "k2"], born_host="h:1",
                born_timestamp=Timestamp(seconds=12, nanos=345_000_000), delivery_attempt=2)
    m.user_properties["color"] = "red"
    props = build_properties(m, "T", "1.2.3.4:5", None, NOW)
    assert props == {"color": "red", "TAGS": "TagA", "KEYS": "k1 k2", "UNIQ_KEY": "ID1",
                     "RECONSUME_TIME": "2", "PGROUP": "T", "__BORNHOST": "h:1",
                     "BORN_TIMESTAMP": "12345"}
    assert message_type_of(props) == "NORMAL"
    assert sys_flag_of(m) == 0


def test_born_host_defaults_to_the_peer():
    props = build_properties(message(), "T", "1.2.3.4:5", None, NOW)
    assert props["__BORNHOST"] == "1.2.3.4:5"


def test_fifo_delay_and_transaction_properties():
    props = build_properties(message(message_group="g1"), "T", "", None, NOW)
    assert props["__SHARDINGKEY"] == "g1" and message_type_of(props) == "FIFO"
    at = Timestamp(seconds=NOW // 1000 + 3)
    props = build_properties(message(delivery_timestamp=at), "T", "", None, NOW)
    assert props["TIMER_DELIVER_MS"] == str(NOW + 3000) and "DELAY" not in props
    assert message_type_of(props) == "DELAY"
    props = build_properties(message(delivery_timestamp=at), "T", "", LEVELS, NOW)
    assert props["DELAY"] == "2"  # 5 s: the first level longer than 3 s
    tx = message(message_type=pb.TRANSACTION,
                 orphaned_transaction_recovery_duration=Duration(seconds=30))
    props = build_properties(tx, "T", "", None, NOW)
    assert props["TRAN_MSG"] == "true" and props["CHECK_IMMUNITY_TIME_IN_SECONDS"] == "30"
    assert message_type_of(props) == "TRANSACTION"
    assert sys_flag_of(tx) == mc.TRANSACTION_PREPARED_TYPE


def test_5_3_3_checks():
    bad_key = message()
    bad_key.user_properties["TAGS"] = "x"
    refused(Code.ILLEGAL_MESSAGE_PROPERTY_KEY, bad_key)
    refused(Code.ILLEGAL_MESSAGE_TAG, message(tag="a|b"))
    refused(Code.ILLEGAL_MESSAGE_TAG, message(tag="  "))
    refused(Code.ILLEGAL_MESSAGE_KEY, message(keys=["a\x01"]))
    refused(Code.ILLEGAL_MESSAGE_GROUP, message(message_group="g" * 64))
    refused(Code.ILLEGAL_MESSAGE_ID, pb.Message(topic=pb.Resource(name="T"), body=b"x"))
    refused(Code.ILLEGAL_DELIVERY_TIME,
            message(delivery_timestamp=Timestamp(seconds=NOW // 1000 + 2 * 86400)))
    many = message()
    for i in range(129):
        many.user_properties[f"p{i}"] = "v"
    refused(Code.MESSAGE_PROPERTIES_TOO_LARGE, many)
    big = message()
    big.user_properties["p"] = "v" * 17000
    refused(Code.MESSAGE_PROPERTIES_TOO_LARGE, big)
    with pytest.raises(ProxyError) as exc:
        check_body(b"", 100)
    assert exc.value.code == Code.MESSAGE_BODY_EMPTY
    with pytest.raises(ProxyError) as exc:
        check_body(b"x" * 101, 100)
    assert exc.value.code == Code.MESSAGE_BODY_TOO_LARGE


def test_topic_type_check():
    check_type("T", "FIFO", {"__SHARDINGKEY": "g"})
    check_type("T", "MIXED", {"TRAN_MSG": "true"})
    with pytest.raises(ProxyError) as exc:
        check_type("T", "NORMAL", {"__SHARDINGKEY": "g"})
    assert exc.value.code == Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE
    assert "expected type is NORMAL, but actual type is FIFO" in exc.value.message


def test_accept_message_types():
    assert accept_message_types(None) == [pb.NORMAL]
    assert accept_message_types({"message.type": "FIFO"}) == [pb.FIFO]
    assert accept_message_types({"message.type": "MIXED"}) == \
        [pb.NORMAL, pb.FIFO, pb.DELAY, pb.TRANSACTION]


def test_delay_level():
    assert delay_level(500, LEVELS) == 1
    assert delay_level(1000, LEVELS) == 2  # strictly longer, as 5.3.3
    assert delay_level(10**9, LEVELS) == 5


def test_route_queue_permissions():
    broker = pb.Broker(name="b", id=0)
    topic = pb.Resource(name="T")
    qs = queues_of(topic, mc.PERM_READ | mc.PERM_WRITE, 4, 2, [pb.NORMAL], broker)
    assert [(q.id, q.permission) for q in qs] == \
        [(0, pb.READ), (1, pb.READ), (2, pb.READ_WRITE), (3, pb.READ_WRITE)]
    assert [q.permission for q in queues_of(topic, mc.PERM_WRITE, 4, 2, [], broker)] == \
        [pb.WRITE, pb.WRITE]
    assert [q.permission for q in queues_of(topic, 0, 4, 2, [], broker)] == [pb.NONE] * 4
    ep = endpoints_for(pb.Endpoints(scheme=pb.DOMAIN_NAME,
                                    addresses=[pb.Address(host="mq.local", port=1)]), "h", 8081)
    assert ep.scheme == pb.DOMAIN_NAME and ep.addresses[0].port == 8081
    assert endpoints_for(pb.Endpoints(), "10.0.0.1", 8081).addresses[0].host == "10.0.0.1"


def test_check_topic():
    check_topic("TopicTest")
    for name, code in (("", Code.ILLEGAL_TOPIC), ("a b", Code.ILLEGAL_TOPIC),
                       ("RMQ_SYS_TRANS_HALF_TOPIC", Code.ILLEGAL_TOPIC)):
        with pytest.raises(ProxyError) as exc:
            check_topic(name)
        assert exc.value.code == code


def test_response_codes():
    assert code_of_response(RC.SUCCESS) == Code.OK
    assert code_of_response(RC.SYSTEM_BUSY) == Code.TOO_MANY_REQUESTS
    assert code_of_response(RC.TOPIC_NOT_EXIST) == Code.TOPIC_NOT_FOUND
    assert code_of_response(RC.SYSTEM_ERROR) == Code.INTERNAL_SERVER_ERROR


def test_outgoing_message():
    msg = MessageExt(topic="T", body=b"hello", queue_id=2, queue_offset=7, reconsume_times=1,
                     born_timestamp=1234, store_timestamp=5678,
                     properties={"UNIQ_KEY": "ID1", "TAGS": "TagA", "KEYS": "k1 k2",
                                 "__SHARDINGKEY": "g", "TIMER_DELIVER_MS": "9000",
                                 "color": "red", "PGROUP": "T"})
    out = to_proto_message(msg, "handle")
    sp = out.system_properties
    assert (sp.message_id, sp.tag, list(sp.keys), sp.message_group) == ("ID1", "TagA",
                                                                        ["k1", "k2"], "g")
    assert sp.message_type == pb.DELAY and sp.delivery_timestamp.seconds == 9
    assert sp.delivery_attempt == 2 and sp.queue_id == 2 and sp.queue_offset == 7
    assert sp.body_digest.checksum == "5D41402ABC4B2A76B9719D911017C592"  # md5("hello")
    assert dict(out.user_properties) == {"color": "red"}
    assert sp.receipt_handle == "handle"


def test_codegen_reads_the_descriptor_without_running_the_module():
    source = "X = pool.AddSerializedFile(b'\\n\\x05a.pro')\nraise SystemExit('never run')\n"
    assert codegen.serialized_file(source) == b"\n\x05a.pro"
    with pytest.raises(codegen.CodegenError):
        codegen.serialized_file("x = 1\n")


def test_authorization_header_and_acl_refusals():
    from rmq.proxy.auth import parse_authorization, refusal

    assert parse_authorization("MQv2-HMAC-SHA1 Credential=ak/x, SignedHeaders=x-mq-date-time, "
                               "Signature=0a1b") == ("ak", "0a1b")
    assert parse_authorization("MQv2-HMAC-SHA1 Credential=, SignedHeaders=x, Signature=") == \
        ("", "")
    remark = ("org.apache.rocketmq.acl.common.AclException: No acl config for ak, "
              "validate(permission_manager.py:147)")
    assert (refusal(remark).code, refusal(remark).message) == (Code.UNAUTHORIZED,
                                                               "No acl config for ak")
    remark = ("org.apache.rocketmq.acl.common.AclException: No default permission for topic:T, "
              "check_perm(permission_manager.py:190)")
    assert refusal(remark).code == Code.FORBIDDEN
    assert refusal("something else") is None


def test_receipt_handle_polling_and_invisible_rules():
    from rmq.proxy.consumer import (
        ReceiptHandle,
        check_group,
        check_invisible,
        encode_handle,
        polling_ms,
    )
    from rmq.proxy.v2 import service_pb2 as spb

    text = encode_handle("1024 1732600000123 10000 3 2 broker-a 5 1031", 2949120)
    h = ReceiptHandle.decode(text)
    assert (h.queue_id, h.offset, h.commit_log_offset) == ("5", "1031", "2949120")
    assert h.extra_info == "1024 1732600000123 10000 3 2 broker-a 5 1031"
    assert h.real_topic("T", "G") == "%RETRY%G+T"
    assert h.expired(1732600010123) and not h.expired(1732600010122)
    for bad in ("", "1 2 3", "a b c d 0 broker 1 2"):
        with pytest.raises(ProxyError) as exc:
            ReceiptHandle.decode(bad)
        assert exc.value.code == Code.INVALID_RECEIPT_HANDLE
    req = spb.ReceiveMessageRequest(long_polling_timeout=Duration(seconds=30))
    assert polling_ms(req, 60_000) == 20_000
    assert polling_ms(spb.ReceiveMessageRequest(long_polling_timeout=Duration(seconds=1)),
                      60_000) == 5_000
    assert polling_ms(req, 8_000) == 8_000
    with pytest.raises(ProxyError) as exc:
        polling_ms(req, 4_000)
    assert exc.value.code == Code.ILLEGAL_POLLING_TIME
    with pytest.raises(ProxyError) as exc:
        check_invisible(9_999, 10_000)
    assert exc.value.code == Code.ILLEGAL_INVISIBLE_TIME
    check_invisible(12 * 3600 * 1000)
    for name in ("", "a b", "TOOLS_CONSUMER"):
        with pytest.raises(ProxyError) as exc:
            check_group(name)
        assert exc.value.code == Code.ILLEGAL_CONSUMER_GROUP
