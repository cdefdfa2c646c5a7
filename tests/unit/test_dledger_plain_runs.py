"""A DLedger leader's lane reads stored, counted and answered in one compiled
call (``store_plain``: the sends' records and queues in C arrays) against
its pure-Python twin (``append_plain``'s ``plain_runs``, ``append_run`` and
``plain_stored``, ``_tally``, ``plain_answers``) on the same reads and
stores, and a push's kept entries (``kept_run``) and a read's appended
entries kept (``keep_more``) against theirs."""

from __future__ import annotations

import dataclasses
import functools
import gc
import itertools
from types import SimpleNamespace

import pytest

from rmq._fast import compiled_or_none
from rmq.broker import dledger_lane
from rmq.broker.dledger_lane import ANSWERED
from rmq.broker.processor.send_support import V1_KEYS, V2_KEYS
from rmq.broker.send_lane import SendLane, SendLaneSupport, plain_answers, response_frame
from rmq.common.message_id import socket_address_bytes
from rmq.common.topic_config import MULTI_TAG, SINGLE_TAG, TopicConfig
from rmq.dledger import commit_log, mmap_store
from rmq.dledger.entry import Entry
from rmq.dledger.member_state import MemberState, Role
from rmq.dledger.mmap_store import DLedgerMmapFileStore
from rmq.remoting.command import RPC_ONEWAY, RemotingCommand
from rmq.store.dispatch_room import DispatchRoom
from tests.unit.test_dledger_store import _files, _hosts
from tests.unit.test_dledger_store import _store as _file_store

_LANE = compiled_or_none("send_lane")
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


@pytest.mark.parametrize("limit", [1 << 30, 20 * 160])
@pytest.mark.parametrize("max_body", [4 << 20, 50])
def test_plain_runs_counts_each_queues_offsets(limit: int, max_body: int) -> None:
    """``plain_runs`` (the twin's rows, which the compiled ``store_plain``
    keeps in C): each send's queue offset the table's next, then one more
    per send of the queue; the run stops before a send too big."""
    sends = _sends()
    sends[7] = _send(7, body=b"y" * 60)  # bigger than a 50-byte max body: the run stops there
    table = {("T1", 1): 5, ("T0", 0): 2}
    runs, queues, keys_of, total = commit_log.plain_runs(sends, 0x10, dict(table), max_body,
                                                         limit)
    assert total == sum(keys_of) and len(runs) == len(keys_of)
    if max_body == 50:
        assert runs == []
    elif limit == 1 << 30:
        assert len(runs) == len(sends)
        offsets = [r[3] for r in runs if (r[0], r[1]) == (b"T1", 1)]
        assert offsets == list(range(5, 5 + len(offsets)))
        assert sum(q[3] for q in queues) == len(runs)


class _StoreByAttributes(DLedgerMmapFileStore):
    """A store whose fields the compiled append does not take at their
    slots (a ``__setattr__`` of its own): read and set through its
    attributes."""

    def __setattr__(self, name, value):
        object.__setattr__(self, name, value)


class _StateByAttributes(MemberState):
    """A member state read and set through its attributes (as above)."""

    def __setattr__(self, name, value):
        object.__setattr__(self, name, value)


def _run_state(store: DLedgerMmapFileStore) -> tuple:
    """What an append leaves: the files, the ledger's ends, the member
    state's, the kept entries."""
    ms = store.member_state
    return (_files(store), store.ledger_begin_index, store.ledger_end_index,
            store.ledger_end_term, ms.ledger_end_index, ms.ledger_end_term,
            [(mf.wrote_position, mf.committed_position)
             for q in (store.data, store.index) for mf in q.mapped_files],
            [e.index for e in store._recent], store._recent_first, store._recent_bytes,
            [mf.zeroed_to for mf in store.data.mapped_files])


class _CqFiles:
    """A consume queue's files as the dispatch room reads and makes them:
    made, each reserved whole, while the store's ``made`` allows (then
    refused as a full disk)."""

    def __init__(self, made: list[int | None], path: str, size: int) -> None:
        self.mapped_files: list[SimpleNamespace] = []
        self.made = made
        self.store_paths = [path]
        self.no_space = True
        self.last_error = "no space"
        self.size = size

    def create_at(self, offset: int) -> SimpleNamespace | None:
        if self.made[0] is not None:
            if self.made[0] == 0:
                return None
            self.made[0] -= 1
        mf = SimpleNamespace(file_from_offset=offset, reserved_to=self.size)
        self.mapped_files.append(mf)
        return mf


class _Index:
    """An index with room for ``room`` keys, made bigger by a file of 64
    when asked."""

    def __init__(self, room: int, path: str) -> None:
        self.room = room
        self.promised = 0
        self.file_size = 4096
        self.store_path = path
        self.no_space = False
        self.last_error = ""

    def keys_fit(self, keys: int) -> bool:
        return keys + self.promised <= self.room

    def make_room(self, keys: int) -> bool:
        self.room += 64
        return True


