"""The DLedger member's flush thread: the entry files flushed while the
loop appends, the checkpoint persisted on its interval, a stop that joins."""

from __future__ import annotations

import os
import threading
import time

import pytest

from rmq.common.properties import load_properties
from rmq.dledger import flush
from rmq.dledger.flush import FlushDataService
from tests.unit.test_dledger_store import _store

pytestmark = pytest.mark.timeout(60)


def _wait(cond, seconds: float = 5.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.005)
    return cond()


def test_appends_are_flushed_by_the_thread(tmp_path):
    store = _store(tmp_path, data_size=1 << 16)
    service = FlushDataService(store, 10)
    service.start()
    try:
        names = [t.name for t in threading.enumerate()]
        assert "DLedgerFlushDataService" in names
        for i in range(20):
            store.append_as_leader(os.urandom(200 + i))
        assert store.dirty()
        assert _wait(lambda: not store.dirty()), "nothing flushed within 5 s"
        assert store.data.flushed_where == store.data.get_max_offset() > 0
    finally:
        service.shutdown()
    assert service._thread is None
    assert "DLedgerFlushDataService" not in [t.name for t in threading.enumerate()]
    store.shutdown()


def test_checkpoint_persisted_on_its_interval(tmp_path):
    store = _store(tmp_path, data_size=1 << 16)
    for _ in range(5):
        store.append_as_leader(b"x" * 64)
    store.update_committed_index(1, 3)
    service = FlushDataService(store, 10)
    start = service._last_checkpoint
    service.flush_round(start + 1.0)  # before the interval: files flushed, no checkpoint
    assert not store.dirty()
    assert not os.path.exists(store.checkpoint_file)
    service.flush_round(start + flush.CHECKPOINT_S + 0.1)
    props = load_properties(store.checkpoint_file)
    assert (props["endIndex"], props["committedIndex"]) == ("4", "3")
    store.shutdown()


def test_a_failed_round_does_not_stop_the_thread(tmp_path, caplog):
    """A round that raises (the checkpoint's disk full, say) is logged; the
    next rounds still flush."""
    store = _store(tmp_path, data_size=1 << 16)
    failures = []
    plain = store.persist_checkpoint

    def full_disk() -> None:
        failures.append(1)
        raise OSError(28, "No space left on device")

    store.persist_checkpoint = full_disk
    service = FlushDataService(store, 10)
    service._last_checkpoint = -1e9  # every round persists: every round fails
    service.start()
    try:
        assert _wait(lambda: len(failures) >= 2)
        store.append_as_leader(b"y" * 300)
        assert _wait(lambda: not store.dirty()), "no round flushed after a failed one"
        assert "round failed" in caplog.text
    finally:
        service.shutdown()
        store.persist_checkpoint = plain
        store.shutdown()
