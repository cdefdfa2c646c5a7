"""Hot-path shortcuts of the send path give exactly what the general code gives:
direct dispatch of a single put versus the reput scan, cached message-id
heads, cached HashMap property order, the send header fast path."""

from __future__ import annotations

import os
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rmq.broker.processor.send_support import V1_KEYS, V2_KEYS, parse_send_header
from rmq.common import message as mc
from rmq.common.message_id import create_message_id
from rmq.common.topics import SCHEDULE_TOPIC
from rmq.remoting.exceptions import RemotingCommandError
from rmq.store import (
    DefaultMessageStore,
    MessageExtBrokerInner,
    MessageStoreConfig,
    PutMessageStatus,
)
from rmq.store.message_codec import message_properties_to_string
from rmq.store.results import offset_msg_id

HOST = ("10.0.0.2", 10911)


def _config(root) -> MessageStoreConfig:
    return MessageStoreConfig(storePathRootDir=str(root), mappedFileSizeCommitLog=16 * 1024,
                              mappedFileSizeConsumeQueue=20 * 64, maxHashSlotNum=64, maxIndexNum=512)


def _messages(n: int) -> list[MessageExtBrokerInner]:
    out = []
    for i in range(n):
        props = {"KEYS": f"k{i} shared", "UNIQ_KEY": f"{i:032X}", "TAGS": "A" if i % 3 else "B"}
        if i % 7 == 3:
            props[mc.PROPERTY_DELAY_TIME_LEVEL] = "2"  # reput path: SCHEDULE_TOPIC
        if i % 11 == 5:
            props = {"UNIQ_KEY": f"{i:032X}"}  # no tags, no keys
        sys_flag = mc.TRANSACTION_PREPARED_TYPE if i % 13 == 4 else 0  # reput path: prepared
        out.append(MessageExtBrokerInner(
            topic="T", queue_id=i % 3, body=os.urandom(40 + i % 300), properties=props,
            properties_string=message_properties_to_string(props), sys_flag=sys_flag,
            born_timestamp=1_700_000_000_000, born_host=("10.0.0.1", 5000)))
    return out


def _fill(root, direct: bool) -> tuple[list, DefaultMessageStore]:
    arrivals: list = []
    store = DefaultMessageStore(_config(root), HOST,
                                message_arriving_listener=lambda *a: arrivals.append(a))
    assert store.load()
    store.start()
    if not direct:  # the reference: every record dispatched by the reput scan
        store._dispatch_put = lambda msg, ar: False
    for msg in _messages(300):
        assert store.put_message(msg).status is PutMessageStatus.PUT_OK
    return arrivals, store


def _cq_entries(store) -> dict:
    out = {}
    for topic, qs in sorted(store.consume_queue_table.items()):
        for qid in sorted(qs):
            n = store.get_max_offset_in_queue(topic, qid)
            out[(topic, qid)] = [qs[qid].read_entry(i) for i in range(n)]
    return out


@pytest.mark.timeout(60)
def test_direct_dispatch_equals_reput_scan(tmp_path):
    a_arr, a = _fill(tmp_path / "direct", True)
    b_arr, b = _fill(tmp_path / "reput", False)
    try:
        assert a.reput_from_offset == b.reput_from_offset == a.commit_log.get_max_offset()
        ea, eb = _cq_entries(a), _cq_entries(b)
        assert ea.keys() == eb.keys() and (SCHEDULE_TOPIC, 1) in ea
        for key in ea:
            if key[0] == SCHEDULE_TOPIC:  # tagsCode = delivery time, store times differ
                assert [e[:2] for e in ea[key]] == [e[:2] for e in eb[key]]
            else:
                assert ea[key] == eb[key]
        assert len(ea[("T", 0)]) > 50
        # arrivals: same topic/queue/next offset/tags code/message count/bytes
        strip = [(t, q, o, c, n, z) for t, q, o, c, _ts, n, z in a_arr if t != SCHEDULE_TOPIC]
        ref = [(t, q, o, c, n, z) for t, q, o, c, _ts, n, z in b_arr if t != SCHEDULE_TOPIC]
        assert strip == ref and len(strip) > 200
        # index: every key and unique key found the same way
        now = int(time.time() * 1000) + 60_000
        for i in (0, 1, 2, 12, 16, 299):
            ra = a.query_message("T", f"k{i}", 32, 0, now)
            rb = b.query_message("T", f"k{i}", 32, 0, now)
            assert [len(m) for m in ra.message_buffers] == [len(m) for m in rb.message_buffers]
            assert len(ra.message_buffers) == (0 if i % 11 == 5 else 1)
            ua = a.query_message_by_unique_key("T", f"{i:032X}")
            ub = b.query_message_by_unique_key("T", f"{i:032X}")
            assert (ua is None) == (ub is None)
            if ua is not None:
                assert ua.commit_log_offset == ub.commit_log_offset
        shared = [len(s.query_message("T", "shared", 1000, 0, now).message_buffers) for s in (a, b)]
        assert shared[0] == shared[1] > 30
    finally:
        a.shutdown()
        b.shutdown()


