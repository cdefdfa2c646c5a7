"""Pages populated ahead of a commit log's appends (``populate`` compiled and
twin, ``MappedFile.populate``, ``MappedFileQueue.populate_ahead``, the
allocator's first window): checked with mincore(2) on a second mapping of the
same file, so what is seen is the page cache itself, not what this process
has touched (rmq runs on Linux); and every byte stays as it was."""

from __future__ import annotations

import ctypes
import mmap
import os
import threading

import pytest

from rmq._fast import compiled_or_none
from rmq.store import mapped_file as mfm
from rmq.store.allocate import AllocateMappedFileService
from rmq.store.mapped_file import OS_PAGE_SIZE, MappedFile, MappedFileQueue

pytestmark = pytest.mark.timeout(60)

MiB = 1024 * 1024
MAPPED = compiled_or_none("store_mapped")
IMPLS = [mfm._populate] + ([MAPPED.populate] if MAPPED is not None else [])
_libc = ctypes.CDLL(None, use_errno=True)
_libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p]


def _cached_pages(path: str, start: int, end: int) -> int:
    """How many pages of ``[start, end)`` of the file are in the page cache
    (mincore on a fresh mapping: mapping and asking touch no page)."""
    fd = os.open(path, os.O_RDWR)
    try:
        with mmap.mmap(fd, os.fstat(fd).st_size) as mm:
            anchor = ctypes.c_char.from_buffer(mm)
            try:
                pages = (end - start) // OS_PAGE_SIZE
                vec = ctypes.create_string_buffer(pages)
                if _libc.mincore(ctypes.addressof(anchor) + start, end - start, vec) != 0:
                    raise OSError(ctypes.get_errno(), "mincore failed")
                return sum(b & 1 for b in vec.raw)
            finally:
                del anchor
    finally:
        os.close(fd)


def _fresh(tmp_path, size: int) -> str:
    path = str(tmp_path / mfm.offset_to_file_name(0))
    # a new sparse file has nothing in the page cache
    with open(path, "wb") as f:
        f.truncate(size)
    return path


@pytest.mark.parametrize("populate", IMPLS, ids=lambda f: f.__module__)
def test_populate_brings_the_range_in_and_changes_no_byte(tmp_path, populate):
    path = _fresh(tmp_path, 16 * MiB)
    fd = os.open(path, os.O_RDWR)
    try:
        with mmap.mmap(fd, 16 * MiB) as mm:
            data = os.urandom(3 * MiB + 1234)
            mm[MiB:MiB + len(data)] = data  # appended bytes inside the range
            populate(mm, fd, MiB + 5000, 9 * MiB)  # from the page holding MiB + 5000
            # the range is in (the kernel's readahead may bring neighbours too)
            assert _cached_pages(path, MiB, 9 * MiB) == 8 * MiB // OS_PAGE_SIZE
            assert mm[MiB:MiB + len(data)] == data
            assert not mm[MiB + len(data):].strip(b"\0")
            populate(mm, fd, 15 * MiB, 99 * MiB)  # clamped to the mapping
            populate(mm, fd, 8 * MiB, 8 * MiB)  # empty
            assert _cached_pages(path, 15 * MiB, 16 * MiB) == MiB // OS_PAGE_SIZE
    finally:
        os.close(fd)


def test_mapped_file_populates_from_the_append_position(tmp_path):
    path = _fresh(tmp_path, 16 * MiB)
    mf = MappedFile(path, 16 * MiB)
    try:
        assert _cached_pages(path, 0, 16 * MiB) == 0
        mf.wrote_position = 4 * MiB + 100  # the page holding the append position counts
        mf.populate(8 * MiB)
        assert _cached_pages(path, 4 * MiB, 8 * MiB) == 4 * MiB // OS_PAGE_SIZE
        assert mf.populated_to == 8 * MiB
        assert not mf.view[4 * MiB:8 * MiB].tobytes().strip(b"\0")  # nothing written
        mf.populate(64 * MiB)  # capped at the file's end
        assert mf.populated_to == 16 * MiB
        assert _cached_pages(path, 8 * MiB, 16 * MiB) == 8 * MiB // OS_PAGE_SIZE
    finally:
        mf.close()


