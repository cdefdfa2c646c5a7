"""A follower's append of a whole push from ``decode_push``'s rows (no
``Entry`` per row): ``write_rows`` compiled and twin, ``append_rows_as_follower``
against ``append_all_as_follower`` and one entry at a time, and the DLedger
processor's push path with it against the general one (``FollowerHandler``)."""

from __future__ import annotations

import asyncio

import pytest

from rmq._fast import compiled, compiled_or_none
from rmq.dledger import messages, mmap_store, server
from rmq.dledger.config import DLedgerConfig
from rmq.dledger.entry import INDEX_UNIT_SIZE, Entry
from rmq.dledger.member_state import MemberState, Role
from rmq.dledger.mmap_store import DLedgerMmapFileStore
from rmq.dledger.protocol import Code, DLedgerError, RequestCode
from rmq.remoting.command import RemotingCommand

_APPEND = compiled_or_none("dledger_append")
# a follower's append of a push's rows: the twin, and the compiled one (its
# common case in C, the rest through the twin) when the store bound it
_BOUND = compiled("dledger_append")
APPEND_ROWS = [mmap_store.append_rows_twin] + ([_BOUND.append_rows] if _BOUND else [])


def _store(path, role: Role = Role.FOLLOWER, data_size: int = 1 << 12,
           units: int = 64) -> DLedgerMmapFileStore:
    config = DLedgerConfig(group="g", self_id="n1", peers="n0-127.0.0.1:1;n1-127.0.0.1:2",
                           store_base_dir=str(path), mapped_file_size_for_entry_data=data_size,
                           mapped_file_size_for_entry_index=INDEX_UNIT_SIZE * units)
    config.validate()
    ms = MemberState(config)
    ms.curr_term = 2
    ms.role = role
    ms.leader_id = "n0"
    store = DLedgerMmapFileStore(config, ms)
    store.startup()
    return store


def _leader_entries(path, count: int, data_size: int = 1 << 12) -> list[Entry]:
    """``count`` entries as a leader's files hold them (bodies of many sizes,
    some empty), across data file ends."""
    leader = _store(path, Role.LEADER, data_size)
    for i in range(count):
        leader.append_as_leader(bytes([i % 251]) * ((i * 37) % 700 if i % 9 else 0))
    entries = [leader.get(i) for i in range(count)]
    leader.shutdown()
    return entries


def _row(e: Entry) -> tuple:
    """The entry as ``decode_push`` reads it."""
    return (e.index, e.term, e.body, e.pos, e.magic, e.channel, e.chain_crc, e.body_crc,
            e.size)


def _files(store: DLedgerMmapFileStore) -> tuple[list[bytes], list[bytes]]:
    store.flush()
    return ([bytes(mf.view[:mf.wrote_position]) for mf in store.data.mapped_files],
            [bytes(mf.view[:mf.wrote_position]) for mf in store.index.mapped_files])


@pytest.mark.compiled_only
@pytest.mark.parametrize("room", [30_000, 3_000, 700, 0])
def test_write_rows_compiled_and_twin_write_the_same(tmp_path, room):
    """The same data and index bytes and counts from the compiled writer and
    its twin, stopping where the data room or the index room ends."""
    assert _APPEND is not None, "rmq._fast.dledger_append is not built (make ext)"
    entries = _leader_entries(tmp_path, 60, 1 << 16)
    rows = [_row(e) for e in entries[10:]]
    pos = entries[10].pos
    results = []
    for write in (_APPEND.write_rows, mmap_store._write_rows):
        data, index = bytearray(room + 100), bytearray(32 * 30 + 16)
        got = write(data, 50, pos, room, index, 16, 32 * 30, 10, rows)
        results.append((bytes(data), bytes(index), got))
    assert results[0] == results[1]
    written = results[0][2][0]
    assert written == {30_000: 30, 0: 0}.get(room, written) and written <= 30
    with pytest.raises(ValueError):
        _APPEND.write_rows(bytearray(10), 0, 0, 11, bytearray(32), 0, 32, 0, rows)


