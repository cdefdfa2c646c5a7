"""The store's single put gives exactly what the general path gives: the
compiled ``append_single`` equals its twin, the lane twin's header fields
(``_parse_single``) equal ``parse_send_header``'s, and a store filled through
``put_single`` holds the same commit-log records (store timestamps aside),
consume-queue entries, index keys and arrival notifications as one filled
through ``put_message``."""

from __future__ import annotations

import os
import random
import struct
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rmq._fast import compiled_or_none
from rmq.broker.processor.send_support import V1_KEYS, V2_KEYS, _parse_single, parse_send_header
from rmq.common import message as mc
from rmq.common.message_id import socket_address_bytes
from rmq.store import (
    DefaultMessageStore,
    MessageExtBrokerInner,
    MessageStoreConfig,
    PutMessageStatus,
)
from rmq.store.message_codec import _send_properties, decode_message, fast_send_properties
from rmq.store.results import msg_id_host_hex
from rmq.store.single_put import _append_single, put_single
from rmq.store.stats import StoreStatsService
from rmq.testing.store import commit_log_records

_C_PUT = compiled_or_none("store_put")
HOST = ("10.0.0.2", 10911)

_num = st.one_of(st.integers(-(2**63), 2**63 - 1).map(str),
                 st.sampled_from(["", "-", "+1", " 1", "1_0", "٣", "0x1", "2147483648",
                                  "-2147483649", "9" * 19, "00012"]),
                 st.text(max_size=4))


@st.composite
def _ext(draw):
    keys = draw(st.sampled_from([V1_KEYS, V2_KEYS]))
    ext = {}
    for i, k in enumerate(keys):
        if draw(st.integers(0, 9)) == 0:
            continue  # missing
        ext[k] = draw(_num) if i in (3, 4, 5, 6, 7, 9, 11) else draw(st.text(max_size=12))
    return keys, ext


@settings(max_examples=400, deadline=None)
@given(_ext())
def test_parse_single_equals_the_header_parser(case):
    keys, ext = case
    got = _parse_single(ext, keys)
    if got is None:
        return
    h = parse_send_header(ext, keys)
    assert got == (h.topic, h.queueId, h.sysFlag, h.bornTimestamp, h.flag, h.properties,
                   h.reconsumeTimes or 0)


def test_parse_single_plain_header():
    ext = {"a": "g", "b": "T", "c": "TBW102", "d": "4", "e": "-1", "f": "0", "g": "1700000000000",
           "h": "7", "i": "TAGS\x01A"}
    want = ("T", -1, 0, 1700000000000, 7, "TAGS\x01A", 0)
    assert _parse_single(ext, V2_KEYS) == want
    for bad in ({"e": "1.0"}, {"h": "2147483648"}, {"j": "x"}, {"c": None}):
        e = {k: v for k, v in {**ext, **bad}.items() if v is not None}
        assert _parse_single(e, V2_KEYS) is None
    assert _parse_single(None, V2_KEYS) is None


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=600), st.text(max_size=40),
       st.text(min_size=1, max_size=70).map(str.encode),
       st.integers(0, 2**31 - 1), st.integers(-(2**63), 2**63 - 1), st.booleans(), st.booleans(),
       st.integers(0, 700), st.integers(-(2**63), 2**63 - 1))