def test_populate_ahead_follows_the_appends_by_twice_their_pace(tmp_path, monkeypatch):
    monkeypatch.setattr(mfm, "POPULATE_AHEAD_MIN", 2 * MiB)
    monkeypatch.setattr(mfm, "POPULATE_AHEAD_MAX", 12 * MiB)
    d = tmp_path / "commitlog"
    d.mkdir()
    q = MappedFileQueue(str(d), 32 * MiB)
    q.populate_ahead()  # no file yet: nothing to do
    mf = q.get_last_mapped_file(0, need_create=True)
    try:
        q.populate_ahead()
        assert mf.populated_to == 2 * MiB  # the minimum at first
        mf.wrote_position = 3 * MiB  # 3 MiB appended since: 6 MiB ahead
        q.populate_ahead()
        assert mf.populated_to == 9 * MiB
        mf.wrote_position = 13 * MiB  # 10 MiB appended: 20 MiB ahead, capped at 12
        q.populate_ahead()
        assert mf.populated_to == 25 * MiB
        assert _cached_pages(mf.file_name, 13 * MiB, 25 * MiB) == 12 * MiB // OS_PAGE_SIZE
    finally:
        q.shutdown()


def test_a_queue_of_its_own_minimum_populates_from_it(tmp_path, monkeypatch):
    """``populate_ahead_min`` (a DLedger group's entry files: no allocator
    populates them before their first append) replaces POPULATE_AHEAD_MIN;
    twice a round's appends still go further."""
    monkeypatch.setattr(mfm, "POPULATE_AHEAD_MIN", 8 * MiB)
    d = tmp_path / "entries"
    d.mkdir()
    q = MappedFileQueue(str(d), 32 * MiB)
    q.populate_ahead_min = 1 * MiB
    mf = q.get_last_mapped_file(0, need_create=True)
    try:
        q.populate_ahead()
        assert mf.populated_to == 1 * MiB
        mf.wrote_position = 2 * MiB  # 2 MiB appended since: 4 MiB ahead
        q.populate_ahead()
        assert mf.populated_to == 6 * MiB
    finally:
        q.shutdown()


def _settle(alloc: AllocateMappedFileService) -> None:
    """Wait (bounded) for the service's populate job, if one runs."""
    fut = alloc._populating
    if fut is not None:
        fut.result(10)


def test_allocator_hands_out_files_with_their_first_window_cached(tmp_path, monkeypatch):
    monkeypatch.setattr("rmq.store.allocate.POPULATE_AHEAD_MIN", 4 * MiB)
    d = tmp_path / "commitlog"
    d.mkdir()
    alloc = AllocateMappedFileService()
    first = str(d / mfm.offset_to_file_name(0))
    second = str(d / mfm.offset_to_file_name(16 * MiB))
    try:
        mf = alloc.take(first, second, 16 * MiB, None)  # made here, populated there
        _settle(alloc)
        nxt = alloc.take(second, str(d / mfm.offset_to_file_name(32 * MiB)), 16 * MiB, None)
        for f in (mf, nxt):
            assert f.populated_to == 4 * MiB
            assert _cached_pages(f.file_name, 0, 4 * MiB) == 4 * MiB // OS_PAGE_SIZE
            f.close()
    finally:
        alloc.shutdown()


def test_queue_with_allocator_populates_on_its_thread(tmp_path, monkeypatch):
    monkeypatch.setattr(mfm, "POPULATE_AHEAD_MIN", 2 * MiB)
    monkeypatch.setattr("rmq.store.allocate.POPULATE_AHEAD_MIN", 2 * MiB)
    d = tmp_path / "commitlog"
    d.mkdir()
    alloc = AllocateMappedFileService()
    q = MappedFileQueue(str(d), 32 * MiB, allocator=alloc)
    try:
        mf = q.get_last_mapped_file(0, need_create=True)
        _settle(alloc)
        mf.wrote_position = 5 * MiB
        q.populate_ahead()
        _settle(alloc)
        assert mf.populated_to == 7 * MiB
        assert _cached_pages(mf.file_name, 5 * MiB, 7 * MiB) == 2 * MiB // OS_PAGE_SIZE
        q.populate_ahead()  # nothing new to do: no job
        assert alloc._populating.done()
        # a request while a job runs is dropped, not queued
        blocker = threading.Event()
        alloc._populating = alloc._executor.submit(blocker.wait, 10)
        mf.wrote_position = 9 * MiB
        q.populate_ahead()
        assert mf.populated_to == 7 * MiB
        blocker.set()
        _settle(alloc)
        q.populate_ahead()
        _settle(alloc)
        assert mf.populated_to == 9 * MiB + 2 * 4 * MiB  # twice the 4 MiB appended since
    finally:
        q.shutdown()
        alloc.shutdown()
