"""A batch appended in the store's append session gives exactly what the
general path gives: the compiled ``append_batch`` equals its twin (records,
consume-queue entries, index file, message ids), both equal ``write_batch`` +
``dispatch_run``, and a store filled through append sessions
(``AppendRun.append_batch``, as the send lane stores batches) holds the same
commit-log records (store timestamps aside), consume-queue entries and index
keys as one filled through ``put_messages``."""

from __future__ import annotations

import os
import random
import struct
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rmq._fast import compiled_or_none
from rmq.client.codec import encode_batch
from rmq.client.message import Message
from rmq.common.message_id import socket_address_bytes
from rmq.store import DefaultMessageStore, MessageExtBatch, MessageStoreConfig, PutMessageStatus
from rmq.store.batch_append import _append_batch
from rmq.store.dispatch import _dispatch_run
from rmq.store.index import index_file_size
from rmq.store.message_codec import (
    _batch_size,
    _write_batch,
    decode_message,
    message_properties_to_string,
    new_sizes_array,
    string_to_message_properties,
)
from rmq.store.results import msg_id_host_hex
from rmq.testing.store import commit_log_records

_C = compiled_or_none("store_batch")
HOST = ("10.0.0.2", 10911)
SLOTS, ENTRIES = 16, 400
_INNER = struct.Struct(">iiiii")


def _wire(records: list[tuple[int, bytes, bytes]]) -> bytes:
    """A SEND_BATCH_MESSAGE body of (flag, body, raw properties) records."""
    out = bytearray()
    for flag, body, props in records:
        out += _INNER.pack(22 + len(body) + len(props), 0, 0, flag, len(body))
        out += body + struct.pack(">h", len(props)) + props
    return bytes(out)


def _index(count: int = 1, end_phy: int = 0) -> bytearray:
    buf = bytearray(index_file_size(SLOTS, ENTRIES))
    struct.pack_into(">qqqqii", buf, 0, 0, 0, 0, end_phy, 0, count)
    return buf


_prop_part = st.sampled_from([
    b"TAGS\x01A", b"TAGS\x01tag-b", b"KEYS\x01k1 k2", b"KEYS\x01  k3  ", b"UNIQ_KEY\x01ABCDEF01",
    b"UNIQ_KEY\x01F00D", b"WAIT\x01true", b"x\x01y", b"\x01bad", b"bad\x01", b"", b"DELAY\x013",
    b"T\xc3\xa9\x01v", b"n\x01v\x01w",
])
_props = st.lists(_prop_part, max_size=5).map(lambda ps: b"\x02".join(ps)) | \
    st.lists(_prop_part, min_size=1, max_size=3).map(lambda ps: b"\x02".join(ps) + b"\x02")
_record = st.tuples(st.integers(-(2**31), 2**31 - 1), st.binary(max_size=300), _props)


def _run(fn, wire, batch_props, *, pos=8, limit=20_000, buf_len=None, v6=(False, False),
         cq_pos=20, cq_len=2000, index=True, topic=b"TopicA", phy=1_000_000, qoff=7,
         index_buf=None):
    born = socket_address_bytes(("::1", 5) if v6[0] else ("10.1.2.3", 5))
    store_host = ("fe80::2", 7) if v6[1] else HOST
    store = socket_address_bytes(store_host)
    sys_flag = (0x10 if v6[0] else 0) | (0x20 if v6[1] else 0) | 0x2
    buf, cq = bytearray(max(20_000, limit) if buf_len is None else buf_len), bytearray(cq_len)
    ix = (index_buf if index_buf is not None else _index()) if index else None
    r = fn(buf, pos, limit, wire, 3, sys_flag, 1_700_000_000_000, born, 1_700_000_000_123,
           store, 2, topic, batch_props, qoff, phy, cq, cq_pos, ix, SLOTS, ENTRIES,
           msg_id_host_hex(store_host))
    return r, bytes(buf), bytes(cq), bytes(ix) if ix is not None else None, sys_flag, born, store


@settings(max_examples=300, deadline=None)
@given(st.lists(_record, max_size=6), _props, st.integers(0, 40), st.booleans(), st.booleans(),
       st.booleans(), st.sampled_from([b"TopicA", b"T\xc3\xb6"]), st.sampled_from([20_000, 900]))