@pytest.mark.compiled_only
def test_write_rows_stops_at_a_row_out_of_order():
    """A row whose index or pos is not the next, or with a field out of an
    int's range, ends the run (the general append refuses or places it)."""
    assert _APPEND is not None, "rmq._fast.dledger_append is not built (make ext)"
    good = [(5, 1, b"ab", 100, 1, 0, 0, 0, 50), (6, 1, b"", 150, 1, 0, 0, 0, 48)]
    for bad in [(7, 1, b"x", 199, 1, 0, 0, 0, 49), (8, 1, b"x", 198, 1, 0, 0, 0, 49),
                (7, 1, b"x", 198, 2**31, 0, 0, 0, 49), (7, 1, b"x", 198, 1, 0, 0, -2**31 - 1, 49),
                (2**64 + 7, 1, b"x", 198, 1, 0, 0, 0, 49), (7, 1, b"x", 2**64 + 198, 1, 0, 0, 0, 49),
                (7, 1, b"x", 198, 1, 2**80, 0, 0, 49)]:
        for write in (_APPEND.write_rows, mmap_store._write_rows):
            data, index = bytearray(1000), bytearray(320)
            assert write(data, 100, 100, 900, index, 160, 160, 5, good + [bad]) == (2, 98, 64)
            assert bytes(data[198:]) == bytes(802) and bytes(index[224:]) == bytes(96)
    edge = (7, 1, b"x", 198, -2**31, 2**31 - 1, -2**31, 2**31 - 1, 49)  # every int32 bound
    written = []
    for write in (_APPEND.write_rows, mmap_store._write_rows):
        data, index = bytearray(1000), bytearray(320)
        assert write(data, 100, 100, 900, index, 160, 160, 5, good + [edge]) == (3, 147, 96)
        written.append((bytes(data), bytes(index)))
    assert written[0] == written[1]


@pytest.mark.parametrize("append_rows", APPEND_ROWS)
@pytest.mark.parametrize("units", [64, 7])
def test_a_push_of_rows_is_what_append_all_writes(tmp_path, units, append_rows, monkeypatch):
    """``append_rows_as_follower`` (twin and compiled): the same data and
    index files, ends and entries as ``append_all_as_follower`` of the
    pushes and as one entry at a time, across data file ends (and index
    file ends: ``units``)."""
    monkeypatch.setattr(DLedgerMmapFileStore, "append_rows_as_follower", append_rows)
    entries = _leader_entries(tmp_path / "l", 120)
    one = _store(tmp_path / "a", units=units)
    many = _store(tmp_path / "b", units=units)
    rows = _store(tmp_path / "c", units=units)
    for e in entries:
        one.append_as_follower(e, 2, "n0")
    for at in range(0, 120, 9):
        many.append_all_as_follower(entries[at:at + 9], 2, "n0")
        rows.append_rows_as_follower([_row(e) for e in entries[at:at + 9]], 2, "n0")
    assert len(rows.data.mapped_files) > 5
    assert rows.ledger_end_index == many.ledger_end_index == one.ledger_end_index == 119
    assert rows.ledger_begin_index == 0 and rows.ledger_end_term == 2
    assert rows.member_state.ledger_end_index == 119
    assert _files(rows) == _files(many) == _files(one)
    assert [rows.get(i).same(one.get(i)) for i in range(120)] == [True] * 120
    for store in (one, many, rows):
        store.shutdown()


@pytest.mark.parametrize("append_rows", APPEND_ROWS)
def test_a_refused_row_keeps_the_rows_before_it(tmp_path, append_rows, monkeypatch):
    monkeypatch.setattr(DLedgerMmapFileStore, "append_rows_as_follower", append_rows)
    entries = _leader_entries(tmp_path / "l", 12)
    store = _store(tmp_path / "f")
    with pytest.raises(DLedgerError) as err:
        store.append_rows_as_follower([_row(entries[0])], 2, "n9")
    assert err.value.code is Code.INCONSISTENT_LEADER and store.ledger_end_index == -1
    with pytest.raises(DLedgerError) as err:
        store.append_rows_as_follower([_row(e) for e in entries[:4]] + [_row(entries[6])],
                                      2, "n0")
    assert err.value.code is Code.INCONSISTENT_INDEX and store.ledger_end_index == 3
    moved = _row(entries[4])[:3] + (entries[4].pos + 1,) + _row(entries[4])[4:]
    with pytest.raises(DLedgerError) as err:
        store.append_rows_as_follower([moved], 2, "n0")
    assert err.value.code is Code.DISK_ERROR and store.ledger_end_index == 3
    store.append_rows_as_follower([_row(e) for e in entries[4:6]], 2, "n0")
    assert store.ledger_end_index == store.member_state.ledger_end_index == 5
    store.member_state.role = Role.CANDIDATE
    with pytest.raises(DLedgerError) as err:
        store.append_rows_as_follower([_row(entries[6])], 2, "n0")
    assert err.value.code is Code.NOT_FOLLOWER
    store.member_state.role = Role.FOLLOWER
    with pytest.raises(DLedgerError) as err:
        store.append_rows_as_follower([_row(entries[6])], 3, "n0")
    assert err.value.code is Code.INCONSISTENT_LEADER and store.ledger_end_index == 5
    store.shutdown()


