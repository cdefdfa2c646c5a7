"""A put is acknowledged only when its dispatch has the files it needs
(rmq.store.dispatch_room).  No room is made with RLIMIT_FSIZE below a file's
size: its reservation then fails with EFBIG, as a full disk fails it with
ENOSPC (both count as no room)."""

from __future__ import annotations

import contextlib
import logging
import os
import resource
import threading
from types import SimpleNamespace

import pytest

from rmq._fast import compiled_or_none
from rmq.client.codec import encode_batch
from rmq.client.message import Message
from rmq.common.message_id import socket_address_bytes
from rmq.common.topics import SCHEDULE_TOPIC
from rmq.store import DefaultMessageStore, GetMessageStatus, MessageExtBatch, PutMessageStatus
from rmq.store.checkpoint import StoreCheckpoint
from rmq.store.dispatch_room import DispatchRoom
from rmq.store.index import FLUSH_THREAD_NAME, IndexService
from rmq.store.inspect import inspect_store
from rmq.store.message_codec import decode_message
from rmq.store.single_put import put_single
from rmq.store.timer.checkpoint import TimerCheckpoint
from tests.unit.test_store_basic import HOST, make_msg, small_config

CQ_FILE = 20 * 64  # small_config: 64 entries a consume-queue file
INDEX_FILE = 40 + 64 * 4 + 256 * 20  # 64 slots, 256 entries
NA = PutMessageStatus.SERVICE_NOT_AVAILABLE


@contextlib.contextmanager
def file_size_limit(n: int):
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (n, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))


def open_store(root, **kw) -> DefaultMessageStore:
    s = DefaultMessageStore(small_config(root, **kw), HOST)
    assert s.load()
    s.start()
    return s


def queue_bodies(s: DefaultMessageStore, topic: str, qid: int) -> list[bytes]:
    out, off = [], 0
    for _ in range(1000):  # bounded
        g = s.get_message("g", topic, qid, off, 32)
        if g.status is not GetMessageStatus.FOUND:
            return out
        out.extend(decode_message(mv).body for mv in g.message_buffers)
        off = g.next_begin_offset
        g.release()
    raise AssertionError("queue never ended")


def test_no_consume_queue_file_refuses_the_put_and_stores_nothing(tmp_path, caplog):
    s = open_store(tmp_path)
    try:
        assert s.put_message(make_msg(0)).is_ok()  # T-0 has its file
        end = s.get_max_phy_offset()
        caplog.set_level(logging.INFO, "store")
        with file_size_limit(CQ_FILE - 1):
            for i in range(3):
                r = s.put_message(make_msg(10 + i, topic="U"))
                assert r.status is NA
                assert r.remark.startswith("no room for a new consume queue file of U-0 (1.2 KiB needed, ")
                assert r.remark.endswith("a quota or file size limit refused it)")
            assert s.get_max_phy_offset() == end  # nothing of it stored
            assert ("U", 0) not in s.commit_log.topic_queue_table
            assert not s.running_flags.is_disk_full()  # other queues go on
            assert s.put_message(make_msg(1)).is_ok()
        refusals = [r for r in caplog.records if "consume queue file of U-0" in r.getMessage()]
        assert len(refusals) == 1  # said once, not per put
        assert s.put_message(make_msg(13, topic="U")).is_ok()
        assert queue_bodies(s, "U", 0) == [make_msg(13).body]
        assert any("puts taken again" in r.getMessage() for r in caplog.records)
    finally:
        s.shutdown()
    assert inspect_store(str(tmp_path)).errors == []


def test_the_next_consume_queue_file_is_made_before_the_write(tmp_path):
    s = open_store(tmp_path)
    try:
        for i in range(64):  # the first file of T-0 full
            assert s.put_message(make_msg(i)).is_ok()
        with file_size_limit(CQ_FILE - 1):
            r = s.put_message(make_msg(64))
            assert r.status is NA and "consume queue file of T-0" in r.remark
        assert queue_bodies(s, "T", 0) == [make_msg(i).body for i in range(64)]
        assert s.put_message(make_msg(65)).is_ok()
        assert queue_bodies(s, "T", 0)[-1] == make_msg(65).body
        assert len(os.listdir(tmp_path / "consumequeue" / "T" / "0")) == 2
    finally:
        s.shutdown()


