"""The DLedger entry layout, the file store (append, read, recovery, index
rebuild, truncation, blanks at file ends), the settings checks, and the store
inspector on a DLedger store holding commit-log records."""

from __future__ import annotations

import os
import random
import struct

import pytest

from rmq.common.message_id import socket_address_bytes
from rmq.dledger import mmap_store
from rmq.dledger.commit_log import _RecordWriter
from rmq.dledger.config import DLedgerConfig, DLedgerConfigError, parse_peers
from rmq.dledger.entry import (
    BLANK_MAGIC,
    BODY_OFFSET,
    INDEX_UNIT_SIZE,
    Entry,
    decode_index,
    encode_index,
)
from rmq.dledger.member_state import MemberState, Role
from rmq.dledger.mmap_store import DLedgerMmapFileStore
from rmq.dledger.protocol import Code, DLedgerError
from rmq.store import message_codec as codec
from rmq.store.inspect import inspect_store
from rmq.store.inspect import main as inspect_main

pytestmark = pytest.mark.timeout(60)

def test_entry_layout_is_dledgers():
    entry = Entry(index=7, term=3, body=b"hello", pos=4096, channel=0, chain_crc=11, body_crc=22)
    raw = entry.encode()
    assert len(raw) == BODY_OFFSET + 5 == entry.size
    assert raw[:BODY_OFFSET] == struct.pack(">iiqqqiiii", 1, 53, 7, 3, 4096, 0, 11, 22, 5)
    assert Entry.decode(raw).same(entry)
    assert Entry.from_json_obj(entry.to_json_obj()).same(entry)
    assert entry.to_json_obj()["body"] == "aGVsbG8="  # fastjson writes byte[] as base64
    unit = encode_index(4096, 53, 1, 7, 3)
    assert len(unit) == INDEX_UNIT_SIZE and decode_index(unit) == (1, 4096, 53, 7, 3)
    with pytest.raises(ValueError):
        Entry.decode(raw[:-1])


def test_peer_list_checks():
    assert parse_peers("n0-127.0.0.1:1;n1-localhost:2") == {"n0": "127.0.0.1:1",
                                                             "n1": "localhost:2"}
    for bad, message in (("n0-127.0.0.1:1;n0-127.0.0.1:2", "listed twice"),
                         ("n0127.0.0.1:1", "bad DLedger peer"), ("", "empty")):
        with pytest.raises(DLedgerConfigError, match=message):
            parse_peers(bad)
    config = DLedgerConfig(self_id="n2", peers="n0-127.0.0.1:1;n1-127.0.0.1:2")
    with pytest.raises(DLedgerConfigError, match="dLegerSelfId n2 is not in dLegerPeers"):
        config.validate()


def _store(tmp_path, role: Role = Role.LEADER, data_size: int = 4096,
           term: int = 1, store_class: type = DLedgerMmapFileStore,
           state_class: type = MemberState) -> DLedgerMmapFileStore:
    config = DLedgerConfig(group="g", self_id="n0", peers="n0-127.0.0.1:1;n1-127.0.0.1:2",
                           store_base_dir=str(tmp_path), mapped_file_size_for_entry_data=data_size,
                           mapped_file_size_for_entry_index=INDEX_UNIT_SIZE * 64)
    config.validate()
    ms = state_class(config)
    ms.curr_term = term
    ms.role = role
    ms.leader_id = "n0" if role is Role.LEADER else "n1"
    store = store_class(config, ms)
    store.startup()
    return store


