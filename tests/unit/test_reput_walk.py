"""A reput's walk with its store work in one call (``reput_walk``): the
compiled call and its pure-Python twin (``rmq.store.reput._reput_walk``)
write the same consume-queue and index bytes, move the same queue files,
offsets, index room and checkpoint, and tell the arrival listeners the same
notices, over DLedger entries and plain records alike."""

from __future__ import annotations

import struct
import sys
import threading
from types import SimpleNamespace

import pytest

from rmq._fast import compiled_or_none
from rmq.store import index as idx
from rmq.store import reput
from rmq.store.consume_queue import ConsumeQueue
from rmq.store.mapped_file import MappedFile
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


class _IndexFile:
    """An ``IndexFile``'s fields on a byte array, its own full test."""

    is_write_full = idx.IndexFile.is_write_full

    def __init__(self, view: bytearray, max_index: int) -> None:
        self.mf = SimpleNamespace(view=view)
        self.max_index = max_index


class _IndexService:
    """An ``IndexService``'s fields a walk reads, its own ``writable_file``."""

    writable_file = idx.IndexService.writable_file

    def __init__(self, files: list) -> None:
        self.files = files
        self._spare = None
        self.promised = 50


class _Store(reput.ReputMixin):
    """The store's attributes a walk reads and moves, on byte arrays."""

    def __init__(self, header: int, index: bool, runs: bool, on_loop: bool,
                 missing: tuple[str, int] | None) -> None:
        self.config = SimpleNamespace(messageIndexEnable=index, maxHashSlotNum=11, maxIndexNum=400)
        ib = bytearray(idx.index_file_size(11, 400))
        struct.pack_into(">i", ib, 36, 1)
        self.index_file = _IndexFile(ib, 400)
        self.index_service = _IndexService([self.index_file])
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

@pytest.mark.parametrize("queues", [[(b"Aa", 3), (b"BB", 1), (b"Aa", 0)],
                                    [(b"BB", 2), (b"Aa", 2), (b"C#", 2)]])
def test_reput_walk_of_topics_of_one_hash_twice(monkeypatch, queues) -> None:
    """Topics of one hash ("Aa", "BB", "C#": the compiled walk keeps the
    topics it met by their hash) met in turn, in two walks: each queue gets
    its own records and notices, as in the twin."""
    monkeypatch.setattr(sys.modules[__name__], "QUEUES", queues)
    buf = _log(48, True)
    outs = []
    for impl in IMPLS:
        for _ in range(2):
            store = _Store(48, True, True, True, None)
            pos = impl(store, memoryview(buf), 0, len(buf), True)
            outs.append((pos, store.state()))
    assert all(o == outs[0] for o in outs) and outs[0][0] == len(buf)
    assert [n[:3] for n in outs[0][1][4][0]] == [(t.decode(), q, 27) for t, q in queues]


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
@pytest.mark.parametrize("case", ["none", "full", "spare"])
def test_reput_walk_without_an_index_file_leaves_the_records(impl, case: str) -> None:
    """No index file or a full one: the walk leaves the records to the
    per-record path; only the file made ahead: the service's
    ``writable_file`` makes it the current one, which the walk writes."""
    store = _Store(0, True, True, True, None)
    if case == "none":
        store.index_service.files = []
    elif case == "full":
        struct.pack_into(">i", store.index_file.mf.view, 36, 400)
    else:
        store.index_service._spare = store.index_file
        store.index_service._take_spare = lambda files: None
    buf = _log(0, True)
    if case == "spare":
        assert impl(store, memoryview(buf), 0, len(buf), True) == len(buf)
        return
    assert impl(store, memoryview(buf), 0, len(buf), True) == 0
    assert store.told == []


@pytest.mark.parametrize("kept", [1, 2])
def test_reput_walk_reads_the_index_service_from_slots_or_attributes_alike(tmp_path,
                                                                           kept: int) -> None:
    """The store's ``IndexService`` and ``IndexFile`` (their fields read at
    their slots by the compiled walk) and plain objects of the same fields:
    the same index bytes and room kept, in both implementations; with the
    file made ahead last, the one before it is written."""

    def slotted(store: _Store, impl) -> None:
        where = tmp_path / impl.__name__
        where.mkdir()
        ix = idx.IndexService(str(where), 11, 400, None, 1)
        files = [idx.IndexFile(str(where / f"{n:020d}"), 11, 400) for n in range(kept)]
        for f in files:
            struct.pack_into(">i", f.mf.view, 36, 1)
        ix.files, ix.promised = files, 50
        if kept == 2:
            ix._spare = files[1]
        store.index_service, store.index_file = ix, files[0]

    buf = _log(48, True)
    assert _alike(buf, slotted)[1] == len(buf)