def test_append_batch_twin_equals_compiled(records, batch_props, pos, v6b, v6s, index, topic,
                                           limit):
    wire = _wire(records)
    py = _run(_append_batch, wire, batch_props, pos=pos, v6=(v6b, v6s), index=index, topic=topic,
              limit=limit)
    if _C is not None:
        assert _run(_C.append_batch, wire, batch_props, pos=pos, v6=(v6b, v6s), index=index,
                    topic=topic, limit=limit) == py
    r, buf, cq, ix, sys_flag, born, store = py
    if r is None:
        assert buf == bytes(len(buf)) and cq == bytes(len(cq))
        assert ix is None or ix == bytes(_index())
        return
    # the same bytes as the general path: write_batch, then the bulk dispatcher
    total, count = _batch_size(wire, sys_flag, len(topic), len(batch_props))
    ref, sizes = bytearray(len(buf)), new_sizes_array(count)
    assert _write_batch(ref, pos, wire, 3, sys_flag, 1_700_000_000_000, born, 1_700_000_000_123,
                        store, 2, topic, batch_props, 7, 1_000_000, sizes) == total
    assert bytes(ref) == buf
    ref_cq, ref_ix = bytearray(len(cq)), _index() if index else None
    # the reput starts at the record of the first queue offset: cq_base aligns the file
    d = _dispatch_run(buf, pos, pos + total, topic, 3, ref_cq, 20, 7 * 20 - 20, -1, ref_ix,
                      SLOTS, ENTRIES)
    assert d[0] == pos + total and d[2] == count
    assert bytes(ref_cq) == cq
    assert ix == (bytes(ref_ix) if index else None)
    ids = r[2].split(",")
    off = 1_000_000
    for i, size in enumerate(sizes):
        m = decode_message(buf, pos + off - 1_000_000)
        assert (m.store_size, m.queue_offset, m.msg_id) == (size, 7 + i, ids[i])
        off += size
    last = d[4]
    assert r == (total, count, r[2], last[1])


@settings(max_examples=20, deadline=None)
@given(st.lists(_record, min_size=60, max_size=90), _props)
def test_append_batch_long_batches(records, batch_props):
    """Past the records whose property scan the compiled first pass keeps."""
    records = [(f, b, p.replace(b"DELAY", b"D").replace("é".encode(), b"e"))
               for f, b, p in records]
    test_append_batch_twin_equals_compiled.hypothesis.inner_test(
        records, batch_props.replace(b"DELAY", b"D").replace("é".encode(), b"e"), 0, False,
        False, True, b"TopicA", 200_000)


def test_append_batch_declines_and_bounds():
    ok = _wire([(0, b"a", b"UNIQ_KEY\x01AA"), (1, b"bb", b"TAGS\x01X")])
    fns = [f for f in (_append_batch, _C and _C.append_batch) if f is not None]
    for fn in fns:
        plain, joined = _run(fn, ok, b"")[0], _run(fn, ok, b"CLUSTER\x01c")[0]
        assert (joined[0], joined[1]) == (plain[0] + 2 * len(b"\x02CLUSTER\x01c"), 2)
        for wire, bp, kw in (
            (b"", b"", {}),                                        # nothing to store
            (ok[:-1], b"", {}),                                    # truncated record
            (ok[:20], b"", {}),                                    # header only
            (_wire([(0, b"x", b"DELAY\x012")]), b"", {}),          # delayed
            (ok, b"DELAY\x011", {}),                               # delayed batch properties
            (_wire([(0, b"x", "k\x01é".encode())]), b"", {}),      # non-ASCII properties
            (ok, b"", {"topic": "Tö".encode()}),                  # non-ASCII topic
            (ok, b"", {"limit": 100}),                             # does not end by the limit
            (ok, b"", {"cq_len": 40}),                             # consume queue file full
            (ok, b"UNIQ_KEY\x01B", {"index_buf": _index(ENTRIES - 2)}),  # index file full
            (_wire([(0, b"x", b"p" * 32000)]), b"q" * 800, {}),    # properties too long
        ):
            r, buf, cq, *_ = _run(fn, wire, bp, **kw)
            assert r is None and not any(buf) and not any(cq), (wire[:30], bp, kw)
        with pytest.raises(ValueError):
            _run(fn, ok, b"", buf_len=100, limit=1000)  # inside the limit, past the buffer
        with pytest.raises(ValueError):
            _run(fn, ok, b"", index_buf=bytearray(100))
        born = socket_address_bytes(("10.1.2.3", 5))
        with pytest.raises(ValueError):  # host field / sysFlag mismatch
            fn(bytearray(999), 0, 999, ok, 0, 0x10, 0, born, 0, born, 0, b"T", b"", 0, 0,
               bytearray(99), 0, None, SLOTS, ENTRIES, "AB")


