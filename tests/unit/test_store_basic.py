"""DefaultMessageStore with small files: puts, dispatch, reads, queries,
restarts (ASYNC_FLUSH unless a test says otherwise)."""

from __future__ import annotations

import os
import time

import pytest

from rmq.common.message import tags_string_to_code
from rmq.common.message_id import decode_message_id
from rmq.common.topics import SCHEDULE_TOPIC
from rmq.store import (
    BrokerRole,
    DefaultMessageStore,
    FlushDiskType,
    GetMessageStatus,
    MessageExtBatch,
    MessageExtBrokerInner,
    MessageStoreConfig,
    PutMessageStatus,
    StoreLockedError,
)
from rmq.store.message_codec import decode_message, decode_messages, message_properties_to_string

HOST = ("10.0.0.2", 10911)


def small_config(root, **kw) -> MessageStoreConfig:
    base = dict(storePathRootDir=str(root), mappedFileSizeCommitLog=32 * 1024, mappedFileSizeConsumeQueue=20 * 64,
                maxHashSlotNum=64, maxIndexNum=256)
    base.update(kw)
    return MessageStoreConfig(**base)


def make_msg(i: int, topic: str = "T", qid: int = 0, tags: str | None = None, body: bytes | None = None,
             extra: dict | None = None) -> MessageExtBrokerInner:
    props = {"KEYS": f"key{i} common", "UNIQ_KEY": f"{i:032X}", "TAGS": tags or ("A" if i % 2 else "B")}
    props.update(extra or {})
    return MessageExtBrokerInner(topic=topic, queue_id=qid, body=body if body is not None else f"body-{i}".encode() * 10,
                                 properties=props, properties_string=message_properties_to_string(props),
                                 born_timestamp=int(time.time() * 1000), born_host=("10.0.0.1", 5000))


@pytest.fixture
def store(tmp_path):
    s = DefaultMessageStore(small_config(tmp_path), HOST)
    assert s.load()
    s.start()
    yield s
    s.shutdown()


def test_layout_and_names(store, tmp_path):
    for i in range(200):
        assert store.put_message(make_msg(i, qid=i % 3)).status is PutMessageStatus.PUT_OK
    # store files only: the allocation service may be creating the next one
    # under a ".tmp" name (empty until it is sized and renamed)
    names = sorted(n for n in os.listdir(tmp_path / "commitlog") if not n.endswith(".tmp"))
    assert names[0] == "00000000000000000000" and names[1] == "00000000000000032768"
    assert all(os.path.getsize(tmp_path / "commitlog" / n) == 32768 for n in names)
    assert sorted(os.listdir(tmp_path / "consumequeue" / "T")) == ["0", "1", "2"]
    cq_files = sorted(os.listdir(tmp_path / "consumequeue" / "T" / "0"))
    assert cq_files[:2] == ["00000000000000000000", "00000000000000001280"]
    assert os.path.exists(tmp_path / "abort") and os.path.exists(tmp_path / "lock")


def test_put_and_get_message_statuses(store):
    results = [store.put_message(make_msg(i)) for i in range(100)]
    assert [r.append_result.logics_offset for r in results] == list(range(100))
    r0 = results[0].append_result
    assert decode_message_id(r0.msg_id) == (HOST, 0)
    g = store.get_message("g", "T", 0, 0, 10)
    assert g.status is GetMessageStatus.FOUND and len(g.message_buffers) == 10
    assert g.next_begin_offset == 10 and (g.min_offset, g.max_offset) == (0, 100)
    msgs = decode_messages(b"".join(g.message_buffers))
    assert [m.queue_offset for m in msgs] == list(range(10)) == g.message_queue_offsets
    assert all(isinstance(b, memoryview) for b in g.message_buffers)
    g.release()
    assert store.get_message("g", "T", 0, 100, 10).status is GetMessageStatus.OFFSET_OVERFLOW_ONE
    bad = store.get_message("g", "T", 0, 150, 10)
    assert bad.status is GetMessageStatus.OFFSET_OVERFLOW_BADLY and bad.next_begin_offset == 0
    assert store.get_message("g", "nope", 0, 0, 10).status is GetMessageStatus.NO_MATCHED_LOGIC_QUEUE
    # default in-memory cap: 32 messages per pull
    assert len(store.get_message("g", "T", 0, 0, 100).message_buffers) == 32