class _Store:
    """What a ``DispatchRoom`` checks of a store: consume queues of
    ``cq_entries`` entries a file, made when first asked for, at most
    ``files`` files in all (None: any), the index, dispatch on commit."""

    def __init__(self, cq_entries: int, files: int | None, index_room: int, path: str) -> None:
        self.consume_queue_table: dict[str, dict[int, SimpleNamespace]] = {}
        self.cq_size = 20 * cq_entries
        self.made = [files]
        self.path = path
        self.config = SimpleNamespace(messageIndexEnable=True)
        self.index_service = _Index(index_room, path)
        self.commit_service = None
        self.commit_log = SimpleNamespace(dispatch_on_commit=True)
        self.dispatch_room = DispatchRoom(self)

    def find_consume_queue(self, topic: str, queue_id: int) -> SimpleNamespace:
        queues = self.consume_queue_table.setdefault(topic, {})
        cq = queues.get(queue_id)
        if cq is None:
            cq = queues[queue_id] = SimpleNamespace(topic=topic, queue_id=queue_id,
                                                    file_size=self.cq_size,
                                                    mfq=_CqFiles(self.made, self.path, self.cq_size))
        return cq

    def state(self) -> tuple:
        """The files made per queue (in the order made), the keys promised."""
        return ([(t, q, [mf.file_from_offset for mf in cq.mfq.mapped_files])
                 for t, qs in self.consume_queue_table.items() for q, cq in qs.items()],
                self.index_service.promised, self.index_service.room)


# (consume-queue entries a file, files the disk takes, index room): queues made
# by the first read's sends one by one, then covered at once; small files whose
# ends the reads cross; a disk full after three files; an index file made now
# and then
ROOMS = [(4096, None, 10**6), (16, None, 10**6), (16, 3, 10**6), (4096, None, 40)]


TAILS = (b'","MSG_REGION":"DefaultRegion","TRACE_ON":"true","opaque":',
         b"\x00\x0aMSG_REGION\x00\x00\x00\x0dDefaultRegion\x00\x08TRACE_ON\x00\x00\x00\x04true")
HOST_HEX = b"7F00000100002A9F"
NOW = 1_700_000_000_123


def _commit_log(store, table: dict, queues: _Store, max_body: int) -> SimpleNamespace:
    """What ``append_plain`` (the twin's, bound to it) and the compiled
    ``store_plain`` read of a ``DLedgerCommitLog``."""
    cl = SimpleNamespace(topic_queue_table=table, config=SimpleNamespace(maxMessageSize=max_body),
                         file_size=store.data.mapped_file_size, store=queues,
                         store_host_field=_hosts()[1], dledger=store)
    cl.append_plain = functools.partial(commit_log.DLedgerCommitLog.append_plain, cl)
    return cl


def _frame(i: int, topic: str, queue: int, body: bytes, keys: int, flag: int, code: int,
           stype: int) -> bytes:
    """A plain send's frame (a SEND_MESSAGE's V1 header or a V2's), opaque
    ``i``, ``keys`` index keys besides its UNIQ_KEY."""
    listed = " ".join(f"key{k}" for k in range(keys))
    props = f"UNIQ_KEY\x01k{i}\x02" + (f"KEYS\x01{listed}\x02" if keys else "")
    values = ("g", topic, "TBW102", "4", str(queue), str(i % 2), str(1_700_000_000_000 + i),
              str(i % 3), props, str(i % 4), "false", "16")
    names = V1_KEYS if code == 10 else V2_KEYS
    return RemotingCommand(code, 0, 409, i, flag, None, dict(zip(names, values, strict=False)),
                           body, stype).encode()


def _many_frames(queues: int) -> list[bytes]:
    """Sends round ``queues`` queues and ``queues`` % 70 topics (the compiled
    counts go per send past 64), both request codes, oneway ones among
    them, both serializations, and one body too big for a 3000-byte max."""
    frames = [_frame(i, f"T{i % queues % 70}", i % queues, b"x" * (200 + i * 37 % 700), i % 3,
                     RPC_ONEWAY if i % 7 == 0 else 0, 310 if i % 3 else 10, 1 if i % 4 == 1 else 0)
              for i in range(3 * queues + 45)]
    frames[30] = _frame(30, "T0", 0, b"z" * 3500, 0, 0, 310, 0)
    return frames


