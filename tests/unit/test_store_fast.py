"""Consume-queue, index and mapped-file hot paths: compiled module and twin
compared byte for byte on the same inputs."""

from __future__ import annotations

import mmap
import os
import random
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rmq._fast import compiled_or_none
from rmq.store import consume_queue as cqm
from rmq.store import index as idx
from rmq.store import mapped_file as mfm

CQ = compiled_or_none("store_cq")
IDX = compiled_or_none("store_index")
MAPPED = compiled_or_none("store_mapped")


def _pairs(twin, comp, *names):
    impls = [{n: getattr(twin, "_" + n) for n in names}]
    if comp is not None:
        impls.append({n: getattr(comp, n) for n in names})
    return impls


@settings(max_examples=100, deadline=None)
@given(entries=st.lists(st.tuples(st.integers(0, 2**62), st.integers(1, 2**31 - 1),
                                  st.integers(-(2**63), 2**63 - 1)), max_size=30),
       filler=st.integers(0, 10))
def test_cq_entries_identical(entries, filler):
    outs = []
    for impl in _pairs(cqm, CQ, "cq_write", "cq_valid_bytes", "cq_filler"):
        buf = bytearray(20 * (len(entries) + filler + 2))
        impl["cq_filler"](buf, 0, 20 * filler)
        for i, (o, s, t) in enumerate(entries):
            impl["cq_write"](buf, 20 * (filler + i), o, s, t)
        assert impl["cq_valid_bytes"](buf, 0, len(buf)) == 20 * (filler + len(entries))
        assert impl["cq_valid_bytes"](buf, 20 * filler, len(buf) - 7) == min(20 * len(entries), ((len(buf) - 7 - 20 * filler) // 20) * 20)
        with pytest.raises(ValueError):
            impl["cq_write"](buf, len(buf) - 19, 0, 1, 0)
        outs.append(bytes(buf))
    assert all(o == outs[0] for o in outs)


def test_cq_write_buffer_kinds_identical():
    """A mapped file's memoryview (what the store passes), a bytearray, and the
    same errors for read-only buffers and out-of-range positions."""
    outs = []
    for impl in _pairs(cqm, CQ, "cq_write"):
        write = impl["cq_write"]
        with mmap.mmap(-1, 4096) as mm:
            view = memoryview(mm)
            write(view, 40, 123456789, 1100, -77)
            write(view[20:], 0, 1, 2, 3)
            outs.append(bytes(mm[:80]))
            view.release()
        for ro in (b"\0" * 40, memoryview(b"\0" * 40), memoryview(bytearray(40)).toreadonly()):
            with pytest.raises(TypeError):
                write(ro, 0, 1, 2, 3)
            with pytest.raises(ValueError):
                write(ro, 21, 1, 2, 3)
        with pytest.raises(ValueError):
            write(memoryview(bytearray(40)), -1, 1, 2, 3)
    assert all(o == outs[0] for o in outs)
    assert outs[0][20:40] == bytes.fromhex("0000000000000001" "00000002" "0000000000000003")


def test_index_put_get_identical_and_worked_example():
    slots, entries = 5_000_000, 20_000_000
    size = idx.index_file_size(slots, entries)
    outs = []
    for impl in _pairs(idx, IDX, "index_put", "index_get"):
        with mmap.mmap(-1, size) as mm:
            buf = memoryview(mm)
            # STORE_FORMAT.md 17.2: the UNIQ_KEY and then the KEYS token of message "T"
            k1 = idx.key_hash("T#0A0000013039123456780000EA600000")
            k2 = idx.key_hash("T#k1")
            assert (k1, k2) == (1787656574, 2539445)
            assert impl["index_put"](buf, slots, entries, k1, 0, 1700000000123)
            assert impl["index_put"](buf, slots, entries, k2, 0, 1700000000123)
            assert bytes(buf[:40]).hex().upper() == (
                "0000018BCFE5687B0000018BCFE5687B000000000000000000000000000000000000000200000003")
            assert bytes(buf[20000060:20000080]).hex().upper() == "6A8D797E" + "00" * 16
            assert bytes(buf[20000080:20000100]).hex().upper() == "0026BFB5" + "00" * 16
            assert int.from_bytes(buf[10626336:10626340], "big") == 1
            assert int.from_bytes(buf[10157820:10157824], "big") == 2
            assert impl["index_get"](buf, slots, entries, k2, 0, 2**62, 10) == [0]
            outs.append(bytes(buf[:40]) + bytes(buf[10157820:10626340]) + bytes(buf[20000060:20000100]))
            buf.release()
    assert all(o == outs[0] for o in outs)


def test_index_chains_full_file_and_bad_buffers():
    slots, entries = 7, 50
    size = idx.index_file_size(slots, entries)
    rnd = random.Random(5)
    ops = [(rnd.randrange(0, 40), rnd.randrange(0, 10**9), 1700000000000 + i * 700) for i in range(60)]
    outs = []
    for impl in _pairs(idx, IDX, "index_put", "index_get"):
        buf = bytearray(size)
        results = [impl["index_put"](buf, slots, entries, h, o, t) for h, o, t in ops]
        assert results == [True] * 49 + [False] * 11
        got = {h: impl["index_get"](buf, slots, entries, h, 0, 2**62, 100) for h in range(40)}
        for h in range(40):
            assert sorted(got[h]) == sorted(o for hh, o, _ in ops[:49] if hh == h)
        narrow = impl["index_get"](buf, slots, entries, ops[30][0], ops[30][2] - 1000, ops[30][2] + 500, 100)
        assert ops[30][1] in narrow
        with pytest.raises(ValueError):
            impl["index_put"](bytearray(10), slots, entries, 1, 1, 1)
        with pytest.raises(ValueError):
            impl["index_get"](bytearray(10), slots, entries, 1, 0, 1, 1)
        outs.append((bytes(buf), got))
    assert all(o == outs[0] for o in outs)


@pytest.mark.parametrize("impl", [mfm._sync_range] + ([MAPPED.sync_range] if MAPPED else []))
def test_sync_range_flushes_written_data(tmp_path, impl):
    path = tmp_path / "00000000000000000000"
    mf = mfm.MappedFile(str(path), 3 * 4096)
    mf.view[5000:5004] = b"abcd"
    impl(mf.mm, mf.fd, 4999, 5004)
    impl(mf.mm, mf.fd, 0, 0)
    with open(path, "rb") as f:
        f.seek(5000)
        assert f.read(4) == b"abcd"
    assert mf.close()
    assert os.path.getsize(path) == 3 * 4096


@pytest.mark.parametrize("impl", [mfm._page_cache_busy] + ([MAPPED.page_cache_busy] if MAPPED else []))
def test_page_cache_busy_rule(impl):
    now = time.time_ns() // 1_000_000
    assert impl(0, 1000) is False  # idle: beginTimeInLock = 0, the difference is the whole clock
    assert impl(now - 200, 1000) is False
    assert impl(now - 1500, 1000) is True
    assert impl(now - 9_999_000, 1000) is True
    assert impl(now - 10_000_500, 1000) is False
    assert impl(now + 60_000, 1000) is False  # a clock stepped back


@settings(max_examples=200, deadline=None)
@given(key=st.text(max_size=40))
def test_index_key_hash_identical(key):
    expect = idx._key_hash(key)
    assert 0 <= expect <= 0x7FFFFFFF
    if IDX is not None:
        assert IDX.key_hash(key) == expect


def test_index_key_hash_special_values():
    assert idx._key_hash("polygenelubricants") == 0  # hashCode == Integer.MIN_VALUE
    assert idx._key_hash("T#k1") == 2539445
    if IDX is not None:
        for k in ("polygenelubricants", "T#k1", "\U0001f600#x", "héllo"):
            assert IDX.key_hash(k) == idx._key_hash(k)


def _batch_log(n: int, tags: list[str], keys: bool = True, topic: bytes = b"Topic",
               queue_id: int = 3, raw: list[bytes] | None = None) -> bytes:
    """``n`` records of one queue; ``raw``: their property strings as given."""
    from rmq.common.message_id import socket_address_bytes
    from rmq.store import message_codec as codec

    wire = bytearray()
    for i in range(n):
        props = {"TAGS": tags[i % len(tags)]}
        if keys:
            props.update({"UNIQ_KEY": f"{i:032X}", "KEYS": f"a{i} b{i % 3}"})
        p = codec.message_properties_to_string(props).encode() if raw is None else raw[i]
        body = bytes([i % 256]) * (i % 50)
        wire += (22 + 20 - 22 + len(body) + 2 + len(p)).to_bytes(4, "big") + bytes(8) + (0).to_bytes(4, "big")
        wire += len(body).to_bytes(4, "big") + body + len(p).to_bytes(2, "big") + p
    host = socket_address_bytes(("10.0.0.1", 1))
    total, count = codec._batch_size(wire, 0, 5, 0)
    buf = bytearray(total + 40)
    codec._write_batch(buf, 0, bytes(wire), queue_id, 0, 1, host, 1700000000000, host, 0, topic, b"", 7, 5000,
                       codec.new_sizes_array(count))
    return bytes(buf)


DISPATCH = compiled_or_none("store_dispatch")


@pytest.mark.parametrize("keys", [True, False])
def test_dispatch_run_identical_and_consistent_with_per_record_path(keys):
    from rmq.store import dispatch as dm
    from rmq.store import message_codec as codec

    log = _batch_log(40, ["TagA", "TagB", ""], keys)
    limit = len(log) - 40
    impls = [dm._dispatch_run] + ([DISPATCH.dispatch_run] if DISPATCH else [])
    outs = []
    for impl in impls:
        cq = bytearray(20 * 64)
        ib = bytearray(idx.index_file_size(11, 200))
        res = impl(log, 0, limit, b"Topic", 3, cq, 140, 0, -1, ib if keys else None, 11, 200)
        outs.append((res, bytes(cq), bytes(ib)))
    assert all(o == outs[0] for o in outs)
    (pos, cq_pos, count, max_phy, last), cq, ib = outs[0]
    assert (pos, cq_pos, count) == (limit, 140 + 40 * 20, 40)
    # the same entries the per-record path computes
    p = 0
    for i in range(40):
        r = codec._scan_record(log, p, limit, True)
        assert cqm._ENTRY.unpack_from(cq, 140 + 20 * i) == (r[5], r[1], r[8])
        p += r[1]
    assert max_phy == 5000 + limit and last[0] == 46
    if keys:
        k = idx._key_hash(f"Topic#{5:032X}")
        assert len(idx._index_get(ib, 11, 200, k, 0, 2**62, 5)) >= 1
        assert idx._index_get(ib, 11, 200, idx._key_hash("Topic#b1"), 0, 2**62, 50)[:1] != []
    # stops: wrong queue, wrong expected CQ position, already dispatched, full index
    for impl in impls:
        assert impl(log, 0, limit, b"Topic", 4, bytearray(200), 0, 140, -1, None, 1, 1)[2] == 0
        assert impl(log, 0, limit, b"Topic", 3, bytearray(200), 0, 0, -1, None, 1, 1)[2] == 0
        assert impl(log, 0, limit, b"Topic", 3, bytearray(2000), 140, 0, 10**9, None, 1, 1)[2] == 0
        assert impl(log, 0, limit, b"Other", 3, bytearray(2000), 140, 0, -1, None, 1, 1)[2] == 0
        assert impl(log, 0, limit, b"Topic", 3, bytearray(200), 140, 0, -1, None, 1, 1)[2] == 3
        if keys:
            small = bytearray(idx.index_file_size(3, 10))
            assert impl(log, 0, limit, b"Topic", 3, bytearray(2000), 140, 0, -1, small, 3, 10)[2] == 3  # 9 entries
        with pytest.raises(ValueError):
            impl(log, 0, limit + 100, b"Topic", 3, bytearray(200), 140, 0, -1, None, 1, 1)


# property segments that look like the ones dispatch reads, or nearly
_SEGMENTS = st.lists(st.tuples(
    st.sampled_from(["TAGS", "KEYS", "UNIQ_KEY", "DELAY", "TAG", "TAGSS", "UNIQ_KE", "",
                     "\x01TAGS", "WAIT", "é"]),
    st.sampled_from(["\x01", "", "\x01\x01", "\x02"]),
    st.text(alphabet="ab1 \x01é", max_size=40)), max_size=6)


@settings(max_examples=300, deadline=None)
@given(segs=st.lists(_SEGMENTS, min_size=1, max_size=3), trailing=st.booleans())
def test_dispatch_run_reads_any_property_string_as_its_twin(segs, trailing):
    """Property strings of odd segments (names that nearly match, empty
    names or values, stray separators, duplicates, DELAY, non-ASCII bytes,
    keys across eight-byte words): the compiled run finds the same tags,
    keys and stops as its twin, and writes the same consume-queue and index
    bytes."""
    from rmq.store import dispatch as dm

    raw = [("\x02".join(n + sep + v for n, sep, v in seg) + ("\x02" if trailing else "")).encode()
           for seg in segs]
    log = _batch_log(len(raw), [""], False, raw=raw)
    impls = [dm._dispatch_run] + ([DISPATCH.dispatch_run] if DISPATCH else [])
    outs = []
    for impl in impls:
        cq = bytearray(20 * 10)
        ib = bytearray(idx.index_file_size(11, 200))
        res = impl(log, 0, len(log) - 40, b"Topic", 3, cq, 140, 0, -1, ib, 11, 200)
        outs.append((res, bytes(cq), bytes(ib)))
    assert all(o == outs[0] for o in outs)


@pytest.mark.parametrize("keys", [True, False])
def test_dispatch_run_over_dledger_entries_writes_what_a_plain_run_writes(keys):
    """Each record in an entry of its own behind DLedger's 48-byte header:
    the same consume-queue and index bytes as the records laid end to end,
    twin and compiled alike; a blank entry or an entry whose size is not its
    record's ends the run."""
    import struct

    from rmq.store import dispatch as dm
    from rmq.store import message_codec as codec

    log = _batch_log(40, ["TagA", "TagB", ""], keys)
    limit = len(log) - 40
    wrapped = bytearray()
    starts = []
    p = 0
    for i in range(40):
        size = codec._scan_record(log, p, limit, True)[1]
        starts.append(len(wrapped))
        wrapped += struct.pack(">iiqqqiiii", 1, size + 48, i, 1, len(wrapped), 0, 0, 0, size)
        wrapped += log[p:p + size]
        p += size
    impls = [dm._dispatch_run] + ([DISPATCH.dispatch_run] if DISPATCH else [])
    outs = []
    for impl in impls:
        for buf, hdr in ((log, 0), (wrapped, 48)):
            cq = bytearray(20 * 64)
            ib = bytearray(idx.index_file_size(11, 200))
            res = impl(buf, 0, limit if hdr == 0 else len(wrapped), b"Topic", 3, cq, 140, 0, -1,
                       ib if keys else None, 11, 200, hdr)
            outs.append((res[1:], bytes(cq), bytes(ib)))
            assert res[0] == (limit if hdr == 0 else len(wrapped))
    assert all(o == outs[0] for o in outs)
    blank = bytearray(wrapped)
    struct.pack_into(">i", blank, starts[10], -1)
    odd = bytearray(wrapped)
    struct.pack_into(">i", odd, starts[20] + 4, 7)
    for impl in impls:
        res = impl(blank, 0, len(blank), b"Topic", 3, bytearray(2000), 140, 0, -1, None, 1, 1, 48)
        assert (res[0], res[2]) == (starts[10], 10)
        res = impl(odd, 0, len(odd), b"Topic", 3, bytearray(2000), 140, 0, -1, None, 1, 1, 48)
        assert (res[0], res[2]) == (starts[20], 20)


def _records(log: bytes, n: int) -> list[bytes]:
    from rmq.store import message_codec as codec

    out, p = [], 0
    for _ in range(n):
        size = codec._scan_record(log, p, len(log), True)[1]
        out.append(log[p:p + size])
        p += size
    return out


@pytest.mark.parametrize("keys", [True, False])
@pytest.mark.parametrize("header", [0, 48])
def test_dispatch_walk_writes_each_queue_as_its_own_run_does(keys, header):
    """Records of three queues interleaved (in DLedger entries or end to
    end): the walk writes every queue's entries and the index as a run over
    that queue's records alone would, twin and compiled alike, and stops
    where ``queue_of`` declines a queue."""
    import struct

    from rmq.store import dispatch as dm

    queues = [(b"Topic", 3), (b"Topic", 1), (b"Other", 0)]
    logs = [_batch_log(20, ["TagA", "TagB", ""], keys, t, q) for t, q in queues]
    recs = [_records(log, 20) for log in logs]
    buf = bytearray()
    starts = []
    for i in range(20):
        for r in recs:
            starts.append(len(buf))
            if header:
                buf += struct.pack(">iiqqqiiii", 1, len(r[i]) + 48, len(starts), 1, len(buf), 0, 0,
                                   0, len(r[i]))
            buf += r[i]
    buf = bytes(buf)
    impls = [dm._dispatch_walk] + ([DISPATCH.dispatch_walk] if DISPATCH else [])
    outs = []
    for impl in impls:
        cqs: dict = {}

        def queue_of(topic, qid, cqs=cqs):
            cq = cqs[(topic, qid)] = bytearray(20 * 64)
            return (topic, qid), cq, 140, 0, -1

        ib = bytearray(idx.index_file_size(11, 400))
        pos, done = impl(buf, 0, len(buf), queue_of, ib if keys else None, 11, 400, header)
        outs.append((pos, done, {k: bytes(v) for k, v in cqs.items()}, bytes(ib)))
    assert all(o == outs[0] for o in outs)
    pos, done, cqs, ib = outs[0]
    assert pos == len(buf) and [d[0] for d in done] == queues
    for (topic, qid), log in zip(queues, logs, strict=True):
        cq = bytearray(20 * 64)
        dm._dispatch_run(log, 0, len(log) - 40, topic, qid, cq, 140, 0, -1, None, 1, 1)
        assert cqs[(topic, qid)] == bytes(cq)
        (entry,) = [d for d in done if d[0] == (topic, qid)]
        assert entry[1:4] == (140 + 20 * 20, 20, 5000 + len(log) - 40)
        assert entry[4][0] == 26 and entry[5] == len(log) - 40
    for impl in impls:  # a queue declined: the walk stops at its first record
        def no_other(topic, qid):
            return None if topic == b"Other" else ((topic, qid), bytearray(2000), 140, 0, -1)

        pos, done = impl(buf, 0, len(buf), no_other, None, 1, 1, header)
        assert pos == starts[2] and [d[2] for d in done] == [1, 1]
        with pytest.raises(ValueError):
            impl(buf, 0, len(buf) + 1, no_other, None, 1, 1, header)