def test_append_batch_skips_index_below_end_phy():
    """Records the index file already covers (endPhyOffset) are not indexed
    again, as ``index_keys`` does."""
    wire = _wire([(0, b"a", b"UNIQ_KEY\x01AA"), (0, b"b", b"UNIQ_KEY\x01BB")])
    for fn in filter(None, (_append_batch, _C and _C.append_batch)):
        r, _b, _c, ix, *_ = _run(fn, wire, b"", index_buf=_index(1, 1_000_000 + 10))
        assert struct.unpack_from(">i", ix, 36)[0] == 2  # only the second record
        assert r[1] == 2


# ---- whole store: fast path versus general path -------------------------------------
def _config(root) -> MessageStoreConfig:
    return MessageStoreConfig(storePathRootDir=str(root), mappedFileSizeCommitLog=256 * 1024,
                              mappedFileSizeConsumeQueue=20 * 256, maxHashSlotNum=64,
                              maxIndexNum=600)


def _batches(n: int, seed: int) -> list[tuple]:
    rnd = random.Random(seed)
    out = []
    seq = 0
    for _ in range(n):
        msgs = []
        for _ in range(rnd.randrange(1, 12)):
            seq += 1
            props = {"UNIQ_KEY": f"{seq:032X}", "WAIT": "true"}
            if rnd.random() < 0.7:
                props["TAGS"] = rnd.choice("ABC")
            if rnd.random() < 0.4:
                props["KEYS"] = f"k{seq} shared"
            if rnd.random() < 0.05:
                props["u"] = "é"  # non-ASCII: the general path
            msgs.append(Message("T", os.urandom(rnd.randrange(0, 3000)), flag=rnd.randrange(9),
                                properties=props))
        batch_text = rnd.choice(["", "WAIT\x01false", "TAGS\x01Z"])
        host = rnd.choice([("10.0.0.1", 5000), ("::1", 6000)])
        out.append((rnd.randrange(3), encode_batch(msgs), batch_text, host, len(msgs)))
    return out


def _session_batch(store: DefaultMessageStore, qid: int, wire: bytes, stored: bytes,
                   born: bytes) -> tuple[int, str] | None:
    """One batch in its own append session, as the send lane appends one:
    (count, message ids), or None with nothing stored."""
    cl = store.commit_log
    run = cl.open_run(store.config.messageIndexEnable)
    if run is None:
        return None
    try:
        q = run.queue("T", qid)
        r = None if q is None else run.append_batch(
            q, wire, qid, cl.fast_sys_flag(0x2, born), 1_700_000_000_000, born, 1, b"T", stored)
        if r is not None:
            run.publish_queue(q)
    finally:
        run.close()
    return r


def _fill(root, fast: bool, batches) -> tuple[DefaultMessageStore, int]:
    """The store, and how many batches the append session took."""
    store = DefaultMessageStore(_config(root), HOST)
    assert store.load()
    store.start()
    taken = 0
    for qid, wire, text, host, _n in batches:
        props = string_to_message_properties(text)
        props["CLUSTER"] = "DefaultCluster"
        stored = message_properties_to_string(props)
        if fast and _session_batch(store, qid, wire, stored.encode(),
                                   socket_address_bytes(host)) is not None:
            taken += 1
            continue
        batch = MessageExtBatch("T", qid, wire, props, stored, 0x2, 1_700_000_000_000, host, HOST,
                                1, 0)
        assert store.put_messages(batch).status is PutMessageStatus.PUT_OK
    return store, taken


@pytest.mark.timeout(90)
def test_session_batches_equal_general_put(tmp_path):
    batches = _batches(300, 5)
    total = sum(b[4] for b in batches)
    a, taken = _fill(tmp_path / "fast", True, batches)
    b, _ = _fill(tmp_path / "general", False, batches)
    try:
        assert taken > 150  # first batch of a queue, rolls, full index files: the long way
        assert len(a.commit_log.mfq.mapped_files) > 3 and len(a.index_service.files) > 1
        assert commit_log_records(a) == commit_log_records(b) and len(commit_log_records(a)) > total
        assert a.reput_from_offset == a.commit_log.get_max_offset() == b.reput_from_offset
        assert a.commit_log.topic_queue_table == b.commit_log.topic_queue_table
        for qid, cq in b.consume_queue_table["T"].items():
            n = cq.get_max_offset_in_queue()
            assert n == a.get_max_offset_in_queue("T", qid) > 0
            assert [cq.read_entry(i) for i in range(n)] == \
                [a.consume_queue_table["T"][qid].read_entry(i) for i in range(n)]
        now = int(time.time() * 1000) + 60_000
        for key in ("shared", "k5", "k77", f"{123:032X}", f"{1000:032X}"):
            ra = a.query_message("T", key, 64, 0, now)
            rb = b.query_message("T", key, 64, 0, now)
            assert [bytes(m)[:40] for m in ra.message_buffers] == \
                [bytes(m)[:40] for m in rb.message_buffers]
            ra.release()
            rb.release()
    finally:
        a.shutdown()
        b.shutdown()


