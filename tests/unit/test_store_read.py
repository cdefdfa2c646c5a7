"""QueueScan (the consume-queue walk of getMessage): the compiled
``rmq._fast.store_read`` against its twin in ``rmq.store.reader``, and the
runs a real store hands to pulls."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rmq._fast import compiled_or_none
from rmq.store import DefaultMessageStore, reader
from rmq.store.consume_queue import FILLER_SIZE
from rmq.store.message_codec import decode_message
from rmq.store.results import GetMessageStatus

FAST = compiled_or_none("store_read")
TWIN = reader._QueueScan
CLASSES = [TWIN] + ([FAST.QueueScan] if FAST is not None else [])
ENTRY = struct.Struct(">qiq")
FILE_SIZE = 4096


def cq_bytes(entries: list[tuple[int, int, int]]) -> bytes:
    return b"".join(ENTRY.pack(*e) for e in entries)


class Log:
    """A commit log of ``FILE_SIZE`` files with a readable end per file."""

    def __init__(self, readable: dict[int, int]) -> None:
        self.files = {start: memoryview(bytes((start // 7 + i) % 251 for i in range(FILE_SIZE)))
                      for start in readable}
        self.readable = readable

    def run(self, cls, cq: bytes, offset: int, limit: int, **kw):
        """Drive a scan to its end as ``_read_queue`` does."""
        args = dict(max_nums=32, max_phy=3 * FILE_SIZE, memory_limit=10 * FILE_SIZE,
                    mem_bytes=256 * 1024, mem_count=32, disk_bytes=64 * 1024, disk_count=8,
                    max_bytes=-1, message_filter=None)
        args.update(kw)
        scan = cls(offset, args["max_nums"], args["max_phy"], args["memory_limit"],
                   args["mem_bytes"], args["mem_count"], args["disk_bytes"], args["disk_count"],
                   args["max_bytes"], args["message_filter"])
        view, start, end = None, 0, 0
        rounds = 0
        while scan.scan(cq, limit, view, start, end) == reader.NEED_FILE:
            rounds += 1
            off, size = scan.pending_offset, scan.pending_size
            fstart = off - off % FILE_SIZE
            f = self.files.get(fstart)
            if f is not None and size >= 0 and off + size <= fstart + self.readable[fstart]:
                view, start, end = f[:self.readable[fstart]], fstart, fstart + self.readable[fstart]
            else:
                scan.skip_missing(fstart + FILE_SIZE)
        return (scan.status, scan.count, scan.total, scan.pos, scan.max_phy_pulling,
                scan.next_phy_file_start, [bytes(r) for r in scan.runs], list(scan.run_offsets),
                list(scan.run_counts), list(scan.sizes()), rounds)


def adjacent(start: int, sizes: list[int]) -> list[tuple[int, int, int]]:
    out, off = [], start
    for s in sizes:
        out.append((off, s, s % 5))
        off += s
    return out


@pytest.mark.parametrize("cls", CLASSES)
def test_adjacent_records_make_one_run(cls):
    log = Log({0: FILE_SIZE})
    cq = cq_bytes(adjacent(100, [64] * 10))
    status, count, total, pos, *_rest = got = log.run(cls, cq, 7, len(cq))
    assert (status, count, total, pos) == (0, 10, 640, 200)
    runs, offsets, counts, sizes = got[6], got[7], got[8], got[9]
    assert runs == [bytes(log.files[0][100:740])] and offsets == [7] and counts == [10]
    assert sizes == [64] * 10


@pytest.mark.parametrize("cls", CLASSES)
def test_gaps_split_runs_and_limits_stop(cls):
    log = Log({0: FILE_SIZE})
    entries = [(0, 50, 1), (50, 50, 2), (200, 30, 1), (230, 30, 1), (300, 10, 2)]
    cq = cq_bytes(entries)
    got = log.run(cls, cq, 0, len(cq), max_nums=4)
    assert got[1] == 4 and got[7] == [0, 2] and got[8] == [2, 2]
    assert got[6] == [bytes(log.files[0][0:100]), bytes(log.files[0][200:260])]
    odd = log.run(cls, cq, 0, len(cq), message_filter=lambda t: t == 1)
    assert odd[7] == [0, 2] and odd[8] == [1, 2] and odd[1] == 3
    by_bytes = log.run(cls, cq, 0, len(cq), mem_bytes=120)
    assert by_bytes[1] == 2 and by_bytes[3] == 40


@pytest.mark.parametrize("cls", CLASSES)
def test_missing_file_and_filler(cls):
    log = Log({FILE_SIZE: 1000})
    entries = [(10, 20, 0), (30, 20, 0), (FILE_SIZE, 0, 0), (FILE_SIZE, 100, 0),
               (FILE_SIZE + 100, FILLER_SIZE, 0), (FILE_SIZE + 100, 100, 0),
               (FILE_SIZE + 950, 100, 0)]
    cq = cq_bytes(entries)
    got = log.run(cls, cq, 0, len(cq))
    # file 0 is gone: its entries are skipped up to the next file; the filler
    # splits the run (queue offsets must stay consecutive within a run); the
    # last record lies beyond the readable end
    assert got[0] == 0 and got[1] == 3 and got[8] == [2, 1] and got[7] == [2, 5]
    assert got[9] == [0, 100, 100] and got[3] == 7 * 20 and got[5] == 2 * FILE_SIZE
    empty = Log({})
    gone = empty.run(cls, cq, 0, len(cq))
    assert gone[0] == 2 and gone[1] == 0


@given(st.lists(st.tuples(st.integers(0, 3 * FILE_SIZE + 64), st.sampled_from(
    [0, 1, 40, 100, 700, -5, FILLER_SIZE]), st.integers(0, 3)), max_size=60),
    st.integers(0, 40), st.integers(0, 1300), st.booleans(), st.integers(-1, 900))
@settings(max_examples=300, deadline=None)
def test_compiled_matches_twin(entries, max_nums, limit, filtered, max_bytes):
    if FAST is None:
        pytest.fail("rmq._fast.store_read is not built")
    entries.sort(key=lambda e: e[0])
    log = Log({0: FILE_SIZE, FILE_SIZE: 2000, 3 * FILE_SIZE: FILE_SIZE})
    cq = cq_bytes(entries)
    kw = dict(max_nums=max_nums, max_bytes=max_bytes, max_phy=2 * FILE_SIZE,
              memory_limit=FILE_SIZE, mem_count=9, disk_count=3, mem_bytes=3000,
              disk_bytes=1500, message_filter=(lambda t: t != 2) if filtered else None)
    assert log.run(FAST.QueueScan, cq, 5, limit, **kw) == log.run(TWIN, cq, 5, limit, **kw)


@pytest.mark.compiled_only
def test_compiled_is_built():
    assert FAST is not None


def test_store_pull_runs(tmp_path):
    """Records of two queues written interleaved, then in a row: the views of
    a get are the runs of adjacent records, and the per-message views cut from
    them are exactly the records."""
    from tests.unit.test_store_basic import HOST, make_msg, small_config

    store = DefaultMessageStore(small_config(tmp_path), HOST)
    assert store.load()
    store.start()
    try:
        for i in range(6):
            store.put_message(make_msg(i, qid=i % 2))
        for i in range(5):
            store.put_message(make_msg(10 + i, qid=0))
        g = store.get_message("g", "T", 0, 0, 32)
        assert g.status is GetMessageStatus.FOUND and g.message_count == 8
        assert g.run_counts == [1, 1, 1, 5] and g.run_offsets == [0, 1, 2, 3]
        assert b"".join(g.body_views) == b"".join(g.message_buffers)
        assert [decode_message(b).queue_offset for b in g.message_buffers] == \
            g.message_queue_offsets == list(range(8))
        assert g.buffer_total_size == sum(map(len, g.body_views))
        g.release()
        assert g.message_count == 0 and g.body_views == []
    finally:
        store.shutdown()


def _filled_store(tmp_path) -> DefaultMessageStore:
    """A started store whose small commit-log and consume-queue files hold 300
    messages of topic T: queues 0-2 in turn, then 100 more in queue 0."""
    from tests.unit.test_store_basic import HOST, make_msg, small_config

    store = DefaultMessageStore(small_config(tmp_path, accessMessageInMemoryMaxRatio=1), HOST)
    assert store.load()
    store.start()
    for i in range(300):
        store.put_message(make_msg(i, qid=i % 3 if i < 200 else 0, body=bytes(i % 200)))
    return store


def _read(fn, store, queue_id: int, offset: int, max_nums: int, message_filter) -> tuple:
    """Everything ``read_queue`` (``fn``) leaves in a fresh result."""
    from rmq.store.results import GetMessageResult

    cq = store._existing_cq("T", queue_id)
    r = GetMessageResult()
    fn(store, cq, r, offset, max_nums, None, message_filter, store.commit_log.get_max_offset())
    return (r.status, r.next_begin_offset, [bytes(v) for v in r.body_views], r.run_offsets,
            r.run_counts, list(r.sizes), r.buffer_total_size, r.disk_fall_behind,
            r.suggest_pulling_from_slave)


@pytest.mark.compiled_only
def test_compiled_read_queue_matches_twin(tmp_path):
    """The driver of the walk, compiled and twin, on a real store whose small
    commit-log and consume-queue files make reads cross file ends: found,
    filtered down or out, beyond the queue's files."""
    assert FAST is not None
    store = _filled_store(tmp_path)
    try:
        seen = set()
        for queue_id in range(3):
            top = store.get_max_offset_in_queue("T", queue_id)
            for offset in (0, 1, 7, 31, 63, 64, 65, top - 1, top - 5, top + 64 * 3):
                for max_nums in (1, 5, 32, 64):
                    for filt in (None, lambda t: t % 2 == 0, lambda t: False):
                        got = _read(FAST.read_queue, store, queue_id, offset, max_nums, filt)
                        assert got == _read(reader._read_queue, store, queue_id, offset,
                                            max_nums, filt)
                        seen.add(got[0])
        assert seen >= {GetMessageStatus.FOUND, GetMessageStatus.NO_MATCHED_MESSAGE,
                        GetMessageStatus.OFFSET_FOUND_NULL}
    finally:
        store.shutdown()