def test_append_single_twin_equals_compiled(body, props, topic, queue_id, phy, v6_born, v6_store,
                                            pos, tags_code):
    born = socket_address_bytes(("::1", 5) if v6_born else ("10.1.2.3", 5))
    store = socket_address_bytes(("fe80::2", 7) if v6_store else ("10.0.0.2", 10911))
    sys_flag = (0x10 if v6_born else 0) | (0x20 if v6_store else 0) | 0x2
    args = (pos, 2048, 1000, queue_id, 3, 11, phy, sys_flag, 1_700_000_000_000, born,
            1_700_000_000_123, store, 2, body, topic, props)
    out = []
    for fn in (_append_single, _C_PUT.append_single if _C_PUT is not None else None):
        if fn is None:
            continue
        buf, cq = bytearray(2100), bytearray(60)
        r = fn(buf, *args, cq, 20, tags_code, msg_id_host_hex(HOST))
        out.append((r, bytes(buf), bytes(cq)))
    if len(out) == 2:
        assert out[0] == out[1]
    r, buf, cq = out[0]
    if r is None:
        assert buf == bytes(2100) and cq == bytes(60)
        return
    size, msg_id = r
    m = decode_message(buf, pos)
    assert (m.store_size, m.body, m.topic.encode(), m.queue_id, m.commit_log_offset) == \
        (size, body, topic, queue_id, phy)
    assert msg_id == msg_id_host_hex(HOST) + (phy & (2**64 - 1)).to_bytes(8, "big").hex().upper()
    assert struct.unpack_from(">qiq", cq, 20) == (phy, size, tags_code)


def test_append_single_bounds():
    born = socket_address_bytes(("10.1.2.3", 5))
    for fn in filter(None, (_append_single, _C_PUT and _C_PUT.append_single)):
        with pytest.raises(ValueError):  # record inside the limit but past the buffer
            fn(bytearray(50), 0, 1000, 1000, 0, 0, 0, 0, 0, 0, born, 0, born, 0, b"x", b"T", "",
               bytearray(20), 0, 0, "AB")
        with pytest.raises(ValueError):  # consume queue entry past its buffer
            fn(bytearray(1000), 0, 1000, 1000, 0, 0, 0, 0, 0, 0, born, 0, born, 0, b"x", b"T", "",
               bytearray(30), 20, 0, "AB")
        with pytest.raises(ValueError):  # host field / sysFlag mismatch
            fn(bytearray(1000), 0, 1000, 1000, 0, 0, 0, 0, 0x10, 0, born, 0, born, 0, b"x", b"T",
               "", bytearray(20), 0, 0, "AB")
        assert fn(bytearray(1000), 0, 1000, 10, 0, 0, 0, 0, 0, 0, born, 0, born, 0, b"x" * 11,
                  b"T", "", bytearray(20), 0, 0, "AB") is None  # body above maxMessageSize


# ---- whole store: fast path versus general path -------------------------------------
def _config(root) -> MessageStoreConfig:
    return MessageStoreConfig(storePathRootDir=str(root), mappedFileSizeCommitLog=64 * 1024,
                              mappedFileSizeConsumeQueue=20 * 64, maxHashSlotNum=64,
                              maxIndexNum=2048)


def _requests(n: int, seed: int) -> list[tuple]:
    rnd = random.Random(seed)
    out = []
    for i in range(n):
        parts = [f"UNIQ_KEY\x01{i:032X}", "WAIT\x01true"]
        if rnd.random() < 0.7:
            parts.append(f"TAGS\x01{rnd.choice('ABC')}")
        if rnd.random() < 0.5:
            parts.append(f"KEYS\x01k{i} shared")
        if rnd.random() < 0.2:
            parts.append(f"u{rnd.randrange(99)}\x01v{'é' if rnd.random() < 0.3 else ''}{i}")
        rnd.shuffle(parts)
        host = rnd.choice([("10.0.0.1", 5000), ("::1", 6000)])
        out.append((rnd.choice(["T", "Tö"]), i % 3, rnd.randrange(1 << 20),
                    os.urandom(rnd.randrange(0, 900)), "\x02".join(parts), rnd.choice([0, 0x1]),
                    1_700_000_000_000 + i, host, rnd.randrange(3)))
    return out