def test_a_batch_whose_entries_cross_into_a_new_file_needs_it(tmp_path):
    s = open_store(tmp_path)
    wire = encode_batch([Message("T", b"m%d" % i, properties={"UNIQ_KEY": f"B{i:031X}"})
                         for i in range(4)])

    def batch() -> MessageExtBatch:
        return MessageExtBatch("T", 0, wire, {}, "", 0, 1, ("10.0.0.1", 1), HOST, 0, 0)

    try:
        for i in range(62):
            assert s.put_message(make_msg(i)).is_ok()
        with file_size_limit(CQ_FILE - 1):
            r = s.put_messages(batch())  # entries 62..65: two of them in the second file
            assert r.status is NA and "consume queue file of T-0" in r.remark
        assert s.put_messages(batch()).is_ok()
        assert queue_bodies(s, "T", 0)[60:] == [make_msg(60).body, make_msg(61).body,
                                               b"m0", b"m1", b"m2", b"m3"]
    finally:
        s.shutdown()
    assert inspect_store(str(tmp_path)).errors == []


def test_a_delayed_put_needs_the_schedule_queue_and_the_real_queue(tmp_path):
    s = open_store(tmp_path)
    delayed = {"DELAY": "3"}
    try:
        assert s.put_message(make_msg(0)).is_ok()
        with file_size_limit(CQ_FILE - 1):
            r = s.put_message(make_msg(1, extra=delayed))
            assert r.status is NA and f"consume queue file of {SCHEDULE_TOPIC}-2" in r.remark
        assert s.put_message(make_msg(2, extra=delayed)).is_ok()  # the schedule queue's file made
        with file_size_limit(CQ_FILE - 1):
            r = s.put_message(make_msg(3, topic="V", extra=delayed))
            assert r.status is NA and "consume queue file of V-0" in r.remark
            assert s.put_message(make_msg(4, extra=delayed)).is_ok()  # both files there
        assert queue_bodies(s, SCHEDULE_TOPIC, 2) == [make_msg(2).body, make_msg(4).body]
    finally:
        s.shutdown()


def test_no_index_file_refuses_the_put(tmp_path):
    s = open_store(tmp_path)
    try:
        for i in range(84):  # 3 keys each: 252 of the file's 255 entries
            assert s.put_message(make_msg(i)).is_ok()
        with file_size_limit(INDEX_FILE - 1):
            assert s.put_message(make_msg(84)).is_ok()  # the last three
            r = s.put_message(make_msg(85))
            assert r.status is NA
            assert r.remark.startswith("no room for a new index file (5.3 KiB needed, ")
            assert s.put_message(make_msg(86)).status is NA
        assert s.put_message(make_msg(85)).is_ok()
        assert len(s.index_service.files) == 2
        assert s.reput_from_offset == s.get_max_phy_offset()
        found = s.query_message("T", "key85", 8, 0, 2**62)
        assert len(found.message_buffers) == 1
        found.release()
    finally:
        s.shutdown()


def test_an_index_file_made_ahead_holds_the_same_bytes(tmp_path):
    """The file a put makes ahead (the current one lacks room for its keys)
    ends up as the file dispatch would have made when the current one filled."""
    s = open_store(tmp_path / "store")
    try:
        for i in range(200):
            assert s.put_message(make_msg(i)).is_ok()
        assert len(s.index_service.files) == 3
        made = [bytes(f.mf.view) for f in s.index_service.files]
        cq = s.consume_queue_table["T"][0]
        records = []
        for i in range(200):
            m = s.look_message_by_offset(cq.read_entry(i)[0])
            records.append((m.commit_log_offset, m.store_timestamp, m.properties))
    finally:
        s.shutdown()
    checkpoint = StoreCheckpoint(str(tmp_path / "plain" / "checkpoint"))
    ix = IndexService(str(tmp_path / "plain" / "index"), 64, 256, checkpoint, 64)
    for phy, ts, props in records:  # the index built as dispatch built it, with no put ahead
        assert ix.build_index("T", phy, ts, props["KEYS"], props["UNIQ_KEY"])
    assert [bytes(f.mf.view) for f in ix.files] == made
    for t in threading.enumerate():  # the full files' flushes end before the files close
        if t.name == FLUSH_THREAD_NAME:
            t.join(10)
    ix.shutdown()
    checkpoint.shutdown()


def test_a_multi_dispatched_put_needs_each_extra_queue(tmp_path):
    s = open_store(tmp_path, enableMultiDispatch=True, enableLmq=True)

    def multi(i: int):
        return make_msg(i, topic="Parent", extra={"INNER_MULTI_DISPATCH": "%LMQ%a,%LMQ%b"})

    try:
        assert s.put_message(make_msg(0, topic="Parent")).is_ok()  # Parent-0 has its file
        end = s.get_max_phy_offset()
        with file_size_limit(CQ_FILE - 1):
            r = s.put_message(multi(1))
            assert r.status is NA and "consume queue file of %LMQ%a-0" in r.remark
        assert s.get_max_phy_offset() == end
        assert s.put_message(multi(2)).is_ok()
        assert queue_bodies(s, "%LMQ%b", 0) == [multi(2).body]
    finally:
        s.shutdown()