def test_tag_filter_and_no_match(store):
    for i in range(20):
        store.put_message(make_msg(i))
    code_a = tags_string_to_code("A")
    g = store.get_message("g", "T", 0, 0, 32, message_filter=lambda c: c == code_a)
    assert [m.properties["TAGS"] for m in decode_messages(b"".join(g.message_buffers))] == ["A"] * 10
    assert g.next_begin_offset == 20
    g = store.get_message("g", "T", 0, 0, 32, message_filter=lambda c: False)
    assert g.status is GetMessageStatus.NO_MATCHED_MESSAGE and g.next_begin_offset == 20


def test_batch_put(store):
    inner = bytearray()
    for i in range(5):
        body = f"b{i}".encode()
        props = message_properties_to_string({"UNIQ_KEY": f"{i:032X}", "TAGS": "X"}).encode()
        size = 20 + len(body) + 2 + len(props)
        inner += size.to_bytes(4, "big") + bytes(8) + (7).to_bytes(4, "big") + len(body).to_bytes(4, "big") + body
        inner += len(props).to_bytes(2, "big") + props
    batch = MessageExtBatch(topic="B", queue_id=1, body=bytes(inner), properties={"WAIT": "true"},
                            properties_string="WAIT\x01true\x02CLUSTER\x01C", born_timestamp=1)
    r = store.put_messages(batch)
    assert r.status is PutMessageStatus.PUT_OK and r.append_result.msg_num == 5
    ids = r.append_result.msg_id.split(",")
    assert len(ids) == 5
    m = store.look_message_by_offset(decode_message_id(ids[3])[1])
    assert m.body == b"b3" and m.flag == 7 and m.queue_offset == 3 and m.properties["CLUSTER"] == "C"
    assert store.get_max_offset_in_queue("B", 1) == 5
    bad = MessageExtBatch(topic="B", queue_id=1, body=b"\x00\x00\x00\x05junk")
    assert store.put_messages(bad).status is PutMessageStatus.MESSAGE_ILLEGAL


def test_size_limits(store, tmp_path):
    store.config.maxMessageSize = 1000
    assert store.put_message(make_msg(1, body=b"x" * 1001)).status is PutMessageStatus.MESSAGE_ILLEGAL
    long_topic = make_msg(1, topic="t" * 128)
    assert store.put_message(long_topic).status is PutMessageStatus.MESSAGE_ILLEGAL
    big_props = make_msg(1, extra={"P": "v" * 33000})
    assert store.put_message(big_props).status is PutMessageStatus.PROPERTIES_SIZE_EXCEEDED
    assert store.put_message(make_msg(2)).status is PutMessageStatus.PUT_OK


def test_delay_redirect_and_tags_code(store):
    m = make_msg(1, topic="Real", qid=2, extra={"DELAY": "3"})
    r = store.put_message(m)
    assert r.is_ok()
    assert store.get_max_offset_in_queue(SCHEDULE_TOPIC, 2) == 1
    g = store.get_message("g", SCHEDULE_TOPIC, 2, 0, 1)
    stored = decode_message(g.message_buffers[0])
    assert stored.properties["REAL_TOPIC"] == "Real" and stored.properties["REAL_QID"] == "2"
    cq = store.find_consume_queue(SCHEDULE_TOPIC, 2)
    assert cq.read_entry(0)[2] == stored.store_timestamp + 10_000


def test_queries_and_offsets(store):
    t0 = int(time.time() * 1000)
    for i in range(50):
        store.put_message(make_msg(i))
    q = store.query_message("T", "key7", 10, 0, 2**62)
    found = [decode_message(b) for b in q.message_buffers]
    assert [m.properties["KEYS"] for m in found] == ["key7 common"]
    q = store.query_message("T", "common", 100, 0, 2**62)
    assert len(q.message_buffers) == 50 and q.buffer_total_size == sum(map(len, q.message_buffers))
    assert store.query_message_by_unique_key("T", f"{9:032X}").queue_offset == 9
    assert store.get_earliest_message_time("T", 0) >= t0 - 1000
    assert store.get_offset_in_queue_by_time("T", 0, 0) == 0
    assert store.get_offset_in_queue_by_time("T", 0, 2**62) == 49
    ts = store.get_message_store_timestamp("T", 0, 20)
    assert store.get_message_store_timestamp("T", 0, store.get_offset_in_queue_by_time("T", 0, ts)) == ts
    assert store.get_commit_log_offset_in_queue("T", 0, 0) == 0


