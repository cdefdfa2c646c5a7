"""enableConsumeQueueExt in the store, and the SQL92 bitmaps of enableCalcFilterBitMap:
entries hold ext addresses, units hold tags code, store time and the bloom
bits of the groups a message matched; pulls resolve the addresses and skip
entries whose bitmap lacks the group's bits."""

from __future__ import annotations

import os
import shutil

import pytest

from rmq.broker.config import BrokerConfig
from rmq.broker.consumer_filter_manager import ConsumerFilterManager
from rmq.broker.processor.pull import tag_filter
from rmq.client.heartbeat import build_subscription
from rmq.filter.bloom import BloomFilter
from rmq.filter.message_filter import BitmapFilter
from rmq.store import DefaultMessageStore
from rmq.store.consume_queue_ext import CqExtUnit, is_ext_addr
from rmq.store.results import GetMessageStatus
from tests.unit.test_store_basic import HOST, make_msg, small_config

pytestmark = pytest.mark.timeout(60)

SELECTOR = "a >= 10 AND a < 20"


def filter_manager(tmp_path, calc: bool = True) -> ConsumerFilterManager:
    bc = BrokerConfig(enableCalcFilterBitMap=calc)
    cfm = ConsumerFilterManager(bc, str(tmp_path))
    assert cfm.register("T", "g_sql", SELECTOR, "SQL92", 1)
    assert cfm.register("T", "g_other", "a < 3", "SQL92", 1)
    return cfm


def open_store(tmp_path, cfm: ConsumerFilterManager | None, **kw) -> DefaultMessageStore:
    store = DefaultMessageStore(small_config(tmp_path, enableConsumeQueueExt=True, **kw), HOST)
    if cfm is not None:
        store.bitmap_calculator = cfm.calc_bitmap
    assert store.load()
    store.start()
    return store


def put_numbered(store: DefaultMessageStore, count: int) -> None:
    for i in range(count):
        r = store.put_message(make_msg(i, extra={"a": str(i)}))
        assert r.status.name == "PUT_OK"


def offsets(store: DefaultMessageStore, message_filter, group: str = "g") -> list[int]:
    """The queue offsets a pull of queue T-0 returns, page by page."""
    out, offset = [], 0
    while True:
        g = store.get_message(group, "T", 0, offset, 8, None, message_filter)
        if g.status is GetMessageStatus.FOUND:
            out.extend(g.message_queue_offsets)
        g.release()
        if g.next_begin_offset == offset or g.status in (
                GetMessageStatus.OFFSET_OVERFLOW_ONE, GetMessageStatus.NO_MESSAGE_IN_QUEUE):
            return out
        offset = g.next_begin_offset


def bitmap_filter(cfm: ConsumerFilterManager, group: str = "g_sql") -> BitmapFilter:
    sub = build_subscription("T", SELECTOR if group == "g_sql" else "a < 3", "SQL92")
    f = cfm.consume_queue_filter("T", group, sub, from_request=False)
    assert f is not None
    return f


def test_entries_are_ext_addresses_with_bitmaps(tmp_path):
    cfm = filter_manager(tmp_path)
    cfm.get("T", "g_sql").bornTime = cfm.get("T", "g_other").bornTime = 0
    store = open_store(tmp_path, cfm)
    try:
        put_numbered(store, 30)
        cq = store.find_consume_queue("T", 0)
        assert cq.ext is not None
        assert os.path.isdir(os.path.join(str(tmp_path), "consumequeue_ext", "T", "0"))
        units = []
        for i in range(30):
            _phy, _size, tags = cq.read_entry(i)
            assert is_ext_addr(tags)
            units.append(cq.ext.get(tags))
        bloom = cfm.bloom
        sql, other = cfm.get("T", "g_sql").bloomFilterData, cfm.get("T", "g_other").bloomFilterData
        for i, unit in enumerate(units):
            assert unit.tags_code == (65 if i % 2 else 66)  # "A" / "B"
            assert unit.store_timestamp > 0 and len(unit.bitmap) == bloom.byte_length
            assert bloom.is_hit(sql, unit.bitmap) == (10 <= i < 20)
            assert bloom.is_hit(other, unit.bitmap) == (i < 3)
        assert offsets(store, bitmap_filter(cfm)) == list(range(10, 20))
        assert offsets(store, bitmap_filter(cfm, "g_other")) == [0, 1, 2]
        sub = build_subscription("T", "A", "TAG")
        assert offsets(store, tag_filter(sub)) == list(range(1, 30, 2))
        assert offsets(store, None) == list(range(30))
    finally:
        store.shutdown()


def test_messages_before_the_filter_was_born_all_match(tmp_path):
    """A group's bits were not in the bitmaps of messages stored before it
    registered, so those all pass the consume-queue step (4.9.8's isMsgInLive)."""
    cfm = filter_manager(tmp_path)
    store = open_store(tmp_path, cfm)
    try:
        put_numbered(store, 12)
        f = bitmap_filter(cfm)
        f.born_time = 1 << 60
        assert offsets(store, f) == list(range(12))
    finally:
        store.shutdown()


