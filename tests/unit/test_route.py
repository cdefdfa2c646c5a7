"""Route/topic bodies: DataVersion, TopicConfig, RegisterBrokerBody, route shapes."""

import struct
import zlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rmq.common.data_version import DataVersion
from rmq.common.route import (
    BrokerData,
    ClusterInfo,
    KVTable,
    QueueData,
    RouteDataError,
    TopicList,
    TopicRouteData,
)
from rmq.common.topic_config import (
    RegisterBodyError,
    RegisterBrokerBody,
    TopicConfig,
    TopicConfigSerializeWrapper,
)


def test_data_version_json_shape_and_equality():
    dv = DataVersion(1700000000000, 3)
    assert dv.encode() == b'{"counter":3,"timestamp":1700000000000}'
    assert DataVersion.decode(b'{"counter":"3","timestamp":1700000000000}') == dv
    assert DataVersion.decode(b"{}").counter == 0
    other = DataVersion(1700000000000, 3)
    other.next_version()
    assert other.counter == 4 and other != dv
    other.assign_new_one(dv)
    assert other == dv
    with pytest.raises(ValueError):
        DataVersion.decode(b'{"counter":"x"}')


def test_topic_config_json_matches_java_shape():
    tc = TopicConfig("TopicTest", 4, 4, 6)
    assert TopicConfigSerializeWrapper({"TopicTest": tc}, DataVersion(1700000000000, 3)).encode() == (
        b'{"dataVersion":{"counter":3,"timestamp":1700000000000},"topicConfigTable":{"TopicTest":'
        b'{"attributes":{},"order":false,"perm":6,"readQueueNums":4,"topicFilterType":"SINGLE_TAG",'
        b'"topicName":"TopicTest","topicSysFlag":0,"writeQueueNums":4}}}')


def test_topic_config_reader_is_lenient_like_fastjson():
    tc = TopicConfig.from_json_obj({"topicName": "T", "perm": "7", "topicFilterType": 1,
                                    "order": "true", "unknown": 1})
    assert (tc.perm, tc.topicFilterType, tc.order, tc.readQueueNums) == (7, "MULTI_TAG", True, 16)
    with pytest.raises(RegisterBodyError):
        TopicConfig.from_json_obj({"topicName": "T", "perm": "rw"})
    with pytest.raises(RegisterBodyError):
        TopicConfig.from_json_obj({"topicName": "T", "topicFilterType": "SQL"})


def test_topic_config_line_form():
    tc = TopicConfig("TopicTest", 4, 2, 6, "MULTI_TAG", topicSysFlag=3, order=True)
    assert tc.encode_line() == "TopicTest 4 2 6 MULTI_TAG"
    back = TopicConfig.decode_line("TopicTest 4 2 6 MULTI_TAG")
    assert back == TopicConfig("TopicTest", 4, 2, 6, "MULTI_TAG")
    for bad in ("TopicTest 4 2 6", "T a 2 6 SINGLE_TAG", "T 4 2 6 SINGLE_TAG extra", "T 1 1 6 X"):
        with pytest.raises(RegisterBodyError):
            TopicConfig.decode_line(bad)


def _body():
    table = {f"T{i}": TopicConfig(f"T{i}", 4, 8, 6) for i in range(5)}
    return RegisterBrokerBody(TopicConfigSerializeWrapper(table, DataVersion(1700000000000, 9)),
                              ["10.0.0.9:4000"])


def test_register_body_plain_round_trip_and_shape():
    body = _body()
    raw = body.encode(compress=False)
    assert raw.startswith(b'{"filterServerList":["10.0.0.9:4000"],"topicConfigSerializeWrapper":'
                          b'{"dataVersion":{"counter":9,"timestamp":1700000000000}')
    assert RegisterBrokerBody.decode(raw, compressed=False) == body


def test_register_body_compressed_layout():
    body = _body()
    raw = body.encode(compress=True)
    assert raw[:2] == b"\x78\xda"  # zlib, level 9
    inner = zlib.decompress(raw)
    (n1,) = struct.unpack_from(">i", inner, 0)
    assert inner[4:4 + n1] == b'{"counter":9,"timestamp":1700000000000}'
    (count,) = struct.unpack_from(">i", inner, 4 + n1)
    assert count == 5
    (n,) = struct.unpack_from(">i", inner, 8 + n1)
    assert inner[12 + n1:12 + n1 + n] == b"T0 4 8 6 SINGLE_TAG"
    assert inner.endswith(b'\x00\x00\x00\x11["10.0.0.9:4000"]')
    assert RegisterBrokerBody.decode(raw, compressed=True) == body


