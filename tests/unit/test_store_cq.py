"""Consume-queue entry writes: the compiled cq_write (bare buffer protocol)
and its twin write the same bytes into every kind of buffer the store hands
them, and refuse the same bad positions."""

from __future__ import annotations

import mmap

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rmq._fast import compiled_or_none
from rmq.store import consume_queue as cqm

CQ = compiled_or_none("store_cq")
WRITERS = [cqm._cq_write] + ([CQ.cq_write] if CQ is not None else [])


@settings(max_examples=200, deadline=None)
@given(pos=st.integers(0, 200), offset=st.integers(-(2**63), 2**63 - 1),
       size=st.integers(-(2**31), 2**31 - 1), tags=st.integers(-(2**63), 2**63 - 1))
def test_entry_bytes_identical_in_views_of_a_mapping(pos, offset, size, tags):
    outs = []
    for write in WRITERS:
        with mmap.mmap(-1, 4096) as mm:
            view = memoryview(mm)[100:400]  # a slice: positions count from its start
            write(view, pos, offset, size, tags)
            outs.append(bytes(mm[:]))
            view.release()
    assert all(o == outs[0] for o in outs)
    assert cqm._ENTRY.unpack_from(outs[0], 100 + pos) == (offset, size, tags)


@pytest.mark.parametrize("write", WRITERS)
def test_positions_outside_the_buffer_are_refused(write):
    buf = bytearray(60)
    for pos in (-1, -20, 41, 60, 2**40):
        with pytest.raises(ValueError):
            write(buf, pos, 1, 2, 3)
    assert buf == bytearray(60)
    write(buf, 40, 1, 2, 3)  # the last slot that fits
    assert cqm._ENTRY.unpack_from(buf, 40) == (1, 2, 3)


@pytest.mark.parametrize("write", WRITERS)
def test_read_only_buffers_are_refused(write):
    with pytest.raises((TypeError, BufferError)):
        write(bytes(40), 0, 1, 2, 3)
    with pytest.raises((TypeError, BufferError)):
        write(memoryview(bytearray(40)).toreadonly(), 0, 1, 2, 3)


def _resident_pages(mm: mmap.mmap) -> int:
    """Pages of ``mm`` in the page cache (mincore)."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p]
    pages = (len(mm) + mmap.PAGESIZE - 1) // mmap.PAGESIZE
    vec = ctypes.create_string_buffer(pages)
    addr = ctypes.addressof(ctypes.c_char.from_buffer(mm))
    assert libc.mincore(addr, len(mm), vec) == 0, ctypes.get_errno()
    return sum(b & 1 for b in vec.raw)


def test_a_queues_first_entry_brings_in_its_page_not_the_file(tmp_path):
    """A consume queue's files are mapped MADV_RANDOM: the first entry's
    fault does not read ahead (zero-fill) the rest of the file."""
    cq = cqm.ConsumeQueue("T", 0, str(tmp_path), 300_000 * cqm.CQ_STORE_UNIT_SIZE)
    assert cq.mfq.random_access
    mf = cq.mfq.get_last_mapped_file(0, need_create=True)
    try:
        cq.put_message_position_info(0, 100, 7, 0)
        assert _resident_pages(mf.mm) < 64  # 6 MB file: ~1465 pages
        assert cq.read_entry(0) == (0, 100, 7)
    finally:
        cq.destroy()


def _random_read(mm: mmap.mmap) -> bool:
    """Whether ``mm``'s mapping is advised MADV_RANDOM (``rr`` in smaps)."""
    import ctypes

    start = ctypes.addressof(ctypes.c_char.from_buffer(mm))
    found = False
    with open("/proc/self/smaps") as f:
        for line in f:
            head = line.split(" ", 1)[0]
            if "-" in head and not head.endswith(":"):
                lo, hi = (int(x, 16) for x in head.split("-"))
                found = lo <= start < hi
            elif found and line.startswith("VmFlags:"):
                return "rr" in line.split()[1:]
    raise AssertionError("mapping not found")


def test_only_the_file_appends_go_to_is_random_access(tmp_path):
    """A full consume-queue file (the last one's predecessor, every loaded
    file but the last) is read ahead as usual, for a cold consumer."""
    size = 10 * cqm.CQ_STORE_UNIT_SIZE
    cq = cqm.ConsumeQueue("T", 0, str(tmp_path), size)
    for i in range(25):  # three files: two full, one with 5 entries
        cq.put_message_position_info(i * 100, 100, 7, i)
    files = cq.mfq.mapped_files
    assert [_random_read(mf.mm) for mf in files] == [False, False, True]
    cq.shutdown()
    again = cqm.ConsumeQueue("T", 0, str(tmp_path), size)
    assert again.load()
    assert [_random_read(mf.mm) for mf in again.mfq.mapped_files] == [False, False, True]
    again.destroy()


def test_after_a_truncation_the_file_appends_go_on_in_is_random_access(tmp_path):
    size = 10 * cqm.CQ_STORE_UNIT_SIZE
    cq = cqm.ConsumeQueue("T", 0, str(tmp_path), size)
    for i in range(25):
        cq.put_message_position_info(i * 100, 100, 7, i)
    cq.mfq.truncate_dirty_files(15 * cqm.CQ_STORE_UNIT_SIZE)  # into the second file
    assert [_random_read(mf.mm) for mf in cq.mfq.mapped_files] == [False, True]
    cq.destroy()
