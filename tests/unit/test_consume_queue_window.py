"""A consume queue's files are sparse and written within their reserved
blocks (``MappedFile``'s ``window``, ``ConsumeQueue.make_room``): a queue
holds on disk about what it has taken, as 4.9.8's sparse files do, and no
entry is ever written into a hole a full disk could not fill.  A full disk
is a refused reservation here (``posix_fallocate`` raising ENOSPC while the
disk has room, so remarks name a limit); the integration suite fills a real
tmpfs (test_store_disk_full.py)."""

from __future__ import annotations

import logging
import os

import pytest

from rmq.store import DefaultMessageStore, PutMessageStatus
from rmq.store.consume_queue import CQ_STORE_UNIT_SIZE, ROOM_MAX, ROOM_MIN, ConsumeQueue
from rmq.store.inspect import inspect_store
from rmq.store.mapped_file import OS_PAGE_SIZE
from tests.unit.test_store_basic import HOST, make_msg, small_config
from tests.unit.test_store_dispatch_room import queue_bodies

pytestmark = pytest.mark.timeout(60)

CQ_FILE = 20 * 30_000  # 146.5 pages: windows grow many times within one file
PER_PAGE = OS_PAGE_SIZE // CQ_STORE_UNIT_SIZE  # 204 entries in the first window


def open_store(root) -> DefaultMessageStore:
    s = DefaultMessageStore(small_config(root, mappedFileSizeConsumeQueue=CQ_FILE,
                                         mappedFileSizeCommitLog=1 << 20), HOST)
    assert s.load()
    s.start()
    return s


def on_disk(path) -> int:
    return os.stat(path).st_blocks * 512


def cq_files(root, topic: str, qid: int) -> list:
    d = root / "consumequeue" / topic / str(qid)
    return sorted(d.iterdir())


def test_a_queue_holds_on_disk_about_what_it_has_taken(tmp_path):
    s = open_store(tmp_path)
    try:
        for q in range(16):
            for i in range(3):
                assert s.put_message(make_msg(i, qid=q)).is_ok()
        for i in range(1_000):
            assert s.put_message(make_msg(i, topic="Busy")).is_ok()
        for q in range(16):
            (f,) = cq_files(tmp_path, "T", q)
            assert os.path.getsize(f) == CQ_FILE  # the file's length is 4.9.8's
            assert on_disk(f) <= OS_PAGE_SIZE
            mf = s.find_consume_queue("T", q).mfq.mapped_files[0]
            assert len(mf.view) == mf.reserved_to == ROOM_MIN
        (f,) = cq_files(tmp_path, "Busy", 0)
        held = 1_000 * CQ_STORE_UNIT_SIZE
        assert held < on_disk(f) <= 2 * held + ROOM_MIN
        assert queue_bodies(s, "Busy", 0) == [make_msg(i).body for i in range(1_000)]
    finally:
        s.shutdown()
    assert inspect_store(str(tmp_path)).errors == []