class _Topics:
    """The support a lane's reading asks: the broker's topic configs (the
    compiled lane reads them, the twin asks ``topic``), every topic taking
    512 queues (queue ids past CPython's cached small ints among them),
    ``T1`` filtered by MULTI_TAGS."""

    def __init__(self) -> None:
        self.topics = SimpleNamespace(table={
            f"T{i}": TopicConfig(f"T{i}", 512, 512,
                                 topicFilterType=MULTI_TAG if i == 1 else SINGLE_TAG)
            for i in range(70)})

    topic = SendLaneSupport.topic


def _lanes() -> tuple:
    """The compiled and the twin lane, each leading while ``leading``."""

    class _Compiled(_LANE.SendLane):
        leading = True

        def leads(self) -> bool:
            return self.leading

    class _Twin(SendLane):
        leading = True

        def leads(self) -> bool:
            return self.leading

    return _Compiled(_Topics(), 1 << 20), _Twin(_Topics(), 1 << 20)


def _serve(store_read, cl, frames: list[bytes], born: bytes) -> tuple:
    """The frames served in reads of up to 20 as the lane serves them: what
    each read stored, up to where, its first and last entries, answers and
    answered sends, the counts."""
    sizes: dict = {"T1": [2, 10]}
    counts: dict = {(310, False): 4}
    reads = []
    buf = b"".join(frames)
    ends = list(itertools.accumulate(len(f) for f in frames))
    at = pos = 0
    while at < len(frames):
        end = ends[min(at + 20, len(frames)) - 1]
        got = store_read(b"DefaultCluster", buf, pos, end, cl, 0x10 if len(born) == 20 else 0,
                         born, NOW, HOST_HEX, TAILS, sizes, counts)
        reads.append(got)
        if got[0]:
            at += got[0]
            assert got[1] == ends[at - 1]
        else:
            at += 1  # (the general path takes the one the lane left)
        pos = ends[at - 1]
    return reads, list(sizes.items()), list(counts.items())


@pytest.mark.compiled_only
@pytest.mark.parametrize("room", ROOMS)
@pytest.mark.parametrize("queues", [1, 8, 65, 200, 300])
@pytest.mark.parametrize("classes", [(DLedgerMmapFileStore, MemberState),
                                     (_StoreByAttributes, _StateByAttributes)])
@pytest.mark.parametrize("born6", [False, True])
def test_store_read_compiled_and_twin_store_count_and_answer_the_same(
        tmp_path, room: tuple, queues: int, classes: tuple, born6: bool) -> None:
    """``store_read``: the compiled call (the sends read into C arrays, their
    records and queues kept there, the store's fields at their slots or
    through the attributes) and its twin (``plain_sends``, ``append_plain``,
    ``plain_answers``, ``_tally``) read, store, count and answer a lane's
    reads alike -- the same data and index files (across their ends),
    entries, ledger ends and kept entries, topic queue table (its entries
    and their order), dispatch-room questions, put statistics, request
    counts, answer frames and answered sends --, stop before a send too
    big, and store nothing for a store that no longer leads or a lane that
    does not lead."""
    born = socket_address_bytes(("::1", 4000) if born6 else ("127.0.0.1", 4000))
    frames = _many_frames(queues)
    head = b"".join(frames[:3])
    outs = []
    clane, tlane = _lanes()
    for name, store_read in (("c", clane.store_read),
                             ("t", functools.partial(dledger_lane._store_read, tlane))):
        store = _file_store(tmp_path / name, term=2, data_size=1 << 13,
                            store_class=classes[0], state_class=classes[1])
        store.data.zero_ahead = True  # (a DLedger commit log's, rmqZeroFillAheadEnable)
        table = {("T1", 1): 9, ("X", 0): 3, (f"T{(queues - 1) % 70}", queues - 1): 4}
        queues_store = _Store(*room, str(tmp_path))
        cl = _commit_log(store, table, queues_store, 3000)
        reads, sizes, counts = _serve(store_read, cl, frames, born)
        entries = [store.get(i) for i in range(store.ledger_end_index + 1)]
        kept = list(store._recent)
        store.member_state.role = Role.FOLLOWER
        refused = store_read(b"C", head, 0, len(head), cl, 0, born, NOW, HOST_HEX, TAILS, {}, {})
        store.member_state.role = Role.LEADER
        for lane in (clane, tlane):
            lane.leading = False
        declined = store_read(b"C", head, 0, len(head), cl, 0, born, NOW, HOST_HEX, TAILS, {}, {})
        for lane in (clane, tlane):
            lane.leading = True
        outs.append(([(n, after, a and dataclasses.astuple(a), b and dataclasses.astuple(b),
                       answers, answered) for n, after, a, b, answers, answered in reads],
                     sizes, counts, list(table.items()), queues_store.state(),
                     [dataclasses.astuple(e) for e in entries],
                     [dataclasses.astuple(e) for e in kept], _run_state(store), refused, declined,
                     store.ledger_end_index))
        if name == "c":
            # (entries made in place hold ints and bytes alone: left out of the
            # collector's walks; the few appended where a file ends are not)
            assert all(type(e) is Entry for e in kept)
            assert sum(gc.is_tracked(e) for e in kept) <= \
                min(len(store.data.mapped_files) + len(store.index.mapped_files), len(kept) - 1)
            # (the push JSON of a leader with followers kept by each entry made in place)
            assert all(e.wire == Entry(e.index, e.term, e.body, e.pos).json_bytes()
                       for e in kept if gc.is_tracked(e) is False)
        store.shutdown()
    assert outs[0] == outs[1]
    assert outs[0][7][-1][-1] > 0  # zeros written ahead of the appends, by both alike
    reads = outs[0][0]
    assert outs[0][-3] == outs[0][-2] == (0, 0, None, None, b"", b"")
    stored = sum(r[0] for r in reads)
    answered = [opaque for r in reads for opaque, _stype in ANSWERED.iter_unpack(r[5])]
    assert answered and len(answered) == len(set(answered))
    assert all(o % 7 for o in answered)  # (oneway sends get no answer)
    if room[1] is None:
        assert stored == len(frames) - 1  # all but the one too big
        assert len(outs[0][7][0][0]) > 2  # across data files' ends
    else:
        assert 0 < stored < min(3 * 16, len(frames) - 1)  # refused once the disk is full
    made = outs[0][4]
    assert sum(len(files) for _t, _q, files in made[0]) >= min(queues, 3)
    assert sum(n for (_code, _oneway), n in outs[0][2]) == stored + 4