def _fill(root, fast: bool, reqs) -> tuple[list, DefaultMessageStore, int]:
    arrivals: list = []
    store = DefaultMessageStore(_config(root), HOST,
                                message_arriving_listener=lambda *a: arrivals.append(a))
    assert store.load()
    store.start()
    taken = 0
    for topic, qid, flag, body, text, sys_flag, born_ts, host, reconsume in reqs:
        props, stored, tags_code = _send_properties(text, "DefaultCluster")
        if fast:  # what send_fast hands over: no property map
            f_stored, f_code, _wait, special, keys, uniq = fast_send_properties(
                text, "DefaultCluster")
            assert not special and (f_stored, f_code) == (stored, tags_code)
            r = put_single(store, topic, topic.encode(), qid, flag, body, keys, uniq, f_stored,
                           f_code, sys_flag, born_ts, socket_address_bytes(host), reconsume)
            if r is not None:
                taken += 1
                continue
        msg = MessageExtBrokerInner(topic, qid, flag, body, props, stored, tags_code, sys_flag,
                                    born_ts, host, HOST, 0, reconsume)
        assert store.put_message(msg).status is PutMessageStatus.PUT_OK
    return arrivals, store, taken


@pytest.mark.timeout(90)
def test_put_single_equals_general_put(tmp_path):
    reqs = _requests(600, 9)
    a_arr, a, taken = _fill(tmp_path / "fast", True, reqs)
    b_arr, b, _ = _fill(tmp_path / "general", False, reqs)
    try:
        assert taken > 500  # the first message of each queue and each file roll go the long way
        assert commit_log_records(a) == commit_log_records(b) and len(commit_log_records(a)) > 600
        assert a.reput_from_offset == a.commit_log.get_max_offset() == b.reput_from_offset
        assert a.commit_log.topic_queue_table == b.commit_log.topic_queue_table
        # the zeros written ahead of the appends (CommitLog.zero_ahead) reach as far
        assert [(f.file_from_offset, f.zeroed_to) for f in a.commit_log.mfq.mapped_files] == \
            [(f.file_from_offset, f.zeroed_to) for f in b.commit_log.mfq.mapped_files]
        for topic, qs in b.consume_queue_table.items():
            for qid, cq in qs.items():
                n = cq.get_max_offset_in_queue()
                assert n == a.get_max_offset_in_queue(topic, qid) > 0
                assert [cq.read_entry(i) for i in range(n)] == \
                    [a.consume_queue_table[topic][qid].read_entry(i) for i in range(n)]
        # (topic, queue, next offset, tags code, store time, messages): no property map
        assert {len(x) for x in a_arr + b_arr} == {7}  # ..., messages, bytes
        assert [x[:4] + x[5:] for x in a_arr] == [x[:4] + x[5:] for x in b_arr]
        assert a.stats.put_message_times_total == b.stats.put_message_times_total == 600
        assert a.stats.put_message_size_total == b.stats.put_message_size_total
        assert a.stats.topic_put_nums == b.stats.topic_put_nums
        assert a.stats.topic_put_size == b.stats.topic_put_size
        assert sum(a.stats.put_latency) == sum(b.stats.put_latency) == 600
        now = int(time.time() * 1000) + 60_000
        for key in ("shared", "k5", "k77", f"{123:032X}"):
            for topic in ("T", "Tö"):
                ra = a.query_message(topic, key, 64, 0, now)
                rb = b.query_message(topic, key, 64, 0, now)
                assert [bytes(m)[:20] for m in ra.message_buffers] == \
                    [bytes(m)[:20] for m in rb.message_buffers]
                ra.release()
                rb.release()
    finally:
        a.shutdown()
        b.shutdown()