def test_the_store_appends_rows_compiled_when_built():
    assert DLedgerMmapFileStore.append_rows_as_follower is (
        mmap_store.append_rows_twin if _BOUND is None else _BOUND.append_rows)


def _member(path) -> server.DLedgerServer:
    config = DLedgerConfig(group="g", self_id="n1",
                           peers="n0-127.0.0.1:1;n1-127.0.0.1:2;n2-127.0.0.1:3",
                           store_base_dir=str(path), mapped_file_size_for_entry_data=1 << 12,
                           mapped_file_size_for_entry_index=INDEX_UNIT_SIZE * 16)
    member = server.DLedgerServer(config)
    member.store.startup()
    member.member_state.change_to_follower(2, "n0")
    return member


def _push(entries: list[Entry], commit: int, batch: bool = True, to: str = "n1",
          term: int = 2, group: str = "g") -> RemotingCommand:
    cmd = RemotingCommand.create_request(RequestCode.PUSH, None)
    cmd.body = messages.push_append_body(group, "n0", to, "n0", term, commit,
                                         [Entry(e.index, e.term, e.body, e.pos) for e in entries],
                                         batch)
    return cmd


def test_the_push_path_answers_and_stores_as_the_follower_handler(tmp_path, monkeypatch):
    """Pushes through the processor with rows (compiled decoder) and through
    ``FollowerHandler`` (the general path, the only one without the
    extensions): the same answers, files and committed index -- in order,
    out of order (parked), a resend, a wrong term, a wrong member."""
    entries = _leader_entries(tmp_path / "l", 60)
    script = [(0, 4, -1, {}), (4, 8, 3, {}), (8, 9, 7, {"batch": False}),
              (13, 16, 8, {}),  # ahead: parked until 9..12 arrive
              (9, 13, 8, {}), (16, 20, 15, {"term": 3}), (16, 20, 15, {"to": "n2"}),
              (16, 20, 15, {"group": "h"}), (4, 8, 15, {}), (16, 60, 19, {})]
    results = []
    for general in (False, True):
        member = _member(tmp_path / f"m{general}")
        if general:
            monkeypatch.setattr(server, "push_fields", lambda body: None)
        committed: list[int] = []
        member.commit_listeners.append(committed.append)
        by_rows = []
        append_rows = member.store.append_rows_as_follower

        def counted(rows, *args, by_rows=by_rows, append_rows=append_rows):
            by_rows.append(len(rows))
            append_rows(rows, *args)

        member.store.append_rows_as_follower = counted
        processor = server._Processor(member)

        async def run(processor=processor):
            answers = []
            parked = []
            for first, end, commit, kw in script:
                got = processor.process_request(None, _push(entries[first:end], commit, **kw))
                if isinstance(got, RemotingCommand):
                    answers.append((got.code, got.body))
                else:
                    parked.append(asyncio.ensure_future(got))
                    await asyncio.sleep(0)
            answers += [((await p).code, (await p).body) for p in parked]
            return answers

        answers = asyncio.run(run())
        results.append((answers, _files(member.store), member.store.ledger_end_index,
                        member.store.committed_index, committed))
        member.store.shutdown()
        # the rows' path takes the pushes in order (the wrong term refused there) but the
        # one after the parked one
        assert by_rows == ([] if general or messages._push is None else [4, 4, 1, 4, 44])
    assert results[0] == results[1]
    answers, _, end, committed_index, committed = results[0]
    assert end == 59 and committed_index == 19 and committed[-1] == 19
    assert all(code == Code.SUCCESS for code, _ in answers)
    assert b'"code":200,"count":4,"endIndex":3,"group":"g","index":0,"term":2' in answers[0][1]


@pytest.mark.parametrize("units", [64, 7])
def test_the_end_of_an_entry_is_the_twins(tmp_path, units):
    """``_end_of`` (the compiled one read from the mapped index unit and
    record header, when built) gives each entry's end as the twin does,
    across data and index file ends, and refuses an index outside the log
    with the twin's error."""
    entries = _leader_entries(tmp_path / "l", 60)
    store = _store(tmp_path / "f", units=units)
    for at in range(0, 60, 7):
        store.append_rows_as_follower([_row(e) for e in entries[at:at + 7]], 2, "n0")
    assert len(store.index.mapped_files) > 1 or units == 64
    assert [store._end_of(i) for i in range(60)] == \
        [mmap_store.end_of_twin(store, i) for i in range(60)] == \
        [e.pos + e.size for e in entries]
    for index in (-1, 60):
        with pytest.raises(DLedgerError) as got:
            store._end_of(index)
        with pytest.raises(DLedgerError) as want:
            mmap_store.end_of_twin(store, index)
        assert got.value.code is want.value.code
    store.shutdown()