def _got(fn, store, topic: str, queue_id: int, offset, max_nums: int, max_bytes,
         message_filter) -> tuple | None:
    """Everything ``get_message`` (``fn``) answers and counts."""
    st = store.stats
    before = (st.get_message_times_total_found, st.get_message_times_total_miss,
              st.get_message_transfered_msg_count)
    r = fn(store, "g", topic, queue_id, offset, max_nums, max_bytes, message_filter)
    counted = (st.get_message_times_total_found - before[0],
               st.get_message_times_total_miss - before[1],
               st.get_message_transfered_msg_count - before[2])
    if r is None:
        return None, counted
    out = (r.status, r.next_begin_offset, r.min_offset, r.max_offset,
           [bytes(v) for v in r.body_views], r.run_offsets, r.run_counts, list(r.sizes),
           r.buffer_total_size, r.disk_fall_behind, r.suggest_pulling_from_slave, counted)
    r.release()
    return out


@pytest.mark.compiled_only
def test_compiled_get_message_matches_twin(tmp_path):
    """``get_message`` / ``read_messages``, compiled (the store's methods when
    built) and twin: the same results and counts for reads inside a queue,
    before its first offset (files removed), at and past its end, of a queue
    or topic that does not exist, of an LMQ topic, with filters and byte
    limits, and on a store that is not readable."""
    assert FAST is not None
    assert DefaultMessageStore.get_message is FAST.get_message
    store = _filled_store(tmp_path)
    try:
        store.consume_queue_table["T"][1].min_logic_offset = 20 * 10  # as after a clean-up
        seen = set()
        for readable in (True, False):
            if not readable:
                store.running_flags.flag_bits |= 1  # NOT_READABLE_BIT
            for topic, queue_id in (("T", 0), ("T", 1), ("T", 2), ("T", 7), ("U", 0),
                                    ("%LMQ%x", 0)):
                top = store.get_max_offset_in_queue(topic, queue_id)
                for offset in (-1, 0, 1, 9, 10, 31, 64, top - 1, top, top + 1, top + 200):
                    for max_nums, max_bytes in ((1, None), (32, None), (64, 600), (32, 0)):
                        for filt in (None, lambda t: t % 2 == 0):
                            got = _got(FAST.get_message, store, topic, queue_id, offset,
                                       max_nums, max_bytes, filt)
                            assert got == _got(reader._get_message, store, topic, queue_id,
                                               offset, max_nums, max_bytes, filt)
                            assert FAST.read_messages(store, "g", topic, queue_id, offset,
                                                      max_nums, max_bytes, filt) is None \
                                if got[0] is None else True
                            seen.add(got[0])
        assert seen >= {None, GetMessageStatus.FOUND, GetMessageStatus.NO_MATCHED_MESSAGE,
                        GetMessageStatus.OFFSET_TOO_SMALL, GetMessageStatus.OFFSET_OVERFLOW_ONE,
                        GetMessageStatus.OFFSET_OVERFLOW_BADLY,
                        GetMessageStatus.NO_MATCHED_LOGIC_QUEUE}
        # a commit log of another class (DLedger's: its own readable end) is asked
        from rmq.store.commit_log import CommitLog

        class _Committed(CommitLog):
            def get_max_offset(self) -> int:
                return 3000

        store.running_flags.flag_bits &= ~1
        plain = [_got(FAST.get_message, store, "T", 0, offset, 32, None, None)
                 for offset in (0, 5, 60)]
        store.commit_log.__class__ = _Committed
        for offset, before in zip((0, 5, 60), plain, strict=True):
            got = _got(FAST.get_message, store, "T", 0, offset, 32, None, None)
            assert got == _got(reader._get_message, store, "T", 0, offset, 32, None, None)
            assert got[0] is GetMessageStatus.FOUND and got[9] != before[9]  # disk_fall_behind
        store.commit_log.__class__ = CommitLog
    finally:
        store.shutdown()