@pytest.mark.timeout(60)
def test_put_single_alternating_stores_write_each_its_own(tmp_path):
    """Puts alternating between two stores, and a store made after another
    is gone: each put lands in its own store (the compiled put keeps what it
    reads of a store once per store, not across stores)."""
    import gc

    born = socket_address_bytes(("10.0.0.1", 5000))
    stores = []
    for name in ("a", "b"):
        st = DefaultMessageStore(_config(tmp_path / name), HOST)
        assert st.load()
        st.start()
        msg = MessageExtBrokerInner("T", 0, 0, b"x", {}, "", 0, 0, 1, ("10.0.0.1", 5000),
                                    HOST, 0, 0)
        assert st.put_message(msg).status is PutMessageStatus.PUT_OK
        stores.append(st)
    a, b = stores
    try:
        for i in range(50):
            for st in (a, b) if i % 2 else (b, a):
                assert put_single(st, "T", b"T", 0, 0, b"m%d" % i, None, None, "", 0, 0, 1,
                                  born, 0) is not None
        assert commit_log_records(a) == commit_log_records(b)
        assert a.get_max_offset_in_queue("T", 0) == b.get_max_offset_in_queue("T", 0) == 51
    finally:
        a.shutdown()
        b.shutdown()
    del a, b, st, stores
    gc.collect()
    c = DefaultMessageStore(_config(tmp_path / "c"), HOST)
    assert c.load()
    c.start()
    try:
        msg = MessageExtBrokerInner("T", 0, 0, b"x", {}, "", 0, 0, 1, ("10.0.0.1", 5000),
                                    HOST, 0, 0)
        assert c.put_message(msg).status is PutMessageStatus.PUT_OK
        assert put_single(c, "T", b"T", 0, 0, b"y", None, None, "", 0, 0, 1, born, 0)[0] == 1
        assert c.get_max_offset_in_queue("T", 0) == 2
    finally:
        c.shutdown()


@pytest.mark.timeout(60)
def test_put_single_declines_without_side_effects(tmp_path):
    store = DefaultMessageStore(_config(tmp_path), HOST)
    assert store.load()
    store.start()
    try:
        props, stored, code = _send_properties("TAGS\x01A", "C")
        born = socket_address_bytes(("10.0.0.1", 1))
        args = ("T", b"T", 0, 0, b"x", None, None, stored, code, 0, 1, born, 0)
        assert put_single(store, *args) is None  # no consume queue yet
        msg = MessageExtBrokerInner("T", 0, 0, b"x", props, stored, code, 0, 1, ("10.0.0.1", 1),
                                    HOST)
        assert store.put_message(msg).is_ok()
        before = store.commit_log.get_max_offset()
        big = ("T", b"T", 0, 0, b"x" * (store.config.maxMessageSize + 1), None, None, stored,
               code, 0, 1, born, 0)
        assert put_single(store, *big) is None
        store.running_flags.make_logics_queue_error()
        assert put_single(store, *args) is None
        assert store.commit_log.get_max_offset() == before
        assert store.commit_log.topic_queue_table[("T", 0)] == 1
    finally:
        store.shutdown()


def test_put_single_queue_offsets_and_ids(tmp_path):
    store = DefaultMessageStore(_config(tmp_path), HOST)
    assert store.load()
    store.start()
    try:
        props, stored, code = _send_properties("", "C")
        born = socket_address_bytes(("10.0.0.1", 1))
        msg = MessageExtBrokerInner("Q", 1, 0, b"a", props, stored, code, 0, 1, ("10.0.0.1", 1),
                                    HOST)
        assert store.put_message(msg).is_ok()
        for i in range(1, 5):
            qoff, msg_id, phy, size = put_single(store, "Q", b"Q", 1, 0, b"b" * i, None, None,
                                                 stored, code, mc.MULTI_TAGS_FLAG, 1, born, 0)
            assert qoff == i
            m = store.look_message_by_offset(phy)
            assert (m.msg_id, m.store_size, m.body, m.queue_offset) == (msg_id, size, b"b" * i, i)
    finally:
        store.shutdown()