def test_register_body_compressed_drops_order_and_sysflag():
    table = {"T": TopicConfig("T", 1, 1, 6, topicSysFlag=1, order=True)}
    body = RegisterBrokerBody(TopicConfigSerializeWrapper(table, DataVersion(1, 1)))
    back = RegisterBrokerBody.decode(body.encode(True), True)
    assert back.topicConfigSerializeWrapper.topicConfigTable["T"] == TopicConfig("T", 1, 1, 6)


@pytest.mark.parametrize("raw,compressed", [
    (b"not json", False),
    (b'{"topicConfigSerializeWrapper":{"topicConfigTable":[]}}', False),
    (b'{"filterServerList":"x"}', False),
    (b"\x00\x01\x02", True),
    (zlib.compress(b"\x00\x00\x00\x02{}"), True),                    # ends early
    (zlib.compress(b"\x00\x00\x00\x02{}\xff\xff\xff\xff"), True),     # negative count
    (zlib.compress(b"\x00\x00\x00\x02{}\x00\x00\x00\x01\x00\x00\x00\x03a b"
                   b"\x00\x00\x00\x02[]"), True),                     # bad line
])
def test_register_body_garbage_is_a_clear_error(raw, compressed):
    with pytest.raises(RegisterBodyError):
        RegisterBrokerBody.decode(raw, compressed)


@given(st.dictionaries(st.from_regex(r"[A-Za-z0-9_%|-]{1,20}", fullmatch=True),
                       st.tuples(st.integers(0, 1024), st.integers(0, 1024), st.integers(0, 15),
                                 st.sampled_from(["SINGLE_TAG", "MULTI_TAG"])), max_size=20),
       st.booleans())
def test_register_body_round_trip(topics, compress):
    table = {k: TopicConfig(k, *v) for k, v in topics.items()}
    body = RegisterBrokerBody(TopicConfigSerializeWrapper(table, DataVersion(5, 6)), [])
    assert RegisterBrokerBody.decode(body.encode(compress), compress) == body


def _route():
    return TopicRouteData(
        queueDatas=[QueueData("broker-a", 4, 4, 6, 0)],
        brokerDatas=[BrokerData("DefaultCluster", "broker-a",
                                {0: "192.168.0.1:10911", 1: "192.168.0.2:10911"})])


def test_route_legacy_and_standard_bytes():
    tail = (b'"brokerName":"broker-a","cluster":"DefaultCluster"}],"filterServerTable":{},'
            b'"queueDatas":[{"brokerName":"broker-a","perm":6,"readQueueNums":4,'
            b'"topicSysFlag":0,"writeQueueNums":4}]}')
    assert _route().encode() == (
        b'{"brokerDatas":[{"brokerAddrs":{0:"192.168.0.1:10911",1:"192.168.0.2:10911"},' + tail)
    assert _route().encode(standard=True) == (
        b'{"brokerDatas":[{"brokerAddrs":{"0":"192.168.0.1:10911","1":"192.168.0.2:10911"},'
        + tail)


def test_route_order_topic_conf_only_when_set_and_round_trips():
    route = _route()
    assert b"orderTopicConf" not in route.encode()
    route.orderTopicConf = "broker-a:4"
    assert b'"orderTopicConf":"broker-a:4"' in route.encode()
    assert TopicRouteData.decode(route.encode()) == route
    assert TopicRouteData.decode(route.encode(standard=True)) == route


def test_cluster_info_topic_list_kv_table_shapes():
    ci = ClusterInfo({"broker-a": BrokerData("C", "broker-a", {0: "h:1"})}, {"C": {"broker-a"}})
    assert ci.encode() == (b'{"brokerAddrTable":{"broker-a":{"brokerAddrs":{0:"h:1"},'
                           b'"brokerName":"broker-a","cluster":"C"}},'
                           b'"clusterAddrTable":{"C":["broker-a"]}}')
    assert ClusterInfo.decode(ci.encode()) == ci
    assert TopicList(["A"]).encode() == b'{"topicList":["A"]}'
    assert TopicList(["A"], "h:1").encode() == b'{"brokerAddr":"h:1","topicList":["A"]}'
    assert TopicList.decode(b'{"brokerAddr":"h:1","topicList":["A"]}') == TopicList(["A"], "h:1")
    assert KVTable({"k": "v"}).encode() == b'{"table":{"k":"v"}}'
    assert KVTable.decode(b'{"table":{"k":"v"}}') == KVTable({"k": "v"})


def test_route_reader_rejects_wrong_types():
    with pytest.raises(RouteDataError):
        TopicRouteData.decode(b'{"queueDatas":{}}')
    with pytest.raises(RouteDataError):
        BrokerData.from_json_obj({"brokerAddrs": {"master": "h:1"}})
