"""A DLedger leader's per-send work of one read in compiled calls: the rows,
queue offsets and dispatch-room queues of the plain sends
(``plain_runs``), the queue offsets taken for what was written
(``plain_stored``), the lane's statistics (``tally``) and a push's kept
entries (``kept_run``) and a read's appended entries kept (``keep_more``), each
against its pure-Python twin on the same input."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from rmq._fast import compiled_or_none
from rmq.broker import dledger_lane
from rmq.dledger import commit_log, mmap_store
from rmq.dledger.entry import Entry
from rmq.remoting.command import RPC_ONEWAY

_APPEND = compiled_or_none("dledger_append")
_PUSH = compiled_or_none("dledger_push")


def _send(i: int, topic: str = "T", queue: int = 0, body: bytes = b"x" * 100,
          keys: int = 0, flag: int = 0, code: int = 310) -> tuple:
    """A reading of ``plain_sends``: (end, code, flag, opaque, serialize
    type, topic, queue id, sysFlag, born timestamp, message flag, reconsume
    times, body, stored properties, index keys)."""
    return (100 * (i + 1), code, flag, i, 0, topic, queue, i % 2, 1_700_000_000_000 + i, i % 3,
            i % 4, body, b"UNIQ_KEY\x01k%d\x02" % i, keys)


def _sends() -> list[tuple]:
    return [_send(i, topic=f"T{i % 3}", queue=i % 4, keys=i % 2,
                  flag=RPC_ONEWAY if i % 5 == 0 else 0, code=310 if i % 2 else 10)
            for i in range(40)]


def _twins(name_py: str, name_c: str, module):
    py = getattr(module, name_py)
    c = getattr(_APPEND, name_c) if _APPEND is not None else None
    return py, c


@pytest.mark.parametrize("limit", [1 << 30, 20 * 160])
@pytest.mark.parametrize("max_body", [4 << 20, 50])
def test_plain_runs_twins_agree(limit: int, max_body: int) -> None:
    py, c = _twins("_plain_runs", "plain_runs", commit_log)
    sends = _sends()
    sends[7] = _send(7, body=b"y" * 60)  # bigger than a 50-byte max body: the run stops there
    table = {("T1", 1): 5, ("T0", 0): 2}
    want = py(sends, 0x10, dict(table), max_body, limit)
    runs, queues, keys_of, total = want
    assert total == sum(keys_of) and len(runs) == len(keys_of)
    if max_body == 50:
        assert runs == []
    elif limit == 1 << 30:
        assert len(runs) == len(sends)
        # queue offsets: the table's next, then one more per send of the queue
        offsets = [r[3] for r in runs if (r[0], r[1]) == (b"T1", 1)]
        assert offsets == list(range(5, 5 + len(offsets)))
        assert sum(q[3] for q in queues) == len(runs)
    if c is not None:
        assert c(sends, 0x10, dict(table), max_body, limit) == want


def test_plain_stored_and_tally_twins_agree() -> None:
    sends = _sends()
    runs = commit_log._plain_runs(sends, 0, {}, 4 << 20, 1 << 30)[0]
    entries = [SimpleNamespace(pos=1000 * i) for i in range(len(runs) - 3)]  # the leading ones
    py_stored, c_stored = _twins("_plain_stored", "plain_stored", commit_log)
    py_table: dict = {("T0", 0): 1}
    stored = py_stored(entries, sends, runs, py_table, 48)
    assert len(stored) == len(entries)
    assert stored[1] == (entries[1], 1048, runs[1][3], runs[1][9])
    py_tally, c_tally = _twins("_tally", "tally", dledger_lane)
    sizes: dict = {"T1": [2, 10]}
    counts: dict = {}
    py_tally(sends, stored, sizes, counts, RPC_ONEWAY)
    assert sum(counts.values()) == len(stored)
    assert sizes["T1"][0] == 2 + sum(1 for s in sends[:len(stored)] if s[5] == "T1")
    if c_stored is None:
        return
    c_table: dict = {("T0", 0): 1}
    assert c_stored(entries, sends, runs, c_table, 48) == stored
    assert list(c_table.items()) == list(py_table.items())
    c_sizes: dict = {"T1": [2, 10]}
    c_counts: dict = {}
    c_tally(sends, stored, c_sizes, c_counts, RPC_ONEWAY)
    assert (list(c_sizes.items()), list(c_counts.items())) == \
        (list(sizes.items()), list(counts.items()))


@pytest.mark.compiled_only
@pytest.mark.parametrize("queues", [1, 8, 64, 65, 200])
def test_runs_stored_and_tally_twins_agree_past_the_counted_queues(queues: int) -> None:
    """The compiled calls count a read's queues, topics and (code, oneway)
    pairs in C up to 64 of each and go per send beyond: the same rows,
    queues, table (its entries and their order), sizes and counts as the
    twins either way, with a table that already holds some of the queues."""
    sends = [_send(i, topic=f"T{i % queues % 70}", queue=i % queues, keys=i % 3,
                   flag=RPC_ONEWAY if i % 7 == 0 else 0, code=300 + i % (queues + 1))
             for i in range(3 * queues + 5)]
    table = {("T1", 1): 9, ("X", 0): 3, (f"T{(queues - 1) % 70}", queues - 1): 4}
    outs = []
    for plain_runs, plain_stored, tally in (
            (commit_log._plain_runs, commit_log._plain_stored, dledger_lane._tally),
            (_APPEND.plain_runs, _APPEND.plain_stored, _APPEND.tally)):
        own = dict(table)
        runs = plain_runs(sends, 0x10, own, 4 << 20, 1 << 30)
        entries = [SimpleNamespace(pos=900 * i) for i in range(len(runs[0]) - 2)]
        stored = plain_stored(entries, sends, runs[0], own, 48)
        sizes: dict = {"T1": [2, 10]}
        counts: dict = {(301, False): 4}
        tally(sends, stored, sizes, counts, RPC_ONEWAY)
        outs.append((runs, stored, list(own.items()), list(sizes.items()),
                     list(counts.items())))
    assert outs[0] == outs[1]


def _plain(index: int, size: int) -> SimpleNamespace:
    return SimpleNamespace(index=index, size=size, body=b"b" * (size - 48))


def _entry(index: int, size: int) -> Entry:
    return Entry(index, 3, b"b" * (size - 48), 0, size=size)


def _mixed(index: int, size: int) -> Entry | SimpleNamespace:
    return (_entry if index % 2 else _plain)(index, size)


# entries read through their attributes, from their slots (the compiled calls
# read an ``Entry``'s fields there), and both in one list
KINDS = [_plain, _entry, _mixed]


def _store(make) -> SimpleNamespace:
    """A leader's store of entries 1 to 7 (each 49 + index bytes), 3 to 6
    kept (``get`` reads the others)."""
    recent = [make(i, 49 + i) for i in range(3, 7)]
    read = []

    def get(index: int):
        read.append(index)
        if not 1 <= index <= 7:
            raise IndexError(index)
        return make(index, 49 + index)

    return SimpleNamespace(_recent=recent, _recent_first=3, ledger_begin_index=1,
                           ledger_end_index=7, get=get, read=read)


@pytest.mark.parametrize("make", KINDS)
@pytest.mark.parametrize("max_bytes", [0, 150, 1000, 1 << 20])
def test_kept_run_twins_agree(max_bytes: int, make) -> None:
    """A push's entries: the kept ones (``get`` for one not kept) up to a
    size or the ledger's end; the first one's size computed from its body."""
    impls = [mmap_store._kept_run] + ([_PUSH.kept_run] if _PUSH is not None else [])
    outs = []
    for impl in impls:
        store = _store(make)
        runs = [[(e.index, e.size) for e in impl(store, first, max_bytes)] for first in (1, 3, 7)]
        with pytest.raises(IndexError):
            impl(store, 8, max_bytes)
        outs.append((runs, store.read))
    assert all(out == outs[0] for out in outs)
    runs, read = outs[0]
    if max_bytes == 0:
        assert runs == [[(1, 50)], [(3, 52)], [(7, 56)]] and read == [1, 7, 8]
    if max_bytes == 1 << 20:
        assert runs[0] == [(i, 49 + i) for i in range(1, 8)] and read == [1, 2, 7, 7, 7, 8]


@pytest.mark.parametrize("make", KINDS)
@pytest.mark.parametrize("max_bytes", [10_000, 300, 0])
@pytest.mark.parametrize("start", [True, False])
def test_keep_more_twins_agree(max_bytes: int, start: bool, make) -> None:
    """A read's appended entries kept for the pushes, the oldest dropped
    beyond a size (never the last one): the same kept entries, first index
    and size from the compiled call as from its twin."""
    impls = [mmap_store._keep_more] + ([_PUSH.keep_more] if _PUSH is not None else [])
    outs = []
    for impl in impls:
        recent = [] if start else [make(i, 50) for i in range(3, 7)]
        first, kept = (0, 0) if start else (3, 200)
        got = []
        for n in range(3):  # three reads of four entries each
            entries = [make(7 + 4 * n + i, 40 + i) for i in range(4)]
            first, kept = impl(recent, entries, first, kept, max_bytes)
            got.append((first, kept, [e.index for e in recent]))
        outs.append(got)
    assert all(o == outs[0] for o in outs)
    first, kept, indexes = outs[0][-1]
    assert indexes == list(range(first, 19)) and kept == sum(
        40 + (i - 7) % 4 if i >= 7 else 50 for i in indexes)
    if max_bytes == 0:
        assert indexes == [18]
    if max_bytes == 10_000:
        assert first == (7 if start else 3)
    if max_bytes == 300:  # past 300 bytes, dropped down to 225 at once
        assert all(k <= 300 for _f, k, _i in outs[0]) and kept <= 225


@pytest.mark.parametrize("make", KINDS)
def test_keep_more_starts_again_at_entries_that_do_not_follow(make) -> None:
    """Entries that do not follow the kept ones (a rewritten log) replace
    them; none to add changes nothing -- the compiled call as its twin; a
    kept entry is found by its index from the first one's."""
    impls = [mmap_store._keep_more] + ([_PUSH.keep_more] if _PUSH is not None else [])
    outs = []
    for impl in impls:
        recent = [make(i, 50) for i in range(3, 7)]
        got = [impl(recent, [], 3, 200, 1000), [e.index for e in recent]]
        got += [impl(recent, [make(5, 60), make(6, 61)], 3, 200, 1000),
                [e.index for e in recent]]
        got += [impl(recent, [make(9, 70)], 5, 121, 1000), [e.index for e in recent]]
        outs.append(got)
    assert all(o == outs[0] for o in outs)
    assert outs[0] == [(3, 200), [3, 4, 5, 6], (5, 121), [5, 6], (9, 70), [9]]
    recent = [make(i, 50) for i in range(3, 7)]
    assert [mmap_store.kept_entry(recent, 3, i) for i in (2, 3, 6, 7)] == \
        [None, recent[0], recent[3], None]