def test_a_window_grows_by_half_of_what_it_holds_up_to_its_file(tmp_path):
    cq = ConsumeQueue("W", 0, str(tmp_path), CQ_FILE)
    ends = []
    for i in range(CQ_FILE // CQ_STORE_UNIT_SIZE + 10):
        assert cq.put_message_position_info(1_000 + 100 * i, 100, 7, i)
        mf = cq.mfq.mapped_files[-1]
        if not ends or ends[-1] != (mf.file_from_offset, mf.reserved_to):
            ends.append((mf.file_from_offset, mf.reserved_to))
    first = [end for start, end in ends if start == 0]
    assert first[0] == ROOM_MIN and first[-1] == CQ_FILE
    steps = [(a, b - a) for a, b in zip(first, first[1:], strict=False)]
    # by half of what it held, a page at least, ROOM_MAX at most (the last: to the file's end)
    assert all(max(min(a // 2, ROOM_MAX), ROOM_MIN) <= step <= ROOM_MAX for a, step in steps[:-1])
    assert 0 < steps[-1][1] <= ROOM_MAX
    assert all(end % ROOM_MIN == 0 for end in first[:-1])  # whole pages
    assert ends[-1] == (CQ_FILE, ROOM_MIN)  # the next file starts small again
    assert cq.read_entry(CQ_FILE // CQ_STORE_UNIT_SIZE + 9)[0] == 1_000 + 100 * (
        CQ_FILE // CQ_STORE_UNIT_SIZE + 9)
    cq.shutdown()


def test_a_restart_finds_every_entry_and_writes_on(tmp_path):
    s = open_store(tmp_path)
    try:
        for i in range(PER_PAGE + 50):
            assert s.put_message(make_msg(i)).is_ok()
    finally:
        s.shutdown()
    s = open_store(tmp_path)
    try:
        mf = s.find_consume_queue("T", 0).mfq.mapped_files[0]
        # the window is what the file holds on disk: at least its entries
        assert len(mf.view) == mf.reserved_to >= (PER_PAGE + 50) * CQ_STORE_UNIT_SIZE
        for i in range(PER_PAGE + 50, 3 * PER_PAGE):
            assert s.put_message(make_msg(i)).is_ok()
        assert queue_bodies(s, "T", 0) == [make_msg(i).body for i in range(3 * PER_PAGE)]
    finally:
        s.shutdown()
    assert inspect_store(str(tmp_path)).errors == []


def test_a_window_that_cannot_grow_refuses_the_put_and_stores_nothing(tmp_path, no_space,
                                                                      caplog):
    s = open_store(tmp_path)
    try:
        for i in range(PER_PAGE):  # T-0's first window full
            assert s.put_message(make_msg(i)).is_ok()
        assert s.put_message(make_msg(0, qid=1)).is_ok()
        end = s.get_max_phy_offset()
        caplog.set_level(logging.INFO, "store")
        no_space["full"] = True
        for i in range(3):
            r = s.put_message(make_msg(PER_PAGE + i))
            assert r.status is PutMessageStatus.SERVICE_NOT_AVAILABLE
            # (the disk itself has room: the store says a limit refused it)
            assert r.remark.startswith("no room for the next entries of the consume queue "
                                       "file of T-0 (4.0 KiB needed, "), r.remark
            assert r.remark.endswith("a quota or file size limit refused it)"), r.remark
        assert s.get_max_phy_offset() == end  # nothing of it stored
        # T-1 has room in its window: it takes puts; a new queue has none
        assert s.put_message(make_msg(1, qid=1)).is_ok()
        assert s.put_message(make_msg(0, qid=2)).status is PutMessageStatus.SERVICE_NOT_AVAILABLE
        refusals = [r for r in caplog.records if "consume queue file of T-0" in r.getMessage()]
        assert len(refusals) == 1  # said once, not per put
        no_space["full"] = False
        assert s.put_message(make_msg(PER_PAGE)).is_ok()
        assert any("puts taken again" in r.getMessage() for r in caplog.records)
        assert queue_bodies(s, "T", 0) == [make_msg(i).body for i in range(PER_PAGE + 1)]
        assert queue_bodies(s, "T", 1) == [make_msg(i).body for i in range(2)]
    finally:
        s.shutdown()
    assert inspect_store(str(tmp_path)).errors == []


def test_dispatch_without_a_put_s_room_check_grows_the_window_or_stalls(tmp_path, no_space):
    """A replica's dispatch (HA, DLedger follower) writes entries no put of
    its own made room for: the queue grows its window itself, and on a full
    disk refuses the entry with ``no_space`` set (the reput stalls and
    retries it), having written nothing."""
    cq = ConsumeQueue("R", 0, str(tmp_path), CQ_FILE)
    for i in range(PER_PAGE):
        assert cq.put_message_position_info(100 * i, 100, 0, i)
    mf = cq.mfq.mapped_files[0]
    no_space["full"] = True
    assert not cq.put_message_position_info(100 * PER_PAGE, 100, 0, PER_PAGE)
    assert cq.mfq.no_space and mf.wrote_position == PER_PAGE * CQ_STORE_UNIT_SIZE
    assert cq.get_max_offset_in_queue() == PER_PAGE
    no_space["full"] = False
    assert cq.put_message_position_info(100 * PER_PAGE, 100, 0, PER_PAGE)
    assert cq.get_max_offset_in_queue() == PER_PAGE + 1
    # a first file made at a later offset: its filler goes within the window too
    late = ConsumeQueue("R", 1, str(tmp_path), CQ_FILE)
    at = CQ_FILE // CQ_STORE_UNIT_SIZE + 3 * PER_PAGE
    assert late.put_message_position_info(5_000, 100, 0, at)
    lmf = late.mfq.mapped_files[0]
    assert lmf.file_from_offset == CQ_FILE and lmf.reserved_to >= (3 * PER_PAGE + 1) * 20
    assert late.get_min_offset_in_queue() == at and late.read_entry(at)[0] == 5_000
    cq.shutdown()
    late.shutdown()


def test_a_partly_reserved_file_before_the_last_is_reserved_whole_at_start(tmp_path):
    """Files made ahead of their entries (a put's room check) can leave the
    file before the last partly reserved at a crash; a put's room check reads
    only the last file, so the store reserves the others whole when it starts."""
    cq = ConsumeQueue("P", 0, str(tmp_path), CQ_FILE)
    for i in range(10):
        assert cq.put_message_position_info(100 * i, 100, 0, i)
    assert cq.mfq.create_at(CQ_FILE) is not None  # made ahead, empty
    first = cq.mfq.mapped_files[0]
    assert first.reserved_to == ROOM_MIN
    assert cq.mfq.reserve_last()
    assert first.reserved_to == len(first.view) == CQ_FILE
    assert cq.mfq.mapped_files[1].reserved_to == 0  # the last one: as it is
    cq.shutdown()


def test_the_flusher_grows_a_window_once_three_quarters_are_written(tmp_path, no_space):
    cq = ConsumeQueue("K", 0, str(tmp_path), CQ_FILE)
    cq.keep_room()  # no entry yet: nothing to keep
    for i in range(3):
        assert cq.put_message_position_info(100 * i, 100, 0, i)
    mf = cq.mfq.mapped_files[0]
    cq.keep_room()
    assert mf.reserved_to == ROOM_MIN  # 60 bytes of 4 KiB written: left as it is
    for i in range(3, PER_PAGE * 3 // 4 + 1):
        assert cq.put_message_position_info(100 * i, 100, 0, i)
    no_space["full"] = True
    cq.keep_room()  # no room: left for the put that needs it
    assert mf.reserved_to == len(mf.view) == ROOM_MIN and not cq.mfq.no_space
    no_space["full"] = False
    cq.keep_room()
    assert mf.reserved_to == len(mf.view) == 2 * ROOM_MIN
    cq.shutdown()


def test_keeping_room_in_a_file_closed_meanwhile_does_nothing(tmp_path):
    """The flusher keeps room on its own thread while a truncation may
    close the queue's tail file: it must not raise (its service would end)."""
    cq = ConsumeQueue("C", 0, str(tmp_path), CQ_FILE)
    for i in range(PER_PAGE):
        assert cq.put_message_position_info(100 * i, 100, 0, i)
    mf = cq.tail_file
    assert mf.close()
    cq.keep_room()  # closed: left as it is
    assert mf.reserved_to == ROOM_MIN