def test_rebuilt_queues_get_the_same_units(tmp_path):
    """Consume queues (and ext files) rebuilt from the commit log by the reput
    scan carry the same tags codes and bitmaps as those written by puts."""
    cfm = filter_manager(tmp_path)
    cfm.get("T", "g_sql").bornTime = 0
    store = open_store(tmp_path, cfm)
    put_numbered(store, 25)
    cq = store.find_consume_queue("T", 0)
    before = [cq.ext.get(cq.read_entry(i)[2]) for i in range(25)]
    store.shutdown()
    shutil.rmtree(tmp_path / "consumequeue")
    shutil.rmtree(tmp_path / "consumequeue_ext")
    store = open_store(tmp_path, cfm)
    try:
        store.do_reput()
        cq = store.find_consume_queue("T", 0)
        after = [cq.ext.get(cq.read_entry(i)[2]) for i in range(25)]
        assert after == before
        assert offsets(store, bitmap_filter(cfm)) == list(range(10, 20))
    finally:
        store.shutdown()


def test_without_calc_units_have_no_bitmap(tmp_path):
    cfm = filter_manager(tmp_path, calc=False)
    store = open_store(tmp_path, cfm)
    try:
        put_numbered(store, 6)
        cq = store.find_consume_queue("T", 0)
        unit = cq.ext.get(cq.read_entry(5)[2])
        assert unit.bitmap == b"" and unit.tags_code == 65
        assert offsets(store, bitmap_filter(cfm)) == list(range(6))  # nothing to skip on
    finally:
        store.shutdown()


def test_restart_recovers_ext_files(tmp_path):
    cfm = filter_manager(tmp_path)
    store = open_store(tmp_path, cfm)
    put_numbered(store, 20)
    store.shutdown()
    store = open_store(tmp_path, cfm)
    try:
        cq = store.find_consume_queue("T", 0)
        assert cq.ext.get(cq.read_entry(19)[2]).tags_code == 65
        put_numbered(store, 4)
        assert cq.get_max_offset_in_queue() == 24
        assert cq.resolve_tags(cq.read_entry(23)[2]) == 65
        assert cq.resolve_tags(42) == 42
    finally:
        store.shutdown()


def test_bitmap_filter_rules():
    bloom = BloomFilter(20, 32)
    data = bloom.generate("g#T")
    f = BitmapFilter(bloom, data, born_time=100)
    bits = bytearray(bloom.byte_length)
    assert f(123) is True  # a tags code alone says nothing
    assert f.matches_unit(None, None) is True
    assert f.matches_unit(1, CqExtUnit(1, 50, bytes(bits))) is True  # older than the filter
    assert f.matches_unit(1, CqExtUnit(1, 150, bytes(bits))) is False
    bloom.hash_to(data, bits)
    assert f.matches_unit(1, CqExtUnit(1, 150, bytes(bits))) is True
    assert f.matches_unit(1, CqExtUnit(1, 150, b"")) is True  # no bitmap
    assert f.matches_unit(1, CqExtUnit(1, 150, bytes(3))) is True  # another filter's length
    other = BloomFilter(10, 64)
    assert BitmapFilter(bloom, other.generate("g#T"), 100).matches_unit(
        1, CqExtUnit(1, 150, bytes(bloom.byte_length))) is True  # data of another filter


def test_filter_data_keeps_bloom_bits_and_drops_a_file_of_another_filter(tmp_path):
    cfm = filter_manager(tmp_path)
    data = cfm.get("T", "g_sql")
    assert data.bloomFilterData == cfm.bloom.generate("g_sql#T")
    obj = data.to_json_obj()["bloomFilterData"]
    assert obj == {"bitNum": 112, "bitPos": list(cfm.bloom.positions("g_sql#T"))}
    text = cfm.encode()
    same = ConsumerFilterManager(cfm.broker_config, str(tmp_path))
    same.decode(text)
    assert same.get("T", "g_sql").bloomFilterData == data.bloomFilterData
    other = ConsumerFilterManager(BrokerConfig(expectConsumerNumUseFilter=64), str(tmp_path))
    other.decode(text)
    assert other.get("T", "g_sql") is None  # another m: the old bitmaps mean nothing


def test_schedule_topic_entries_resolve_to_delivery_times(tmp_path):
    """A delayed message's entry in SCHEDULE_TOPIC_XXXX holds an ext address
    whose unit's tags code is the delivery time the schedule service reads."""
    from rmq.common.topics import SCHEDULE_TOPIC

    store = open_store(tmp_path, None)
    try:
        r = store.put_message(make_msg(1, extra={"DELAY": "2"}))  # level 2: 5 s
        assert r.status.name == "PUT_OK"
        cq = store.find_consume_queue(SCHEDULE_TOPIC, 1)
        phy, size, tags = cq.read_entry(0)
        assert is_ext_addr(tags)
        store_ts = store.commit_log.pickup_store_timestamp(phy, size)
        assert cq.resolve_tags(tags) == store_ts + 5000
    finally:
        store.shutdown()