def test_session_batch_declines_without_side_effects(tmp_path):
    store = DefaultMessageStore(_config(tmp_path), HOST)
    assert store.load()
    store.start()
    cl = store.commit_log
    born = socket_address_bytes(("10.0.0.1", 1))
    wire = encode_batch([Message("T", b"x", properties={"UNIQ_KEY": "AA"})])
    try:
        assert _session_batch(store, 0, wire, b"", born) is None  # no consume queue
        batch = MessageExtBatch("T", 0, wire, {}, "", 0, 1, ("10.0.0.1", 1), HOST, 0, 0)
        assert store.put_messages(batch).is_ok()
        before = cl.get_max_offset()
        assert _session_batch(store, 0, wire[:-1], b"", born) is None
        store.running_flags.make_logics_queue_error()
        assert _session_batch(store, 0, wire, b"", born) is None
        assert cl.get_max_offset() == before
        assert cl.topic_queue_table[("T", 0)] == 1
        store.running_flags.flag_bits = 0
        count, ids = _session_batch(store, 0, wire + wire, b"", born)
        assert count == 2 and cl.topic_queue_table[("T", 0)] == 3
        m = store.look_message_by_offset(before)
        assert ids.split(",")[0] == m.msg_id and m.queue_offset == 1
        assert store.reput_from_offset == cl.get_max_offset() > before
    finally:
        store.shutdown()


# ---- a real broker: responses, pulls, long polling ----------------------------------
@pytest.mark.timeout(90)
async def test_broker_batches_fast_and_general(tmp_path):
    import asyncio

    from rmq.client.codec import decode_messages
    from rmq.common.codes import RequestCode, ResponseCode
    from rmq.common.message_id import decode_message_id
    from rmq.testing.cluster import Cluster
    from tests.integration.test_messaging_raw import pull, send

    c = Cluster(tmp_path)
    c.start_broker()
    try:
        await c.create_topic("BT", 2)
        offset = 0
        for n, delay in ((3, False), (5, False), (4, True), (6, False)):
            msgs = [Message("BT", b"m%d-%d" % (offset, i),
                            properties={"UNIQ_KEY": f"{offset + i:032X}", "TAGS": "t",
                                        **({"DELAY": "2"} if delay and i == 1 else {})})
                    for i in range(n)]
            r = await send(c, "BT", encode_batch(msgs), 1, "WAIT\x01true\x02",
                           code=RequestCode.SEND_BATCH_MESSAGE, batch=True)
            assert r.code == ResponseCode.SUCCESS, r.remark
            assert (r.ext_fields["queueId"], r.ext_fields["queueOffset"]) == ("1", str(offset))
            ids = r.ext_fields["msgId"].split(",")
            assert len(ids) == n
            got = decode_messages(bytes((await pull(c, "BT", 1, offset, max_nums=n)).body))
            assert [m.body for m in got] == [m.body for m in msgs]
            assert [m.offset_msg_id for m in got] == ids
            assert [decode_message_id(i)[1] for i in ids] == [m.commit_log_offset for m in got]
            assert all(m.properties["CLUSTER"] and m.properties["WAIT"] == "true" for m in got)
            offset += n
        # a held pull wakes when a fast-path batch arrives (the queue exists already)
        body = encode_batch([Message("BT", b"first", properties={"UNIQ_KEY": "AB"})] * 2)
        assert (await send(c, "BT", body, 0, "", code=RequestCode.SEND_BATCH_MESSAGE,
                           batch=True)).code == 0
        held = asyncio.ensure_future(pull(c, "BT", 0, 2, sys_flag=2 | 4, suspend_ms=20000,
                                          timeout_ms=30000))
        await asyncio.sleep(0.5)
        assert not held.done()
        body = encode_batch([Message("BT", b"late", properties={"UNIQ_KEY": "CD"})] * 2)
        r = await send(c, "BT", body, 0, "", code=RequestCode.SEND_BATCH_MESSAGE, batch=True)
        assert r.code == 0 and r.ext_fields["queueOffset"] == "2"
        r = await asyncio.wait_for(held, 10)
        assert r.code == ResponseCode.SUCCESS and decode_messages(bytes(r.body))[0].body == b"late"
    finally:
        await c.close()