def test_append_read_and_recover_across_files(tmp_path):
    store = _store(tmp_path)
    bodies = [os.urandom(100 + i * 37 % 900) for i in range(60)]
    entries = [store.append_as_leader(b) for b in bodies]
    assert [e.index for e in entries] == list(range(60))
    assert len(store.data.mapped_files) > 5  # 4 KiB files: blanks closed each of them
    for e in entries:
        assert store.get(e.index).body == bodies[e.index]
        assert e.pos // 4096 == (e.pos + e.size - 1) // 4096  # never split over two files
    closing = [e for e, nxt in zip(entries, entries[1:], strict=False)
               if nxt.pos // 4096 != e.pos // 4096 and (e.pos + e.size) % 4096]
    assert closing, "no file was closed with a blank"
    end = closing[0].pos + closing[0].size
    holder = store.data.find_mapped_file_by_offset(end)
    assert struct.unpack_from(">ii", holder.view, end % 4096) == (BLANK_MAGIC, 4096 - end % 4096)
    store.update_committed_index(1, 40)
    store.shutdown()
    again = _store(tmp_path, Role.FOLLOWER)
    assert (again.ledger_begin_index, again.ledger_end_index, again.ledger_end_term) == (0, 59, 1)
    assert again.committed_index == 40
    assert [again.get(i).body for i in range(60)] == bodies
    again.shutdown()


def test_committed_position_from_a_kept_entry_or_the_files(tmp_path):
    """The leader's commit reads a kept entry's end inline; the same end as
    an entry read from the files, and the index never moves back or past the
    ledger's end."""
    store = _store(tmp_path, data_size=1 << 20)
    entries = [store.append_as_leader(b"x" * (10 + i)) for i in range(8)]
    store.update_committed_index(1, 3)
    assert (store.committed_index, store.committed_pos) == (3, entries[3].pos + entries[3].size)
    store._forget_recent()  # the next one from the index unit and the record's header
    store.update_committed_index(1, 5)
    assert (store.committed_index, store.committed_pos) == (5, entries[5].pos + entries[5].size)
    store.update_committed_index(1, 4)  # never back
    assert store.committed_index == 5
    store.update_committed_index(1, 99)  # never past the end
    assert (store.committed_index, store.committed_pos) == (7, entries[7].pos + entries[7].size)
    store.shutdown()


def test_recovery_rebuilds_a_lost_index_and_cuts_a_torn_record(tmp_path):
    store = _store(tmp_path, data_size=1 << 20)
    for i in range(20):
        store.append_as_leader(f"entry {i}".encode() * 20)
    last = store.get(19)
    store.shutdown()
    for name in os.listdir(tmp_path / "dledger-n0" / "index"):
        os.unlink(tmp_path / "dledger-n0" / "index" / name)
    data_file = tmp_path / "dledger-n0" / "data" / ("0" * 20)
    with open(data_file, "r+b") as f:  # the last record torn: half its body gone
        f.seek(last.pos + BODY_OFFSET + 10)
        f.write(b"\0" * 4)
        f.seek(last.pos + 4)
        f.write(struct.pack(">i", 0))
    again = _store(tmp_path, data_size=1 << 20)
    assert again.ledger_end_index == 18
    assert again.get(5).body == b"entry 5" * 20
    assert again.append_as_leader(b"next").index == 19  # appends go on where it was cut
    again.shutdown()


def test_follower_truncation_replaces_a_divergent_tail(tmp_path):
    leader = _store(tmp_path / "a", term=2)
    for i in range(10):
        leader.append_as_leader(f"common {i}".encode())
    follower = _store(tmp_path / "b", Role.FOLLOWER, term=1)
    follower.member_state.curr_term = 2
    for i in range(7):
        follower.append_as_follower(leader.get(i), 2, "n1")
    follower.member_state.role = Role.LEADER  # an old leadership wrote a tail of its own
    follower.member_state.leader_id = "n0"
    follower.append_as_leader(b"divergent one")
    follower.append_as_leader(b"divergent two")
    follower.member_state.role = Role.FOLLOWER
    follower.member_state.leader_id = "n1"
    assert not follower.get(7).same(leader.get(7))
    assert follower.truncate(leader.get(7), 2, "n1") == 7
    assert follower.ledger_end_index == 7 and follower.get(7).same(leader.get(7))
    for i in range(8, 10):
        follower.append_as_follower(leader.get(i), 2, "n1")
    assert [follower.get(i).body for i in range(10)] == [leader.get(i).body for i in range(10)]
    with pytest.raises(DLedgerError) as err:
        follower.append_as_follower(leader.get(9), 2, "n1")
    assert err.value.code is Code.INCONSISTENT_INDEX
    follower.shutdown()
    again = _store(tmp_path / "b", Role.FOLLOWER, term=2)  # the cut tail stays cut
    assert again.ledger_end_index == 9 and again.get(8).body == b"common 8"
    again.shutdown()
    leader.shutdown()


def test_an_empty_follower_restarts_at_the_leaders_begin(tmp_path):
    leader = _store(tmp_path / "a", data_size=1 << 16)
    for _ in range(5):
        leader.append_as_leader(b"x" * 100)
    follower = _store(tmp_path / "b", Role.FOLLOWER, data_size=1 << 16)
    assert follower.truncate(leader.get(3), 1, "n1") == 3  # a leader whose log starts at 3
    assert (follower.ledger_begin_index, follower.ledger_end_index) == (3, 3)
    follower.append_as_follower(leader.get(4), 1, "n1")
    assert follower.get(4).same(leader.get(4))
    with pytest.raises(DLedgerError) as err:
        follower.get(2)
    assert err.value.code is Code.INDEX_LESS_THAN_LOCAL_BEGIN
    follower.shutdown()
    leader.shutdown()


def test_term_and_vote_survive_a_restart(tmp_path):
    config = DLedgerConfig(self_id="n0", peers="n0-127.0.0.1:1", store_base_dir=str(tmp_path))
    config.validate()
    ms = MemberState(config)
    assert ms.next_term() == 1
    ms.set_vote_for("n0")
    again = MemberState(config)
    assert (again.curr_term, again.vote_for) == (1, "n0")
    assert (tmp_path / "dledger-n0" / "currterm").read_text() == "currTerm=1\nvoteLeader=n0\n"


PHY_IN_RECORD = 4 + 4 + 4 + 4 + 4 + 8  # PHYSICALOFFSET's place in a commit-log record


def _message_store(tmp_path, count: int) -> list[int]:
    """A DLedger store holding commit-log records as 4.9.8's DLedgerCommitLog
    writes them (each record's PHYSICALOFFSET = entry pos + 48); their offsets."""
    store = _store(tmp_path, data_size=64 * 1024)
    store.append_hooks.append(lambda entry, record, body_at: record.__setitem__(
        slice(body_at + PHY_IN_RECORD, body_at + PHY_IN_RECORD + 8),
        struct.pack(">q", entry.pos + body_at)))
    host = socket_address_bytes(("127.0.0.1", 10911))
    offsets = []
    for i in range(count):
        props = codec.message_properties_to_string({"TAGS": "TagA"}).encode()
        body = f"message {i}".encode() * 40
        record = bytearray(codec.record_size(0, len(body), len(b"TopicD"), len(props)))
        codec.write_record(record, 0, i % 2, 0, i // 2, 0, 0, 1_700_000_000_000, host,
                           1_700_000_000_001, host, 0, 0, body, b"TopicD", props)
        offsets.append(store.append_as_leader(bytes(record)).pos + BODY_OFFSET)
    store.update_committed_index(1, count - 1)
    store.shutdown()
    return offsets


def test_the_inspector_reads_a_dledger_store(tmp_path, capsys):
    offsets = _message_store(tmp_path, 300)
    assert len(os.listdir(tmp_path / "dledger-n0" / "data")) > 1  # blanks were crossed
    report = inspect_store(str(tmp_path))
    assert report.errors == [] and report.messages == 300
    assert report.queues["TopicD/0"]["messages"] == 150 and report.queues["TopicD/1"]["last"] == 149
    assert report.dledger["entries"] == 300 and report.dledger["endIndex"] == 299
    assert report.dledger["committedIndex"] == "299"
    assert inspect_main([str(tmp_path)]) == 0
    assert "DLedger: selfId=n0, entries=300" in capsys.readouterr().out
    data_file = tmp_path / "dledger-n0" / "data" / ("0" * 20)
    with open(data_file, "r+b") as f:  # the 6th message's queue offset is changed
        f.seek(offsets[5] + 4 + 4 + 4 + 4 + 4)
        f.write(struct.pack(">q", 77))
    report = inspect_store(str(tmp_path), check_crc=False)
    assert any("queue offset 77" in e for e in report.errors), report.errors
    assert inspect_main([str(tmp_path), "--no-crc"]) == 1


def _files(store: DLedgerMmapFileStore) -> tuple[list[bytes], list[bytes]]:
    """The written bytes of the store's data files and index files (flushed)."""
    store.flush()
    return ([bytes(mf.view[:mf.wrote_position]) for mf in store.data.mapped_files],
            [bytes(mf.view[:mf.wrote_position]) for mf in store.index.mapped_files])


def test_a_push_appended_together_is_what_one_by_one_appends(tmp_path):
    """``append_all_as_follower``: the same data and index files as entry by
    entry, across a data file's end; a refused entry keeps those before it."""
    leader = _store(tmp_path / "a", term=2, data_size=1 << 12)
    for i in range(40):
        leader.append_as_leader(bytes([i]) * (50 + 13 * i))
    one = _store(tmp_path / "b", Role.FOLLOWER, term=2, data_size=1 << 12)
    many = _store(tmp_path / "c", Role.FOLLOWER, term=2, data_size=1 << 12)
    for s in (one, many):
        s.member_state.leader_id = "n1"
    for i in range(40):
        one.append_as_follower(leader.get(i), 2, "n1")
    many.append_all_as_follower([leader.get(i) for i in range(7)], 2, "n1")
    many.append_all_as_follower([leader.get(i) for i in range(7, 40)], 2, "n1")
    assert many.ledger_end_index == one.ledger_end_index == 39
    assert [many.get(i).same(one.get(i)) for i in range(40)] == [True] * 40
    assert _files(many) == _files(one)
    extra = leader.append_as_leader(b"next")
    with pytest.raises(DLedgerError) as err:
        many.append_all_as_follower([extra, leader.get(3)], 2, "n1")
    assert err.value.code is Code.INCONSISTENT_INDEX and many.ledger_end_index == 40
    for store in (leader, one, many):
        store.shutdown()


def _sends(count: int, born6: bool = False, seed: int = 7) -> list[tuple]:
    """``write_entries``' tuples of plain sends of several shapes (empty
    bodies and properties, several topics and queues), born on a v6 host
    with ``born6``, stored on a v4 one."""
    rnd = random.Random(seed)
    out = []
    for i in range(count):
        topic = (b"T%d" % (i % 3)) * (1 + i % 5)
        body = rnd.randbytes(rnd.choice((0, 1, 37, 300, 1200)))
        props = b"" if i % 7 == 0 else b"TAGS\x01t%d\x02KEYS\x01k%d k\x02WAIT\x01true" % (i, i)
        sys_flag = (0x10 if born6 else 0) | (i % 3)
        size = codec.record_size(sys_flag, len(body), len(topic), len(props))
        out.append((topic, i % 8, i % 3, 1000 + i, sys_flag, 1_600_000_000_000 + i, i % 2,
                    body, props, size))
    return out


def _hosts() -> tuple[bytes, bytes]:
    return socket_address_bytes(("127.0.0.1", 4000)), socket_address_bytes(("127.0.0.1", 10911))


@pytest.mark.parametrize("room", [20_000, 5_000, 1_000, 0])
def test_write_entries_stops_where_the_room_ends(room):
    """``write_entries`` (the twin of the lane's compiled writer, which
    ``test_dledger_plain_runs`` compares with it): the leading entries that
    leave a blank's room in the data file and whose index units fit, the
    bytes it wrote counted; a place outside a file or a send whose sizes do
    not add up refused."""
    born4, store = _hosts()
    born6 = socket_address_bytes(("::1", 4000))
    for born in (born4, born6):
        sends = _sends(40, len(born) == 20)
        data, index = bytearray(room + 100), bytearray(32 * 30 + 16)
        entries, used, iused = mmap_store.write_entries(
            data, 50, 8192 + 50, room, index, 16, 32 * 30, 77, 3, born, store,
            1_700_000_000_123, sends, Entry)
        made = len(entries)
        assert made == {20_000: 30, 0: 0}.get(room, made) and made <= 30  # the index room ends
        assert used == sum(e.size for e in entries) <= room and iused == 32 * made
        assert [e.index for e in entries] == list(range(77, 77 + made))
        assert data[:50] == bytes(50) and data[50 + used:] == bytes(len(data) - 50 - used)
        if made < 30:  # the next one would not have left a blank's room
            assert used + sends[made][9] + BODY_OFFSET + 8 > room
    with pytest.raises(ValueError):
        mmap_store.write_entries(bytearray(10), 0, 0, 11, bytearray(32), 0, 32, 0, 1, store,
                                 store, 0, [], Entry)
    bad = _sends(1)[0][:9] + (1,)
    with pytest.raises(ValueError):
        mmap_store.write_entries(bytearray(4096), 0, 0, 4096, bytearray(64), 0, 64, 0, 1, store,
                                 store, 0, [bad], Entry)


def test_a_leaders_run_is_what_append_in_place_writes(tmp_path):
    """``append_run`` (with the lane's one-by-one fallback where a data or
    index file ends) leaves the same data and index files and entries as
    ``append_in_place`` of each send: what the DLedger lane stores."""
    born, host = _hosts()
    sends = _sends(150)
    one = _store(tmp_path / "a", term=2, data_size=1 << 14)
    run = _store(tmp_path / "b", term=2, data_size=1 << 14)
    now = 1_700_000_000_000
    for send in sends:
        one.append_in_place(send[9], _RecordWriter(send, born, now, host))
    done: list[Entry] = []
    calls = 0
    while len(done) < len(sends):
        part = mmap_store.append_run(run, sends[len(done):len(done) + 20], born, host, now)
        if not part:
            part = [run.append_in_place(sends[len(done)][9],
                                        _RecordWriter(sends[len(done)], born, now, host))]
        done += part
        calls += 1
    assert calls < len(sends) // 4
    assert len(run.data.mapped_files) > 3 and len(run.index.mapped_files) > 1
    assert run.ledger_end_index == one.ledger_end_index == 149 and run.ledger_begin_index == 0
    assert run.member_state.ledger_end_index == 149
    assert [run.get(i).same(one.get(i)) for i in range(150)] == [True] * 150
    assert _files(run) == _files(one)
    run.member_state.role = Role.FOLLOWER
    with pytest.raises(DLedgerError):
        mmap_store.append_run(run, sends[:2], born, host, now)
    for store in (one, run):
        store.shutdown()


def test_write_entries_with_wire_keeps_each_entrys_push_json():
    """``wire`` (a leader with followers): each entry made carries the push
    JSON ``Entry.json_bytes`` makes of it afterwards, byte for byte; the same
    entries and files as without.  (The compiled writer's, whose entries
    ``test_dledger_plain_runs`` compares with these, keep the same.)"""
    write = mmap_store.write_entries
    born, store = _hosts()
    out = {}
    for wire in (False, True):
        data, index = bytearray(40_000), bytearray(32 * 40)
        entries = write(data, 0, 8192, 40_000, index, 0, 32 * 40, 5, 2, born, store,
                        1_700_000_000_123, _sends(12), Entry, wire)[0]
        out[wire] = (bytes(data), bytes(index), entries)
    assert out[True][:2] == out[False][:2] and out[True][2] == out[False][2]
    for kept, plain in zip(out[True][2], out[False][2], strict=True):
        assert plain.wire is None and kept.wire is not None
        assert kept.wire == plain.json_bytes() == Entry(
            plain.index, plain.term, plain.body, plain.pos).json_bytes()
