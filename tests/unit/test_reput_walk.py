"""A reput's walk with its store work in one call (``reput_walk``): the
compiled call and its pure-Python twin (``rmq.store.reput._reput_walk``)
write the same consume-queue and index bytes, move the same queue files,
offsets, index room and checkpoint, and tell the arrival listeners the same
notices, over DLedger entries and plain records alike."""

from __future__ import annotations

import struct
import threading
from types import SimpleNamespace

import pytest

from rmq._fast import compiled_or_none
from rmq.store import index as idx
from rmq.store import reput
from tests.unit.test_store_fast import _batch_log, _records

_C = compiled_or_none("store_dispatch")
IMPLS = [reput._reput_walk] + ([_C.reput_walk] if _C is not None else [])
QUEUES = [(b"Topic", 3), (b"Topic", 1), (b"Other", 0)]


def _log(header: int, keys: bool) -> bytes:
    """Twenty records of each queue, interleaved, each in an entry of its own
    behind ``header`` bytes (DLedger's 48) or end to end (0)."""
    recs = [_records(_batch_log(20, ["TagA", "TagB", ""], keys, t, q), 20) for t, q in QUEUES]
    buf = bytearray()
    n = 0
    for i in range(20):
        for r in recs:
            n += 1
            if header:
                buf += struct.pack(">iiqqqiiii", 1, len(r[i]) + 48, n, 1, len(buf), 0, 0, 0,
                                   len(r[i]))
            buf += r[i]
    return bytes(buf)


class _Store(reput.ReputMixin):
    """The store's attributes a walk reads and moves, on byte arrays."""

    def __init__(self, header: int, index: bool, runs: bool, on_loop: bool,
                 missing: tuple[str, int] | None) -> None:
        self.config = SimpleNamespace(messageIndexEnable=index, maxHashSlotNum=11, maxIndexNum=400)
        ib = bytearray(idx.index_file_size(11, 400))
        struct.pack_into(">i", ib, 36, 1)
        self.index_service = SimpleNamespace(promised=50, writable_file=lambda: self.index_file)
        self.index_file = SimpleNamespace(mf=SimpleNamespace(view=ib))
        self.consume_queue_table: dict = {}
        for topic, qid in QUEUES:
            if (topic.decode(), qid) == missing:
                continue
            mf = SimpleNamespace(wrote_position=140, committed_position=140,
                                 view=bytearray(20 * 64), file_from_offset=0)
            cq = SimpleNamespace(tail_file=mf, file_size=20 * 64, max_physic_offset=-1)
            self.consume_queue_table.setdefault(topic.decode(), {})[qid] = cq
        self.commit_log = SimpleNamespace(entry_header=header)
        self.checkpoint = SimpleNamespace(logics_msg_timestamp=0)
        self.told: list = []
        self.message_runs_listener = self.told.append if runs else None
        self.message_arriving_listener = lambda *a: self.told.append(a)
        self._loop = None if on_loop else object()
        self._loop_thread = threading.get_ident() if on_loop else -1

    def state(self) -> tuple:
        qs = {(t, q): (cq.tail_file.wrote_position, cq.tail_file.committed_position,
                       bytes(cq.tail_file.view), cq.max_physic_offset)
              for t, by_id in self.consume_queue_table.items() for q, cq in by_id.items()}
        return (qs, bytes(self.index_file.mf.view), self.index_service.promised,
                self.checkpoint.logics_msg_timestamp, self.told)


@pytest.mark.parametrize("header", [0, 48])
@pytest.mark.parametrize("keys", [True, False])
@pytest.mark.parametrize("index", [True, False])
@pytest.mark.parametrize("runs", [True, False])
@pytest.mark.parametrize("missing", [None, ("Other", 0)])
def test_reput_walk_twins_agree(header: int, keys: bool, index: bool, runs: bool,
                                missing: tuple[str, int] | None) -> None:
    buf = _log(header, keys)
    outs = []
    for impl in IMPLS:
        store = _Store(header, index, runs, True, missing)
        pos = impl(store, memoryview(buf), 0, len(buf), True)
        outs.append((pos, store.state()))
    assert all(o == outs[0] for o in outs)
    pos, (qs, _ib, promised, latest, told) = outs[0]
    if missing is None:
        assert pos == len(buf)
        assert all(q[0] == q[1] == 140 + 20 * 20 for q in qs.values())
        notices = told[0] if runs else told
        assert [n[:3] for n in notices] == [("Topic", 3, 27), ("Topic", 1, 27), ("Other", 0, 27)]
        assert latest == notices[0][4] > 0
        assert promised < 50 if keys and index else promised == 50
    else:  # the walk stops at the first record of a queue without its file (the third)
        assert 0 < pos < len(buf)
        assert all(q[0] == q[1] == 160 for q in qs.values())
        notices = told[0] if runs else told
        assert [n[:3] for n in notices] == [("Topic", 3, 8), ("Topic", 1, 8)]

@pytest.mark.parametrize("impl", IMPLS)
def test_reput_walk_off_the_loop_thread_notifies_per_queue(impl) -> None:
    """Off the loop's thread the runs listener is not called: each queue's
    notice goes through ``_notify`` (which hands it to the loop), as the
    twin's ``_notify_runs`` does."""
    store = _Store(48, True, True, False, None)
    store._loop = SimpleNamespace(is_running=lambda: False)
    buf = _log(48, False)
    assert impl(store, memoryview(buf), 0, len(buf), True) == len(buf)
    assert [n[:3] for n in store.told] == [("Topic", 3, 27), ("Topic", 1, 27), ("Other", 0, 27)]


@pytest.mark.parametrize("impl", IMPLS)
def test_reput_walk_without_an_index_file_leaves_the_records(impl) -> None:
    store = _Store(0, True, True, True, None)
    store.index_service.writable_file = lambda: None
    buf = _log(0, True)
    assert impl(store, memoryview(buf), 0, len(buf), True) == 0
    assert store.told == []