def test_room_is_kept_for_keys_not_dispatched_yet(tmp_path):
    """With a transient store pool dispatch runs after the commit: the keys of
    puts taken but not dispatched count against the index file's room."""
    s = open_store(tmp_path, transientStorePoolEnable=True, transientStorePoolSize=3,
                   commitIntervalCommitLog=600_000)
    try:
        assert s.put_message(make_msg(0)).is_ok()
        with file_size_limit(INDEX_FILE - 1):
            for i in range(1, 85):  # 85 x 3 keys: the first index file's 255 entries
                assert s.put_message(make_msg(i)).is_ok()
            assert s.get_max_offset_in_queue("T", 0) < 85  # not all dispatched yet
            r = s.put_message(make_msg(85))
            assert r.status is NA and "index file" in r.remark
        mfq = s.commit_log.mfq
        while not mfq.commit(0):
            pass
        s.do_reput()
        assert s.get_max_offset_in_queue("T", 0) == 85
        assert s.index_service.promised == 0
        assert len(queue_bodies(s, "T", 0)) == 85
    finally:
        s.shutdown()


def test_the_fast_single_put_leaves_a_full_index_file_to_the_general_put(tmp_path):
    s = open_store(tmp_path, mappedFileSizeConsumeQueue=20 * 1000)  # one consume-queue file
    born = socket_address_bytes(("10.0.0.1", 5000))
    stored = "KEYS\x01k common\x02UNIQ_KEY\x01" + "AB" * 16

    def fast(i: int):
        return put_single(s, "T", b"T", 0, 0, b"fast-%d" % i, "k common", "AB" * 16, stored,
                          0, 0, 1, born, 0)

    try:
        assert s.put_message(make_msg(0)).is_ok()  # T-0 exists: the fast path takes it
        for i in range(1, 85):
            assert fast(i) is not None
        with file_size_limit(INDEX_FILE - 1):
            assert fast(85) is None  # no index room: nothing done here
            r = s.put_message(make_msg(85))
            assert r.status is NA and "index file" in r.remark
        assert fast(85) is None
        assert s.put_message(make_msg(85)).is_ok()  # makes the next file ahead
        assert fast(86) is not None
        assert len(queue_bodies(s, "T", 0)) == 87
        assert len(s.index_service.files) == 2 and s.reput_from_offset == s.get_max_phy_offset()
        found = s.query_message("T", "key85", 8, 0, 2**62)
        assert len(found.message_buffers) == 1
        found.release()
    finally:
        s.shutdown()


def test_a_reads_reservation_at_once_is_what_each_sends_would_be(tmp_path):
    """``reserve_covered`` (a DLedger leader's read, once per queue): where no
    file has to be made, True and the index room kept that ``reserve`` of
    each send keeps; where one would, False with nothing kept or made (the
    caller then reserves send by send, and a full disk refuses as before)."""
    s = open_store(tmp_path, transientStorePoolEnable=True, transientStorePoolSize=3,
                   commitIntervalCommitLog=600_000)  # dispatch after commit: room is kept
    try:
        assert s.put_message(make_msg(0)).is_ok()
        room, ix = s.dispatch_room, s.index_service
        start = ix.promised
        for i in range(3):
            assert room.reserve("T", 0, 1 + i, 1, 2 + i)
        each = ix.promised - start
        assert room.reserve_covered([("T", 0, 1, 3)], 2 + 3 + 4)
        assert ix.promised - start == 2 * each
        kept = ix.promised
        files = sorted(os.listdir(tmp_path / "consumequeue" / "T" / "0"))
        assert room.reserve_covered([("T", 0, 1, 63)], 0)  # the first file's last place
        assert not room.reserve_covered([("T", 0, 1, 64)], 1)  # the next file's first
        assert not room.reserve_covered([("T", 0, 1, 1), ("U", 0, 0, 1)], 1)  # no queue yet
        assert not room.reserve_covered([("T", 0, 1, 1)], 10**6)  # no index room
        assert ix.promised == kept
        assert sorted(os.listdir(tmp_path / "consumequeue" / "T" / "0")) == files
        assert not (tmp_path / "consumequeue" / "U").exists()
    finally:
        s.shutdown()