def test_a_reads_answers_are_response_frame() -> None:
    """``plain_answers`` (the twin's): ``response_frame`` per answered send
    (JSON and ROCKETMQ headers, oneway sends skipped, large offsets)."""
    sends, stored = [], []
    for i in range(12):
        flag = RPC_ONEWAY if i % 5 == 3 else 0
        sends.append((100 * i, 310, flag, 7000 + i, i % 2, "T", i % 8))
        stored.append((None, (1 << 40) + 977 * i if i % 4 else i, 2**33 + i, 1200))
    assert plain_answers(HOST_HEX, TAILS, sends, stored) == b"".join(
        response_frame(HOST_HEX, put[1], send[6], put[2], send[3], TAILS[send[4]], send[4])
        for send, put in zip(sends, stored, strict=True) if not send[2] & RPC_ONEWAY)
    assert plain_answers(HOST_HEX, TAILS, sends[:0], stored) == b""


@pytest.mark.compiled_only
def test_store_read_refuses_bad_tails_before_storing(tmp_path) -> None:
    store = _file_store(tmp_path, term=2)
    cl = _commit_log(store, {}, _Store(*ROOMS[0], str(tmp_path)), 4 << 20)
    head = b"".join(_many_frames(1)[:2])
    for bad in ((TAILS[0],), (TAILS[0], None)):
        with pytest.raises(TypeError):
            _lanes()[0].store_read(b"C", head, 0, len(head), cl, 0, _hosts()[0], NOW, HOST_HEX,
                                   bad, {}, {})
    assert store.ledger_end_index == -1
    store.shutdown()


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



@pytest.mark.compiled_only
def test_store_read_tops_zeros_up_only_when_short(tmp_path, monkeypatch) -> None:
    """The compiled ``store_read`` reads a data file's zeros ahead at its
    slots and asks ``MappedFile.zero_ahead`` only when fewer than
    ``ZERO_AHEAD`` are left (the twin asks every read, and the method
    returns at once): the same files and zeros either way, fewer calls."""
    from rmq.store import mapped_file

    calls = {"c": 0, "t": 0}
    who = ["c"]
    plain = mapped_file.MappedFile.zero_ahead

    def counted(mf) -> None:
        calls[who[0]] += 1
        plain(mf)

    monkeypatch.setattr(mapped_file.MappedFile, "zero_ahead", counted)
    frames = _many_frames(8) * 6
    born = socket_address_bytes(("127.0.0.1", 4000))
    clane, tlane = _lanes()
    states = []
    for name, store_read in (("c", clane.store_read),
                             ("t", functools.partial(dledger_lane._store_read, tlane))):
        who[0] = name
        store = _file_store(tmp_path / name, term=2, data_size=4 << 20)
        store.index.mapped_file_size = 1 << 20
        store.data.zero_ahead = True
        cl = _commit_log(store, {}, _Store(4096, None, 10**6, str(tmp_path)), 3000)
        reads, _sizes, _counts = _serve(store_read, cl, frames, born)
        states.append((_run_state(store), [r[:2] for r in reads]))
        store.shutdown()
    assert states[0] == states[1]
    assert states[0][0][-1][0] >= mapped_file.ZERO_AHEAD  # zeros kept ahead by both
    assert 0 < calls["c"] < calls["t"] // 2, calls