def test_restart_keeps_everything(tmp_path):
    cfg = small_config(tmp_path)
    s = DefaultMessageStore(cfg, HOST)
    assert s.load()
    s.start()
    for i in range(300):
        s.put_message(make_msg(i, qid=i % 2))
    max_phy = s.get_max_phy_offset()
    s.shutdown()
    assert not os.path.exists(tmp_path / "abort")
    s = DefaultMessageStore(cfg, HOST)
    assert s.load()
    s.start()
    assert s.get_max_phy_offset() == max_phy
    assert s.get_max_offset_in_queue("T", 1) == 150
    r = s.put_message(make_msg(999, qid=1))
    assert r.append_result.logics_offset == 150 and r.append_result.wrote_offset == max_phy or \
        r.append_result.wrote_offset % cfg.mappedFileSizeCommitLog == 0
    assert s.query_message_by_unique_key("T", f"{77:032X}").queue_offset == 38
    s.shutdown()


def test_second_store_on_same_directory_refused(store, tmp_path):
    other = DefaultMessageStore(small_config(tmp_path), HOST)
    with pytest.raises(StoreLockedError, match="already started"):
        other.load()


def test_slave_refuses_writes_and_shutdown_store_refuses(tmp_path):
    s = DefaultMessageStore(small_config(tmp_path, brokerRole="SLAVE"), HOST)
    assert s.config.brokerRole is BrokerRole.SLAVE
    assert s.load()
    s.start()
    assert s.put_message(make_msg(1)).status is PutMessageStatus.SERVICE_NOT_AVAILABLE
    s.shutdown()
    assert s.put_message(make_msg(1)).status is PutMessageStatus.SERVICE_NOT_AVAILABLE


async def test_async_put_sync_flush_and_arrival_listener(tmp_path):
    arrivals = []
    s = DefaultMessageStore(small_config(tmp_path, flushDiskType=FlushDiskType.SYNC_FLUSH), HOST,
                            message_arriving_listener=lambda *a: arrivals.append(a))
    assert s.load()
    s.start()
    try:
        for i in range(20):
            r = await s.async_put_message(make_msg(i))
            assert r.status is PutMessageStatus.PUT_OK
            assert s.commit_log.mfq.flushed_where >= r.append_result.wrote_offset + r.append_result.wrote_bytes
        assert len(arrivals) == 20
        topic, qid, next_offset, tags_code, _ts, nums, size = arrivals[3]
        assert (topic, qid, next_offset, tags_code, nums) == ("T", 0, 4, tags_string_to_code("A"), 1)
        assert sum(a[6] for a in arrivals) == s.get_max_phy_offset()  # every record's bytes once
    finally:
        s.shutdown()


def test_runtime_info_keys(store):
    store.put_message(make_msg(1))
    info = store.get_runtime_info()
    for key in ("commitLogDiskRatio", "consumeQueueDiskRatio", "commitLogMinOffset", "commitLogMaxOffset",
                "putTps", "getFoundTps", "getMissTps", "getTotalTps", "getTransferedTps", "putMessageTimesTotal",
                "putMessageDistributeTime", "bootTimestamp", "runtime", "putLatency99"):
        assert key in info, key
    assert info["putMessageTimesTotal"] == "1"
    assert len(info["putTps"].split()) == 3
    assert store.is_os_page_cache_busy() is False and store.lock_time_mills() == 0


def test_page_cache_busy_follows_the_put_lock_time(store):
    """Busy only while a put has held the lock longer than
    osPageCacheBusyTimeOutMills (1000 ms by default)."""
    now = time.time_ns() // 1_000_000
    store.commit_log.begin_time_in_lock = now - 5000
    assert store.is_os_page_cache_busy() is True
    store.commit_log.begin_time_in_lock = now - 200
    assert store.is_os_page_cache_busy() is False
    store.commit_log.begin_time_in_lock = 0
    assert store.is_os_page_cache_busy() is False