def _recreated(store: _Store, topic: str, drop: bool) -> dict:
    """Delete ``topic``'s queues between two walks and, unless ``drop``,
    create them again: new queue objects with new files, positioned where
    the old ones stopped (as a recreated topic's queues after their files
    were loaded).  Returns the old queues' file bytes and write positions."""
    old = store.consume_queue_table.pop(topic)
    if not drop:
        fresh = {}
        for qid, cq in old.items():
            was = cq.tail_file
            mf = SimpleNamespace(wrote_position=was.wrote_position,
                                 committed_position=was.committed_position,
                                 view=bytearray(len(was.view)),
                                 file_from_offset=was.file_from_offset)
            fresh[qid] = SimpleNamespace(tail_file=mf, file_size=cq.file_size,
                                         max_physic_offset=cq.max_physic_offset)
        store.consume_queue_table[topic] = fresh
    return {qid: (bytes(cq.tail_file.view), cq.tail_file.wrote_position)
            for qid, cq in old.items()}


@pytest.mark.parametrize("drop", [False, True])
def test_reput_walk_sees_a_topic_recreated_between_walks(drop: bool) -> None:
    """Nothing of a queue outlives its walk: after a topic is deleted (and
    recreated with new queue files) between two walks, the next walk writes
    into the new files, or stops at the deleted topic's first record, and
    never into the old ones; both implementations alike."""
    buf = _log(48, True)
    outs = []
    for impl in IMPLS:
        store = _Store(48, True, True, True, None)
        half = impl(store, memoryview(buf), 0, len(buf) // 2, True)
        assert 0 < half < len(buf)
        old = _recreated(store, "Topic", drop)
        end = impl(store, memoryview(buf), half, len(buf), True)
        outs.append((half, end, store.state(), old))
    assert all(o == outs[0] for o in outs)
    half, end, (qs, _ib, _promised, _latest, told), old = outs[0]
    if drop:
        assert end < len(buf)
        assert ("Topic", 3) not in qs
    else:
        assert end == len(buf)
        for qid in (3, 1):
            wrote, committed, view, _max = qs[("Topic", qid)]
            assert wrote == committed == 140 + 20 * 20
            old_view, start = old[qid]  # (where the first walk stopped)
            assert 140 < start < wrote
            assert view[:start] == bytes(start)  # the new file got the second walk's alone
            assert view[start:wrote] != bytes(wrote - start)
            assert old_view[start:] == bytes(len(old_view) - start)  # the old one nothing more
        assert {n[:3] for n in told[-1]} >= {("Topic", 3, 27), ("Topic", 1, 27)}


def _slotted(cq: SimpleNamespace) -> ConsumeQueue:
    """A ``ConsumeQueue`` and ``MappedFile`` (slots classes: the compiled walk
    reads and sets their fields at their slots) with ``cq``'s fields."""
    mf = MappedFile.__new__(MappedFile)
    for name, value in vars(cq.tail_file).items():
        setattr(mf, name, value)
    out = ConsumeQueue.__new__(ConsumeQueue)
    out.tail_file, out.file_size, out.max_physic_offset = mf, cq.file_size, cq.max_physic_offset
    return out


def _alike(buf: bytes, swap) -> tuple:
    """A walk of ``buf`` in two halves by each implementation, over the test
    store and over one whose objects ``swap(store, impl)`` replaced (with
    the store's slotted classes): what each leaves, all the same."""
    want = None
    for impl in IMPLS:
        for plain in (True, False):
            store = _Store(48, True, True, True, None)
            if not plain:
                swap(store, impl)
            half = impl(store, memoryview(buf), 0, len(buf) // 2, True)
            end = impl(store, memoryview(buf), half, len(buf), True)
            got = (half, end, store.state())
            want = want or got
            assert got == want, (impl, plain)
    return want


@pytest.mark.parametrize("kinds", [("slots",), ("slots", "plain"), ("plain", "slots"),
                                   ("mixed",)])
def test_reput_walk_reads_queues_from_slots_or_attributes_alike(kinds: tuple[str, ...]) -> None:
    """Queues of the store's classes (their fields read and set at their
    slots), of other classes (through their attributes), both in one walk,
    and a queue of the store's class with a plain file: the same bytes,
    positions and notices as the attribute-only walk, in both
    implementations."""

    def slotted(store: _Store, _impl) -> None:
        n = 0
        for by_id in store.consume_queue_table.values():
            for qid, cq in by_id.items():
                kind = kinds[n % len(kinds)]
                n += 1
                if kind == "slots":
                    by_id[qid] = _slotted(cq)
                elif kind == "mixed":
                    by_id[qid] = mixed = _slotted(cq)
                    mixed.tail_file = cq.tail_file

    buf = _log(48, True)
    assert _alike(buf, slotted)[1] == len(buf)


@pytest.mark.parametrize("unset", ["view", "file_from_offset", "max_physic_offset"])
def test_reput_walk_of_an_unset_slot_fails_alike(unset: str) -> None:
    """A field never set (an empty slot) fails the walk with the attribute's
    own error in both implementations, before anything is written."""
    buf = _log(0, False)
    errors = []
    for impl in IMPLS:
        store = _Store(0, True, True, True, None)
        by_id = store.consume_queue_table["Topic"]
        by_id[3] = cq = _slotted(by_id[3])
        delattr(cq if unset == "max_physic_offset" else cq.tail_file, unset)
        with pytest.raises(AttributeError) as e:
            impl(store, memoryview(buf), 0, len(buf), True)
        errors.append(str(e.value))
        assert store.told == [] and store.checkpoint.logics_msg_timestamp == 0
    assert len(set(errors)) == 1 and unset in errors[0]