_APPEND = compiled_or_none("dledger_append")


def _both_covered(room, keys: int) -> tuple:
    """The compiled index part of a read's room check and its twin
    (``DispatchRoom.keys_covered``), each from the same ``promised``:
    (their answers, the promised each left)."""
    ix = room.store.index_service
    before = ix.promised
    compiled = _APPEND.room_keys_covered(room, keys)
    after_compiled = ix.promised
    ix.promised = before
    twin = room.keys_covered(keys)
    return (compiled, after_compiled), (twin, ix.promised)


@pytest.mark.compiled_only
@pytest.mark.parametrize("later", [False, True])
def test_a_reads_index_room_compiled_is_its_twin(tmp_path, later: bool):
    """The index part of a DLedger read's room check in C (the index
    service's fields at their slots, the file's count in its mapped header)
    answers and promises as ``DispatchRoom.keys_covered``: at the index
    file's edge (count + keys + promised just under, at and over its
    entries), with dispatch later (``later``: the keys promised) or not,
    none asked, the index off, and no index file."""
    kw = dict(transientStorePoolEnable=True, transientStorePoolSize=3,
              commitIntervalCommitLog=600_000) if later else {}
    s = open_store(tmp_path, **kw)
    try:
        for i in range(40):  # 3 keys each
            assert s.put_message(make_msg(i)).is_ok()
        room, ix = s.dispatch_room, s.index_service
        count = ix.files[-1].header()[5]
        for promised in (0, 5, 100):
            edge = ix.max_index - count - promised
            for keys in (0, 1, edge - 1, edge, edge + 1, 10**6):
                ix.promised = promised
                compiled, twin = _both_covered(room, keys)
                assert compiled == twin
                assert compiled[0] is (keys <= edge)
                assert compiled[1] == promised + (keys if later and 0 < keys <= edge else 0)
        ix.promised = 0
        s.commit_log.dispatch_on_commit = True  # (a DLedger commit log's: dispatched later)
        assert _both_covered(room, 3) == ((True, 3), (True, 3))
        s.config.messageIndexEnable = False  # no index: room for any keys, nothing promised
        assert _both_covered(room, 10**6) == ((True, 3), (True, 3))
        s.config.messageIndexEnable = True
        files, ix.files = ix.files, []
        assert _both_covered(room, 1) == ((False, 3), (False, 3))
        ix.files = files
    finally:
        s.shutdown()


@pytest.mark.compiled_only
def test_a_reads_index_room_compiled_asks_the_twin_for_a_file_made_ahead(tmp_path):
    """With the file made ahead current (the spare) and for an index service
    that is not ``IndexService``'s slots, the compiled check asks
    ``keys_covered`` itself: the same answers."""
    s = open_store(tmp_path)
    try:
        for i in range(84):  # 252 of the first file's 255 entries
            assert s.put_message(make_msg(i)).is_ok()
        room, ix = s.dispatch_room, s.index_service
        assert ix.make_room(6) and ix._spare is ix.files[-1]
        asked = []
        room.keys_covered = lambda keys: asked.append(keys) or DispatchRoom.keys_covered(room, keys)
        for keys in (1, 3, 4, 255 + 3, 255 + 4, 600):
            compiled, twin = _both_covered(room, keys)
            assert compiled == twin
        assert asked == [1, 1, 3, 3, 4, 4, 258, 258, 259, 259, 600, 600]

        class _Index:  # (a stand-in without slots)
            def __init__(self, fits: bool) -> None:
                self.promised, self.fits = 0, fits

            def keys_fit(self, keys: int) -> bool:
                return self.fits

        for fits in (True, False):
            stand_in = _Index(fits)
            room.store = SimpleNamespace(config=s.config, index_service=stand_in,
                                         commit_service=object(), commit_log=s.commit_log)
            asked.clear()
            assert _both_covered(room, 7) == ((fits, 7 if fits else 0),) * 2
            assert asked == [7, 7]
    finally:
        s.shutdown()


@pytest.mark.parametrize("make", [StoreCheckpoint, TimerCheckpoint])
def test_a_new_checkpoint_has_its_block_on_disk(tmp_path, make):
    """A checkpoint is written through its mapping each flush: made sparse,
    its first flush after the disk filled wrote into a hole and the broker
    died of SIGBUS.  Its block is reserved when it is made."""
    path = tmp_path / "config" / "checkpoint"
    cp = make(str(path))
    assert os.stat(path).st_blocks * 512 >= 4096
    cp.flush()
    (cp.shutdown if isinstance(cp, StoreCheckpoint) else cp.close)()
