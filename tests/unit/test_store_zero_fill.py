"""Zeros written ahead of a commit log's appends (``MappedFile.zero_fill``,
``CommitLog.zero_ahead``): no appended byte and no byte of the page the
append position is in changes, the pages ahead are in the page cache (mincore
on a second mapping), the allocator then populates nothing, and a store
filled with zero-ahead on holds exactly what one filled with it off holds."""

from __future__ import annotations

import os
import time

import pytest

from rmq.store import DefaultMessageStore, MessageStoreConfig, PutMessageStatus
from rmq.store import mapped_file as mfm
from rmq.store.mapped_file import OS_PAGE_SIZE, ZERO_AHEAD, ZERO_STEP, MappedFile
from rmq.store.message import MessageExtBrokerInner
from rmq.store.message_codec import message_properties_to_string
from rmq.testing.store import commit_log_records
from tests.unit.test_store_populate import _cached_pages, _fresh

pytestmark = pytest.mark.timeout(60)

MiB = 1024 * 1024
HOST = ("10.0.0.2", 10911)


def test_zero_fill_writes_whole_pages_past_the_append_position_only(tmp_path):
    path = _fresh(tmp_path, 8 * MiB)
    mf = MappedFile(path, 8 * MiB)
    try:
        appended = os.urandom(3 * OS_PAGE_SIZE + 100)
        stale = os.urandom(8 * MiB - len(appended))  # bytes past the end: a truncated log's
        mf.view[:len(appended)] = appended
        mf.view[len(appended):] = stale
        mf.wrote_position = len(appended)
        first_zero = 4 * OS_PAGE_SIZE  # the page holding the append position is left alone
        mf.zero_fill(len(appended) + ZERO_AHEAD)
        assert mf.zeroed_to == len(appended) + ZERO_AHEAD
        assert mf.view[:len(appended)] == appended
        assert mf.view[len(appended):first_zero] == stale[:first_zero - len(appended)]
        assert not mf.view[first_zero:mf.zeroed_to].tobytes().strip(b"\0")
        assert mf.view[mf.zeroed_to:] == stale[mf.zeroed_to - len(appended):]
        # one call writes at most ZERO_AHEAD, and never past the file's end
        mf.zero_fill(8 * MiB)
        assert mf.zeroed_to == len(appended) + 2 * ZERO_AHEAD
        mf.wrote_position = 8 * MiB - 10
        mf.zero_fill(16 * MiB)  # the last page holds the append position: nothing to write
        assert mf.zeroed_to == 8 * MiB
        assert mf.view[8 * MiB - OS_PAGE_SIZE:] == stale[-OS_PAGE_SIZE:]
    finally:
        mf.close()


def test_zero_fill_brings_the_pages_into_the_page_cache(tmp_path):
    path = _fresh(tmp_path, 4 * MiB)
    mf = MappedFile(path, 4 * MiB)
    try:
        assert _cached_pages(path, 0, 4 * MiB) == 0
        mf.zero_fill(ZERO_AHEAD)
        assert _cached_pages(path, 0, ZERO_AHEAD) == ZERO_AHEAD // OS_PAGE_SIZE
    finally:
        mf.close()


def test_zero_ahead_tops_up_by_a_step_and_catches_up_at_once(tmp_path):
    cfg = MessageStoreConfig(storePathRootDir=str(tmp_path), mappedFileSizeCommitLog=8 * MiB)
    store = DefaultMessageStore(cfg, HOST)
    assert store.load()
    try:
        cl = store.commit_log
        mf = cl._writable_file()
        cl.zero_ahead(mf)  # a new file: the whole window at once
        assert mf.zeroed_to == ZERO_AHEAD
        mf.wrote_position = ZERO_AHEAD // 2 - 100  # more than half left: one step
        cl.zero_ahead(mf)
        assert mf.zeroed_to == ZERO_AHEAD + ZERO_STEP
        cl.zero_ahead(mf)
        assert mf.zeroed_to == ZERO_AHEAD + 2 * ZERO_STEP
        mf.wrote_position = mf.zeroed_to - 1000  # appends ran ahead: filled up at once
        cl.zero_ahead(mf)
        assert mf.zeroed_to == mf.wrote_position + ZERO_AHEAD
        cl.zero_ahead_enabled = False
        mf.wrote_position = mf.zeroed_to
        cl.zero_ahead(mf)
        assert mf.zeroed_to == mf.wrote_position
    finally:
        store.shutdown()


def _message(i: int) -> MessageExtBrokerInner:
    props = {"UNIQ_KEY": f"{i:032X}", "KEYS": f"k{i}"}
    return MessageExtBrokerInner(topic="T", queue_id=i % 2, body=os.urandom(700 + i % 900),
                                 properties=props,
                                 properties_string=message_properties_to_string(props),
                                 born_timestamp=1_700_000_000_000, born_host=("10.0.0.1", 5000))


def _fill(root, zero: bool, msgs: list[MessageExtBrokerInner]) -> DefaultMessageStore:
    cfg = MessageStoreConfig(storePathRootDir=str(root), mappedFileSizeCommitLog=2 * MiB,
                             mappedFileSizeConsumeQueue=20 * 4096, rmqZeroFillAheadEnable=zero)
    store = DefaultMessageStore(cfg, HOST)
    assert store.load()
    store.start()
    cl = store.commit_log
    for m in msgs:
        assert store.put_message(m).status is PutMessageStatus.PUT_OK
        mf = cl.mfq.mapped_files[-1]
        if zero:  # the next appends land on pages written ahead
            assert mf.zeroed_to - mf.wrote_position >= min(ZERO_AHEAD // 2 - 2048,
                                                           mf.file_size - mf.wrote_position)
    return store


def test_commit_log_zero_fills_ahead_and_stores_the_same(tmp_path, monkeypatch):
    monkeypatch.setattr(mfm, "POPULATE_AHEAD_MIN", 256 * 1024)
    monkeypatch.setattr("rmq.store.allocate.POPULATE_AHEAD_MIN", 256 * 1024)
    msgs = [_message(i) for i in range(6000)]  # ~9 MiB: four file rolls
    on = _fill(tmp_path / "on", True, msgs)
    off = _fill(tmp_path / "off", False, msgs)
    try:
        files = on.commit_log.mfq.mapped_files
        assert len(files) >= 4
        assert all(f.populated_to == 0 for f in files)  # the allocator left the files alone
        last = files[-1]
        start = last.wrote_position + (-last.wrote_position % OS_PAGE_SIZE)
        assert _cached_pages(last.file_name, start, last.zeroed_to) == \
            (last.zeroed_to - start) // OS_PAGE_SIZE
        deadline = time.monotonic() + 10  # the allocator's jobs of the store without zeros
        while time.monotonic() < deadline and off.commit_log.allocator._populating is not None \
                and not off.commit_log.allocator._populating.done():
            time.sleep(0.01)
        assert all(f.zeroed_to == 0 for f in off.commit_log.mfq.mapped_files)
        records = commit_log_records(on)
        assert records == commit_log_records(off)
        bodies = [r for r in records if len(r) > 8]
        assert len(bodies) == len(msgs)
        assert all(m.body in r for r, m in zip(bodies[::500], msgs[::500], strict=True))
    finally:
        on.shutdown()
        off.shutdown()
