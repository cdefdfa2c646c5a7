"""Zeros written ahead of a DLedger entry store's appends (its data queue's
``zero_ahead``, which a DLedger commit log sets from rmqZeroFillAheadEnable):
the leader's appends (one by one and in place) and a follower's push rows
keep the pages past the append position written with zeros, the flush
thread then populates nothing, and the files hold exactly what a store
without zeros ahead holds."""

from __future__ import annotations

import os

import pytest

from rmq.dledger.commit_log import DATA_POPULATE_AHEAD_MIN, DLedgerCommitLog
from rmq.dledger.entry import BODY_OFFSET
from rmq.dledger.member_state import Role
from rmq.store.config import MessageStoreConfig
from rmq.store.mapped_file import OS_PAGE_SIZE, POPULATE_AHEAD_MIN, ZERO_AHEAD
from tests.unit.test_dledger_follow_append import _row
from tests.unit.test_dledger_follow_append import _store as _follower_store
from tests.unit.test_dledger_store import _store as _leader_store
from tests.unit.test_store_populate import _cached_pages

pytestmark = pytest.mark.timeout(60)

MiB = 1024 * 1024
DATA_SIZE = 2 * MiB


def _bodies(count: int) -> list[bytes]:
    return [os.urandom(300 + (i * 97) % 1500) for i in range(count)]


def _whole_files(queue) -> list[bytes]:
    """Every byte of each file, past the appends too (zeros either way)."""
    return [bytes(mf.view) for mf in queue.mapped_files]


def _assert_zeros_ahead(queue, room: int) -> None:
    """The last file is written with zeros from the page after the append
    position for at least half the window (less ``room``, what one append
    may have used of it), or to its end."""
    mf = queue.mapped_files[-1]
    want = min(ZERO_AHEAD // 2 - room, mf.file_size - mf.wrote_position)
    assert mf.zeroed_to - mf.wrote_position >= want


def _leader(path, zero: bool):
    store = _leader_store(path, data_size=DATA_SIZE)
    store.index.mapped_file_size = store.data.mapped_file_size  # (room for the entries' units)
    store.data.zero_ahead = zero
    return store


def test_leader_appends_keep_zeros_ahead_and_store_the_same(tmp_path):
    bodies = _bodies(4000)  # ~3.6 MiB: two file ends
    on, off = _leader(tmp_path / "on", True), _leader(tmp_path / "off", False)
    try:
        for i, body in enumerate(bodies):
            if i % 2:
                on.append_as_leader(body)
                off.append_as_leader(body)
            else:  # (the lane's single sends where a file ends)
                for s in (on, off):
                    s.append_in_place(len(body), lambda buf, at, _off, b=body:
                                      buf.__setitem__(slice(at, at + len(b)), b))
            _assert_zeros_ahead(on.data, BODY_OFFSET + len(body))
        assert len(on.data.mapped_files) >= 2
        assert all(mf.zeroed_to == 0 for mf in off.data.mapped_files)
        last = on.data.mapped_files[-1]
        start = last.wrote_position + (-last.wrote_position % OS_PAGE_SIZE)
        assert _cached_pages(last.file_name, start, last.zeroed_to) == \
            (last.zeroed_to - start) // OS_PAGE_SIZE
        on.flush()
        off.flush()
        assert _whole_files(on.data) == _whole_files(off.data)
        assert _whole_files(on.index) == _whole_files(off.index)
        assert [on.get(i).body for i in range(0, 4000, 333)] == bodies[::333]
    finally:
        on.shutdown()
        off.shutdown()


def test_follower_rows_keep_zeros_ahead_and_store_the_same(tmp_path):
    leader = _leader(tmp_path / "leader", False)
    for body in _bodies(3000):
        leader.append_as_leader(body)
    rows = [_row(leader.get(i)) for i in range(3000)]
    leader.shutdown()
    stores = []
    for name, zero in (("on", True), ("off", False)):
        s = _follower_store(tmp_path / name, Role.FOLLOWER, DATA_SIZE, units=4096)
        s.data.zero_ahead = zero
        s.member_state.curr_term = rows[0][1]
        stores.append(s)
    on, off = stores
    try:
        for i in range(0, len(rows), 16):  # a push's rows at a time
            for s in stores:
                s.append_rows_as_follower(rows[i:i + 16], rows[0][1], "n0")
            _assert_zeros_ahead(on.data, 16 * 2000)
        assert on.ledger_end_index == off.ledger_end_index == 2999
        assert len(on.data.mapped_files) >= 2
        on.flush()
        off.flush()
        assert _whole_files(on.data) == _whole_files(off.data)
        assert _whole_files(on.index) == _whole_files(off.index)
    finally:
        on.shutdown()
        off.shutdown()


@pytest.mark.parametrize("zero", [True, False])
def test_a_dledger_commit_log_zeros_ahead_as_rmqZeroFillAheadEnable_says(tmp_path, zero):
    cfg = MessageStoreConfig(storePathRootDir=str(tmp_path), enableDLegerCommitLog=True,
                             dLegerGroup="g", dLegerSelfId="n0",
                             dLegerPeers="n0-127.0.0.1:40911", rmqZeroFillAheadEnable=zero,
                             mappedFileSizeCommitLog=DATA_SIZE)
    log = DLedgerCommitLog.__new__(DLedgerCommitLog)
    log._open_files(cfg)
    try:
        assert log.mfq.zero_ahead is zero
        assert log.zero_ahead_enabled is False  # (CommitLog's own appends are not this log's)
        log.dledger.startup()
        mf = log.mfq.get_last_mapped_file(0, need_create=True)
        log.mfq.populate_ahead()  # the flush thread's, each round
        assert mf.populated_to == (0 if zero else min(DATA_POPULATE_AHEAD_MIN, DATA_SIZE))
        assert DATA_POPULATE_AHEAD_MIN < POPULATE_AHEAD_MIN  # (off: from a few MiB)
    finally:
        log.dledger.shutdown()