@pytest.mark.timeout(60)
async def test_wait_flush_under_sync_flush(tmp_path):
    import asyncio

    from rmq.store import FlushDiskType
    from rmq.store.single_put import wait_flush

    cfg = _config(tmp_path)
    cfg.flushDiskType = FlushDiskType.SYNC_FLUSH
    store = DefaultMessageStore(cfg, HOST)
    assert store.load()
    store.start()
    try:
        props, stored, code = _send_properties("", "C")
        msg = MessageExtBrokerInner("S", 0, 0, b"a", props, stored, code, 0, 1, ("10.0.0.1", 1),
                                    HOST)
        assert store.put_message(msg).is_ok()
        born = socket_address_bytes(("10.0.0.1", 1))
        _q, _id, phy, size = put_single(store, "S", b"S", 0, 0, b"b", None, None, stored, code,
                                        0, 1, born, 0)
        fut = asyncio.get_running_loop().create_future()
        assert wait_flush(store, phy + size, True, fut, lambda f, st: f.set_result(st))
        assert (await asyncio.wait_for(fut, 10)) is PutMessageStatus.PUT_OK
        assert store.commit_log.mfq.flushed_where >= phy + size
        assert not wait_flush(store, phy + size, False, None, None)  # no wait: only woken
    finally:
        store.shutdown()


def test_put_single_is_the_compiled_session_when_built():
    """The store's single put is the compiled session when the extension is
    built and not switched off (the tests above then compare it with the
    general put), else the Python twin."""
    from rmq._fast import NO_EXTENSIONS, compiled_or_none
    from rmq.store import single_put

    c = compiled_or_none("store_put")
    if NO_EXTENSIONS or c is None:
        assert single_put.put_single is single_put._put_single
    else:
        assert single_put.put_single is c.put_single


def _store_with_queue(root, stats: StoreStatsService | None = None) -> DefaultMessageStore:
    """A started store (with ``stats`` when given) whose queue T/0 holds one
    message stored the general way (a single put needs the queue made)."""
    store = DefaultMessageStore(_config(root), HOST)
    if stats is not None:
        store.stats = stats
    assert store.load()
    store.start()
    msg = MessageExtBrokerInner("T", 0, 0, b"x", {}, "", 0, 0, 1, ("10.0.0.1", 5000), HOST,
                                0, 0)
    assert store.put_message(msg).status is PutMessageStatus.PUT_OK
    return store


class _CountingStats(StoreStatsService):
    """Stats of another kind, which note every put they are told of."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple] = []

    def on_put_one(self, topic: str, size: int) -> None:
        self.calls.append((topic, size))
        super().on_put_one(topic, size)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("which", ["twin", pytest.param("compiled", marks=pytest.mark.compiled_only)])
def test_put_single_counts_stats_as_on_put_one(tmp_path, which):
    """Both puts count each put through the stats' ``on_put_one`` (the
    compiled one keeps the bound method once per store): the fields end as it
    leaves them, and stats of another kind hear of every put."""
    from rmq.store.single_put import _put_single

    put = _put_single if which == "twin" else _C_PUT.put_single
    born = socket_address_bytes(("10.0.0.1", 5000))
    store = _store_with_queue(tmp_path / "s")
    try:
        s = store.stats
        before = (s.put_message_times_total, s.put_message_size_total, dict(s.topic_put_nums),
                  dict(s.topic_put_size), list(s.put_latency))
        sizes = [put(store, "T", b"T", 0, 0, b"m" * i, None, None, "", 0, 0, 1, born, 0)[3]
                 for i in range(1, 6)]
        assert s.put_message_times_total == before[0] + 5
        assert s.put_message_size_total == before[1] + sum(sizes)
        assert s.topic_put_nums == {"T": before[2]["T"] + 5}
        assert s.topic_put_size == {"T": before[3]["T"] + sum(sizes)}
        assert s.put_latency == [before[4][0] + 5, *before[4][1:]]
    finally:
        store.shutdown()
    other = _store_with_queue(tmp_path / "o", _CountingStats())
    try:
        other.stats.calls.clear()
        r = put(other, "T", b"T", 0, 0, b"yy", None, None, "", 0, 0, 1, born, 0)
        assert other.stats.calls == [("T", r[3])]
    finally:
        other.shutdown()