@pytest.mark.parametrize("host", [("10.0.0.2", 10911), ("127.0.0.1", 0), ("::1", 65535),
                                  ("fe80::1:2", 8080), ("::ffff:10.1.2.3", 10911)])
@pytest.mark.parametrize("offset", [0, 1, 123456789, 2**40 + 7, 2**63 - 1])
def test_offset_msg_id_equals_create_message_id(host, offset):
    assert offset_msg_id(host, offset) == create_message_id(host, offset)


def _reference_properties_string(props: dict) -> str:
    """The order rule written out plainly (sort on every call)."""
    cap = 16
    while len(props) > cap * 3 // 4:
        cap *= 2
    items = [(k, v) for k, v in props.items() if v is not None]

    def bucket(k: str) -> int:
        h = mc.java_string_hash(k) & 0xFFFFFFFF
        return (h ^ (h >> 16)) & (cap - 1)

    items.sort(key=lambda kv: bucket(kv[0]))
    return "\x02".join(f"{k}\x01{v}" for k, v in items)


_key = st.sampled_from(["TAGS", "KEYS", "UNIQ_KEY", "WAIT", "CLUSTER", "DELAY", "a", "b", "Aa", "BB",
                        "MSG_REGION", "TRACE_ON", "x" * 20]) | st.text(min_size=1, max_size=12)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(_key, st.text(max_size=10) | st.none()), max_size=40))
def test_cached_property_order_matches_hashmap_rule(pairs):
    props = dict(pairs)
    for _ in range(2):  # second call comes from the order cache
        assert message_properties_to_string(props) == _reference_properties_string(props)


def _v2(**over) -> dict:
    ext = {"a": "g", "b": "T", "c": "TBW102", "d": "4", "e": "3", "f": "0", "g": "1700000000000",
           "h": "0", "i": "TAGS\x01A", "j": "2", "k": "false", "l": "16", "m": "true", "n": "broker-a"}
    ext.update(over)
    return {k: v for k, v in ext.items() if v is not None}


def test_send_header_fast_path_and_errors():
    h = parse_send_header(_v2(), V2_KEYS)
    assert (h.producerGroup, h.topic, h.defaultTopic, h.defaultTopicQueueNums, h.queueId, h.sysFlag,
            h.bornTimestamp, h.flag, h.properties, h.reconsumeTimes, h.unitMode,
            h.maxReconsumeTimes, h.batch, h.bname) == (
        "g", "T", "TBW102", 4, 3, 0, 1700000000000, 0, "TAGS\x01A", 2, False, 16, True, "broker-a")
    v1 = dict(zip(V1_KEYS, (_v2()[k] for k in V2_KEYS), strict=True))
    assert parse_send_header(v1, V1_KEYS).bornTimestamp == 1700000000000
    for letter, name in (("d", "d"), ("e", "e"), ("g", "g"), ("h", "h")):
        with pytest.raises(RemotingCommandError, match=f"the custom field {name} is null"):
            parse_send_header(_v2(**{letter: None}), V2_KEYS)
        with pytest.raises(RemotingCommandError,
                           match=f"the custom field {name} is not a valid value: 'x1'"):
            parse_send_header(_v2(**{letter: "x1"}), V2_KEYS)
    # outside Java's Integer (Long for bornTimestamp) range: NumberFormatException in 4.9.8
    for letter, text in (("e", "2147483648"), ("f", "-2147483649"), ("h", "4294967296"),
                         ("d", "99999999999"), ("g", "9223372036854775808")):
        with pytest.raises(RemotingCommandError, match=f"the custom field {letter} is not a valid"):
            parse_send_header(_v2(**{letter: text}), V2_KEYS)
    h = parse_send_header(_v2(e="2147483647", g="-9223372036854775808"), V2_KEYS)
    assert (h.queueId, h.bornTimestamp) == (2**31 - 1, -(2**63))
    h = parse_send_header(_v2(j="zz", l=None), V2_KEYS)
    assert h.reconsumeTimes is None and h.maxReconsumeTimes is None
    assert parse_send_header(_v2(j="2147483648"), V2_KEYS).reconsumeTimes is None


def test_batch_msg_ids_equal_create_message_id():
    from array import array

    from rmq.store.results import AppendMessageResult, AppendMessageStatus

    sizes = array("i", [100, 2000, 37, 1])
    ar = AppendMessageResult(AppendMessageStatus.PUT_OK, 2**33 + 5, sum(sizes), 0, 0, 4, 0,
                             ("fe80::7", 10911), sizes)
    offs = [2**33 + 5, 2**33 + 105, 2**33 + 2105, 2**33 + 2142]
    assert ar.msg_id == ",".join(create_message_id(("fe80::7", 10911), o) for o in offs)
    assert AppendMessageResult(AppendMessageStatus.END_OF_FILE).msg_id == ""


@settings(max_examples=200, deadline=None)
@given(st.text(min_size=1, max_size=30))
def test_cached_tags_code_equals_java_hash(tags):
    from rmq.store.message_codec import tags_code

    assert tags_code(tags) == tags_code(tags) == mc.tags_string_to_code(tags)
