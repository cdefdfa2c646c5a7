"""DLedgerMmapFileStore: the entry data files and the index files of DLedger
0.3.1.2, as 4.9.8's DLedgerCommitLog leaves them under
``<storePathRootDir>/dledger-<selfId>/``:

* ``data/`` — records (``entry.Entry``) back to back in files named by their
  start offset; where a record does not fit, the rest of the file is a blank
  (magic -1, length) and the record starts the next file;
* ``index/`` — one 32-byte unit per entry at ``index * 32``;
* ``checkpoint`` — ``endIndex`` and ``committedIndex`` (properties).

Followers hold the same bytes at the same positions as the leader (their
records keep the leader's ``pos``), which is what lets a leader compare and
truncate a follower by position.  Recovery walks the records from one of
the last three files, checks each against its index unit, rebuilds the index
where it is missing or wrong, and cuts the data at the first bad record.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from typing import Any

from rmq._fast import compiled
from rmq.common.config_manager import write_file_safely
from rmq.common.properties import ConfigError, load_properties
from rmq.dledger.config import DLedgerConfig
from rmq.dledger.entry import (
    BLANK_MAGIC,
    BODY_OFFSET,
    HEADER_SIZE,
    INDEX_UNIT,
    INDEX_UNIT_SIZE,
    MAGIC,
    MIN_BLANK_LEN,
    RECORD_HEADER,
    Entry,
    blank,
    decode_index,
    encode_index,
)
from rmq.dledger.member_state import MemberState, Role
from rmq.dledger.protocol import Code, DLedgerError
from rmq.store import message_codec as codec
from rmq.store.mapped_file import ZERO_AHEAD, MappedFileQueue

log = logging.getLogger("rmq.dledger")

CHECKPOINT_FILE = "checkpoint"
# the leader's last appended entries kept in memory, up to this many body
# bytes: its pushes (two followers, a resend) read them from here, not back
# from the files
RECENT_BYTES = 8 << 20
# (entry, record buffer, body offset): may change the body before it is written
AppendHook = Callable[[Entry, bytearray, int], None]


class DLedgerMmapFileStore:
    # the fields a leader's append reads and sets (``dledger_append.c_append_run``)
    # and its quorum check and commit read and set (``dledger_frames.check_quorum``,
    # ``update_committed_index``) as slots, read there at their offsets; the
    # others in the instance dict
    __slots__ = ("member_state", "data", "index", "ledger_begin_index", "ledger_end_index",
                 "ledger_end_term", "_recent", "_recent_first", "_recent_bytes", "committed_index",
                 "committed_pos", "__dict__")

    def __init__(self, config: DLedgerConfig, member_state: MemberState) -> None:
        self.config = config
        self.member_state = member_state
        self.data = MappedFileQueue(config.data_path, config.mapped_file_size_for_entry_data)
        self.index = MappedFileQueue(config.index_path, config.mapped_file_size_for_entry_index)
        self.ledger_begin_index = -1
        self.ledger_end_index = -1
        self.ledger_end_term = -1
        self.committed_index = -1
        self.committed_pos = -1
        self.append_hooks: list[AppendHook] = []
        # the leader's last appends, in index order: ``_recent[i]`` is entry
        # ``_recent_first + i`` (``kept_entry``)
        self._recent: list[Entry] = []
        self._recent_first = 0
        self._recent_bytes = 0

    def _forget_recent(self) -> None:
        """Drop the leader's kept entries (a follower's log is rewritten)."""
        if self._recent:
            self._recent.clear()
            self._recent_bytes = 0

    def _keep_recent(self, entry: Entry) -> None:
        self._keep_all_recent([entry])

    def _keep_all_recent(self, entries: list[Entry]) -> None:
        """Keep ``entries`` (appended in order), dropping the oldest once
        past ``RECENT_BYTES`` (``keep_more``: one compiled call a read's
        append)."""
        self._recent_first, self._recent_bytes = keep_more(
            self._recent, entries, self._recent_first, self._recent_bytes, RECENT_BYTES)

    # ---- start and stop ---------------------------------------------------------
    def startup(self) -> None:
        for queue in (self.data, self.index):
            if not queue.load():
                raise DLedgerError(Code.DISK_ERROR, f"load {queue.store_paths[0]} failed: a file "
                                   "of another size (mappedFileSize changed?)")
        self.recover()

    def shutdown(self) -> None:
        self.flush()
        self.persist_checkpoint()
        self.data.shutdown()
        self.index.shutdown()

    def flush(self) -> None:
        self.data.flush(0)
        self.index.flush(0)

    def dirty(self) -> bool:
        """Written bytes not yet flushed."""
        return self.data.remain_how_many_data_to_flush() > 0 or \
            self.index.remain_how_many_data_to_flush() > 0

    # ---- raw file access ----------------------------------------------------------
    @staticmethod
    def _pre_append(queue: MappedFileQueue, length: int, use_blank: bool) -> int:
        """Where ``length`` bytes will go; a data file too short for them is
        closed with a blank first.  -1 when no file can be made."""
        mf = queue.get_last_mapped_file()
        if mf is None or mf.is_full():
            mf = queue.get_last_mapped_file(0, need_create=True)
            if mf is None:
                return -1
        room = queue.mapped_file_size - mf.wrote_position
        if length + (MIN_BLANK_LEN if use_blank else 0) > room:
            if not use_blank:
                return -1
            mf.view[mf.wrote_position:queue.mapped_file_size] = blank(room)
            _advance(mf, room)
            mf = queue.get_last_mapped_file(0, need_create=True)
            if mf is None:
                return -1
        return mf.file_from_offset + mf.wrote_position

    @classmethod
    def _append(cls, queue: MappedFileQueue, data: bytes, use_blank: bool) -> int:
        pos = cls._pre_append(queue, len(data), use_blank)
        if pos == -1:
            return -1
        mf = queue.get_last_mapped_file()
        start = mf.wrote_position
        mf.view[start:start + len(data)] = data
        _advance(mf, len(data))
        return pos

    @staticmethod
    def _read(queue: MappedFileQueue, offset: int, size: int) -> bytes | None:
        mf = queue.find_mapped_file_by_offset(offset, offset == 0)
        if mf is None:
            return None
        start = offset - mf.file_from_offset
        if start < 0 or start + size > mf.read_position():
            return None
        return bytes(mf.view[start:start + size])

    @staticmethod
    def _truncate(queue: MappedFileQueue, offset: int) -> None:
        """Cut ``queue`` at ``offset``: later files go, the bytes after it in its
        file are zeroed (so no stale record can be read back at recovery), and
        when no file reaches it the queue restarts there."""
        size = queue.mapped_file_size
        holder = queue.find_mapped_file_by_offset(offset)
        old_end = holder.wrote_position if holder is not None else 0
        queue.truncate_dirty_files(offset)
        files = queue.mapped_files
        if holder is not None and holder in files:
            cut = offset - holder.file_from_offset
            if old_end > cut:
                holder.view[cut:old_end] = bytes(old_end - cut)
            return
        if files and files[-1].file_from_offset + files[-1].wrote_position == offset:
            return
        for mf in list(queue.mapped_files):  # nothing reaches offset: start over there
            queue.remove_files([mf])
            mf.destroy()
        mf = queue.get_last_mapped_file(offset, need_create=True)
        if mf is None:
            raise DLedgerError(Code.DISK_ERROR, f"cannot create a file at {offset}")
        mf.set_positions(offset % size)
        mf.view[:offset % size] = bytes(offset % size)

    # ---- recovery -------------------------------------------------------------------
    def recover(self) -> None:
        self._forget_recent()
        files = self.data.mapped_files
        if not files:
            if self.index.mapped_files:
                self._truncate(self.index, 0)
            self._load_checkpoint()
            return
        start = self._scan_start()
        mf = files[start]
        process = mf.file_from_offset
        last_index = last_term = -1
        write_index = False
        i = start
        while True:
            rel = process - mf.file_from_offset
            view = mf.view
            if rel + 8 > self.data.mapped_file_size:
                i, mf, process = self._next_file(i)
                if mf is None:
                    break
                continue
            magic = int.from_bytes(view[rel:rel + 4], "big", signed=True)
            if magic == BLANK_MAGIC:
                i, mf, process = self._next_file(i)
                if mf is None:
                    break
                continue
            try:
                entry = Entry.decode(view, rel)
            except ValueError:
                break
            if (entry.size == 0 or entry.pos != process or entry.magic != MAGIC
                    or entry.size <= HEADER_SIZE
                    or (last_index != -1 and entry.index != last_index + 1)
                    or entry.term < last_term):
                break
            if not write_index and not self._index_matches(entry):
                self._truncate(self.index, entry.index * INDEX_UNIT_SIZE)
                write_index = True
            if write_index:
                unit = encode_index(entry.pos, entry.size, entry.magic, entry.index, entry.term)
                if self._append(self.index, unit, False) != entry.index * INDEX_UNIT_SIZE:
                    raise DLedgerError(Code.DISK_ERROR, f"rebuild index of {entry.index} failed")
            last_index, last_term = entry.index, entry.term
            process += entry.size
        self._truncate(self.data, process)
        self.ledger_end_index, self.ledger_end_term = last_index, last_term
        self._truncate(self.index, (last_index + 1) * INDEX_UNIT_SIZE)
        self.data.flushed_where = self.data.committed_where = process
        self.index.flushed_where = self.index.committed_where = (last_index + 1) * INDEX_UNIT_SIZE
        self._revise_begin_index()
        self._update_member_state()
        self._load_checkpoint()
        log.info("dledger recovered: begin=%d end=%d term=%d committed=%d data end=%d",
                 self.ledger_begin_index, self.ledger_end_index, self.ledger_end_term,
                 self.committed_index, process)

    def _scan_start(self) -> int:
        """The file to scan from: the first of the last three whose first
        record is sound (walking back when it is not)."""
        files = self.data.mapped_files
        for i in range(max(0, len(files) - 3), -1, -1):
            try:
                entry = Entry.decode(files[i].view, 0)
            except ValueError:
                continue
            if entry.pos == files[i].file_from_offset and entry.magic == MAGIC \
                    and self._index_matches(entry):
                return i
        return 0

    def _next_file(self, i: int):
        files = self.data.mapped_files
        if i + 1 >= len(files):
            return i, None, files[i].file_from_offset + self.data.mapped_file_size
        return i + 1, files[i + 1], files[i + 1].file_from_offset

    def _index_matches(self, entry: Entry) -> bool:
        unit = self._read(self.index, entry.index * INDEX_UNIT_SIZE, INDEX_UNIT_SIZE)
        if unit is None:
            return False
        return decode_index(unit) == (entry.magic, entry.pos, entry.size, entry.index, entry.term)

    def _revise_begin_index(self, fallback: int = -1) -> None:
        """The index of the first record of the first data file; ``fallback``
        when that file starts mid-way (the data restarted at a follower's
        truncation point)."""
        first = self.data.get_first_mapped_file()
        if first is None or self.ledger_end_index == -1:
            self.ledger_begin_index = -1
            return
        try:
            entry = Entry.decode(first.view, 0)
        except ValueError:
            entry = None
        if entry is not None and entry.pos == first.file_from_offset and entry.size > 0:
            self.ledger_begin_index = entry.index
        else:
            self.ledger_begin_index = fallback

    def _update_member_state(self) -> None:
        self.member_state.ledger_end_index = self.ledger_end_index
        self.member_state.ledger_end_term = self.ledger_end_term

    # ---- checkpoint -------------------------------------------------------------------
    @property
    def checkpoint_file(self) -> str:
        return os.path.join(self.config.default_path, CHECKPOINT_FILE)

    def persist_checkpoint(self) -> None:
        os.makedirs(self.config.default_path, exist_ok=True)
        write_file_safely(f"endIndex={self.ledger_end_index}\n"
                          f"committedIndex={self.committed_index}\n", self.checkpoint_file)

    def _load_checkpoint(self) -> None:
        try:
            props = load_properties(self.checkpoint_file)
        except ConfigError:  # none yet: nothing known to be committed
            return
        text = props.get("committedIndex", "").strip()
        if text.lstrip("-").isdigit():
            self.update_committed_index(self.member_state.curr_term, int(text))

    # ---- appends -------------------------------------------------------------------
    def _write(self, entry: Entry, hooks: list[AppendHook] | None = None) -> None:
        """Write ``entry`` (its ``pos`` and ``size`` set) as a record at the end
        of the data files, straight into the file (header, then body), and
        its index unit.  ``hooks`` see the record in the file before the
        entry's body is read back from it (the leader's appends)."""
        mf, start = self._place(entry)
        view = mf.view
        body = entry.body
        size = entry.size
        view[start + BODY_OFFSET:start + size] = body
        if hooks:
            record = view[start:start + size]
            for hook in hooks:
                hook(entry, record, BODY_OFFSET)
            entry.body = bytes(record[BODY_OFFSET:])
            record.release()
        self._written(entry, mf)

    def _place(self, entry: Entry, placed: bool = False):
        """The data file and position ``entry`` goes to, its header written
        there (``placed``: ``_pre_append`` has just made room for it at its pos)."""
        size = entry.size
        data = self.data
        if not placed:
            pos = self._pre_append(data, size, True)
            if pos != entry.pos:
                raise DLedgerError(Code.DISK_ERROR, f"entry {entry.index} went to {pos}, "
                                   f"not {entry.pos}")
        pos = entry.pos
        mf = data.get_last_mapped_file()
        if data.zero_ahead:
            mf.zero_ahead()
        start = mf.wrote_position
        RECORD_HEADER.pack_into(mf.view, start, entry.magic, size, entry.index, entry.term, pos,
                                entry.channel, entry.chain_crc, entry.body_crc, size - BODY_OFFSET)
        return mf, start

    def _written(self, entry: Entry, mf) -> None:
        """The entry's record is in ``mf``: past it, its index unit, the ledger's end."""
        _advance(mf, entry.size)
        self._indexed([entry])

    def _leader_checks(self) -> MemberState:
        ms = self.member_state
        if not ms.is_leader():
            raise DLedgerError(Code.NOT_LEADER)
        if ms.transferee is not None:
            raise DLedgerError(Code.LEADER_TRANSFERRING)
        if self.data.no_space:
            raise DLedgerError(Code.DISK_FULL)
        return ms

    def append_as_leader(self, body: bytes) -> Entry:
        ms = self._leader_checks()
        size = BODY_OFFSET + len(body)
        pos = self._pre_append(self.data, size, True)
        if pos == -1:
            raise DLedgerError(Code.DISK_ERROR, "no data file to append to")
        entry = Entry(self.ledger_end_index + 1, ms.curr_term, body, pos, MAGIC, 0, 0, 0, size)
        self._write(entry, self.append_hooks)
        self._keep_recent(entry)
        return entry

    def append_in_place(self, body_size: int, write: Callable[[Any, int, int], None]) -> Entry:
        """``append_as_leader`` of a body written straight into the data file:
        ``write(buffer, at, offset)`` writes its final bytes (the append
        hooks' work included) at ``buffer[at:at + body_size]``, ``offset``
        being where they lie in the data files."""
        ms = self._leader_checks()
        size = BODY_OFFSET + body_size
        pos = self._pre_append(self.data, size, True)
        if pos == -1:
            raise DLedgerError(Code.DISK_ERROR, "no data file to append to")
        entry = Entry(self.ledger_end_index + 1, ms.curr_term, b"", pos, MAGIC, 0, 0, 0, size)
        mf, start = self._place(entry, True)
        view = mf.view
        write(view, start + BODY_OFFSET, pos + BODY_OFFSET)
        entry.body = bytes(view[start + BODY_OFFSET:start + size])
        self._written(entry, mf)
        self._keep_recent(entry)
        return entry

    def append_as_follower(self, entry: Entry, leader_term: int, leader_id: str) -> Entry:
        self.append_all_as_follower([entry], leader_term, leader_id)
        return entry

    def append_all_as_follower(self, entries: list[Entry], leader_term: int,
                               leader_id: str) -> None:
        """``append_as_follower`` of each of ``entries`` in turn (a push's),
        their index units appended together and the ledger's end moved once:
        on a refusal the entries before it stay appended, as one by one."""
        ms = self.member_state
        if not ms.is_follower():
            raise DLedgerError(Code.NOT_FOLLOWER, f"role={ms.role.value}")
        if entries and entries[0].index != self.ledger_end_index + 1:
            raise DLedgerError(Code.INCONSISTENT_INDEX,
                               f"{entries[0].index} != {self.ledger_end_index + 1}")
        if leader_term != ms.curr_term or leader_id != ms.leader_id:
            raise DLedgerError(Code.INCONSISTENT_LEADER,
                               f"{leader_id}@{leader_term} is not {ms.leader_id}@{ms.curr_term}")
        self._forget_recent()
        done: list[Entry] = []
        try:
            for entry in entries:
                expect = self.ledger_end_index + 1 + len(done)
                if entry.index != expect:
                    raise DLedgerError(Code.INCONSISTENT_INDEX, f"{entry.index} != {expect}")
                size = entry.compute_size()
                mf, start = self._place(entry)
                mf.view[start + BODY_OFFSET:start + size] = entry.body
                _advance(mf, size)
                done.append(entry)
        finally:
            if done:
                self._indexed(done)

    def append_rows_as_follower(self, rows: list[tuple], leader_term: int,
                                leader_id: str) -> None:
        """``append_all_as_follower`` of a push's entries as ``decode_push``
        reads them, (index, term, body, pos, magic, channel, chainCrc,
        bodyCrc, size) rows, with no ``Entry`` per row: the rows that fit
        the current data and index files are written in one call
        (``write_rows``), and a row that does not (a file's end, a row out
        of order) goes through ``append_all_as_follower``, which closes the
        file or refuses it as it would any entry.  On a refusal the rows
        before it stay appended."""
        ms = self.member_state
        if not ms.is_follower():
            raise DLedgerError(Code.NOT_FOLLOWER, f"role={ms.role.value}")
        if leader_term != ms.curr_term or leader_id != ms.leader_id:
            raise DLedgerError(Code.INCONSISTENT_LEADER,
                               f"{leader_id}@{leader_term} is not {ms.leader_id}@{ms.curr_term}")
        self._forget_recent()
        done, count = 0, len(rows)
        while done < count:
            first = self.ledger_end_index + 1
            mf = self.data.get_last_mapped_file()
            imf = self.index.get_last_mapped_file()
            if mf is not None and not mf.is_full() and imf is not None and \
                    not imf.is_full() and \
                    imf.file_from_offset + imf.wrote_position == first * INDEX_UNIT_SIZE:
                if self.data.zero_ahead:
                    mf.zero_ahead()
                at, iat = mf.wrote_position, imf.wrote_position
                n, used, iused = write_rows(
                    mf.view, at, mf.file_from_offset + at, self.data.mapped_file_size - at,
                    imf.view, iat, self.index.mapped_file_size - iat, first,
                    rows[done:] if done else rows)
                if n:
                    _advance(mf, used)
                    _advance(imf, iused)
                    last = rows[done + n - 1]
                    self.ledger_end_index, self.ledger_end_term = last[0], last[1]
                    if self.ledger_begin_index == -1:
                        self.ledger_begin_index = first
                    self._update_member_state()
                    done += n
                    continue
            self.append_all_as_follower([Entry(*rows[done])], leader_term, leader_id)
            done += 1

    def _indexed(self, entries: list[Entry]) -> None:
        """The index units of ``entries`` (written, in order) and the ledger's end."""
        units = b"".join([encode_index(e.pos, e.size, e.magic, e.index, e.term) for e in entries])
        at = self._append(self.index, units, False)
        if at == -1 and len(entries) > 1:  # past the index file's end: one by one
            for e in entries:
                self._indexed([e])
            return
        if at != entries[0].index * INDEX_UNIT_SIZE:
            raise DLedgerError(Code.DISK_ERROR, f"index of entry {entries[0].index} misplaced")
        last = entries[-1]
        self.ledger_end_index, self.ledger_end_term = last.index, last.term
        if self.ledger_begin_index == -1:
            self.ledger_begin_index = entries[0].index
        self._update_member_state()

    def truncate(self, entry: Entry, leader_term: int, leader_id: str) -> int:
        """Make ``entry`` the follower's last: drop what follows it (or replace
        a different entry at its index) -- the divergent tail of a follower."""
        ms = self.member_state
        if not ms.is_follower():
            raise DLedgerError(Code.NOT_FOLLOWER, f"role={ms.role.value}")
        if leader_term != ms.curr_term or leader_id != ms.leader_id:
            raise DLedgerError(Code.INCONSISTENT_LEADER)
        self._forget_recent()
        try:
            existed = entry.same(self.get(entry.index))
        except DLedgerError:
            existed = False
        entry.compute_size()
        self._truncate(self.data, entry.pos + entry.size if existed else entry.pos)
        self._truncate(self.index, entry.index * INDEX_UNIT_SIZE)
        self.ledger_end_index = entry.index - 1
        if existed:
            unit = encode_index(entry.pos, entry.size, entry.magic, entry.index, entry.term)
            self._append(self.index, unit, False)
            self.ledger_end_index, self.ledger_end_term = entry.index, entry.term
            self._update_member_state()
        else:
            self._write(entry)
        self._revise_begin_index(fallback=entry.index)
        if self.committed_index > self.ledger_end_index:
            self.committed_index = self.ledger_end_index
        self.data.flushed_where = min(self.data.flushed_where, self.data.get_max_wrote_position())
        self.index.flushed_where = min(self.index.flushed_where,
                                       self.index.get_max_wrote_position())
        return entry.index

    # ---- reads --------------------------------------------------------------------
    def get(self, index: int) -> Entry:
        if index < self.ledger_begin_index or self.ledger_begin_index == -1:
            raise DLedgerError(Code.INDEX_LESS_THAN_LOCAL_BEGIN,
                               f"{index} < begin {self.ledger_begin_index}")
        if index > self.ledger_end_index:
            raise DLedgerError(Code.INDEX_OUT_OF_RANGE, f"{index} > end {self.ledger_end_index}")
        kept = kept_entry(self._recent, self._recent_first, index)
        if kept is not None:
            return kept
        unit = self._read(self.index, index * INDEX_UNIT_SIZE, INDEX_UNIT_SIZE)
        if unit is None:
            raise DLedgerError(Code.DISK_ERROR, f"no index unit for {index}")
        _, pos, size, _, _ = decode_index(unit)
        record = self._read(self.data, pos, size)
        if record is None:
            raise DLedgerError(Code.DISK_ERROR, f"no data for {index} at {pos}")
        entry = Entry.decode(record)
        if entry.pos != pos:
            raise DLedgerError(Code.DISK_ERROR, f"entry {index}: pos {entry.pos} != {pos}")
        return entry

    # (the twin ``_kept_run`` below, or its compiled one)
    kept_run: Callable[[DLedgerMmapFileStore, int, int], list[Entry]]

    # (the twin ``_update_committed_index`` below, or its compiled one)
    update_committed_index: Callable[[DLedgerMmapFileStore, int, int], None]

    def _end_of(self, index: int) -> int:
        """Where entry ``index`` ends in the data files (``get(index)``'s pos +
        size), from the kept entry or from its index unit and its record's
        header -- a follower's commit need not read the record's body back."""
        if index < self.ledger_begin_index or self.ledger_begin_index == -1 or \
                index > self.ledger_end_index:
            entry = self.get(index)  # (raises get's error)
            return entry.pos + entry.size
        kept = kept_entry(self._recent, self._recent_first, index)
        if kept is not None:
            return kept.pos + kept.size
        unit = self._read(self.index, index * INDEX_UNIT_SIZE, INDEX_UNIT_SIZE)
        if unit is None:
            raise DLedgerError(Code.DISK_ERROR, f"no index unit for {index}")
        _, pos, size, _, _ = decode_index(unit)
        mf = self.data.find_mapped_file_by_offset(pos, pos == 0)
        start = -1 if mf is None else pos - mf.file_from_offset
        if start < 0 or size < BODY_OFFSET or start + size > mf.read_position():
            raise DLedgerError(Code.DISK_ERROR, f"no data for {index} at {pos}")
        _, record_size, _, _, record_pos, _, _, _, body_size = RECORD_HEADER.unpack_from(
            mf.view, start)
        if record_pos != pos or record_size != size or body_size + BODY_OFFSET != size:
            raise DLedgerError(Code.DISK_ERROR, f"entry {index}: pos {record_pos} != {pos}")
        return pos + size


def write_entries(data, at: int, pos: int, room: int, index, index_at: int, index_room: int,
                  first_index: int, term: int, born: bytes, store_host: bytes, now: int,
                  sends: list[tuple], make_entry, wire: bool = False
                  ) -> tuple[list[Entry], int, int]:
    """Write ``sends`` as entries ``first_index``, ... of ``term`` at
    ``data[at:at + room]`` (``pos``: where ``at`` lies in the data files) and
    their index units at ``index[index_at:index_at + index_room]``; each send
    is (topic bytes, queue id, flag, queue offset, sysFlag, born timestamp,
    reconsume times, body bytes, stored properties bytes, record size).
    With ``wire`` (a leader with followers) each entry's push JSON
    (``Entry.json_bytes``) is made here too.
    Returns (the entries made by ``make_entry`` -- the leading sends that fit
    --, data bytes written, index bytes written): an entry stops the run
    where it would not leave a blank's room in the data file or its index
    unit would not fit.  The twin of ``rmq._fast.dledger_append``'s
    ``c_write_entries``, whose rows are C structs of these fields."""
    if at < 0 or room < 0 or at + room > len(data) or index_at < 0 or index_room < 0 or \
            index_at + index_room > len(index):
        raise ValueError("a place outside its file")
    entries: list[Entry] = []
    used = iused = 0
    idx = first_index
    for topic, queue_id, flag, queue_offset, sys_flag, born_ts, reconsume, body, props, \
            rsize in sends:
        if rsize != codec.record_size(sys_flag, len(body), len(topic), len(props)):
            raise ValueError("a send's sizes do not add up")
        size = rsize + BODY_OFFSET
        if used + size + MIN_BLANK_LEN > room or iused + INDEX_UNIT_SIZE > index_room:
            break
        phy = pos + used
        start = at + used
        RECORD_HEADER.pack_into(data, start, MAGIC, size, idx, term, phy, 0, 0, 0, rsize)
        codec.write_record(data, start + BODY_OFFSET, queue_id, flag, queue_offset,
                           phy + BODY_OFFSET, sys_flag, born_ts, born, now, store_host, reconsume,
                           0, body, topic, props)
        INDEX_UNIT.pack_into(index, index_at + iused, MAGIC, phy, size, idx, term)
        entry = make_entry(idx, term, bytes(data[start + BODY_OFFSET:start + size]), phy, MAGIC,
                           0, 0, 0, size)
        if wire:
            entry.json_bytes()
        entries.append(entry)
        used += size
        iused += INDEX_UNIT_SIZE
        idx += 1
    return entries, used, iused


def append_run(store: DLedgerMmapFileStore, sends: list[tuple], born: bytes,
               store_host: bytes, now: int) -> list[Entry]:
    """``append_in_place`` of the records of ``sends`` (``write_entries``'
    tuples) as consecutive entries of the leader ``store``, in one call: the
    leading ones that fit the current data and index files (none when a file
    must be made or closed first: the caller appends that one with
    ``append_in_place``).  Refused as ``_leader_checks`` refuses.  The twin
    of ``rmq._fast.dledger_append``'s ``c_append_run``, which reads the
    store's, its member state's and its files' fields at their slots."""
    # (once per read of the lane: the files' ends, ``_advance``,
    # ``_update_member_state`` and ``_keep_all_recent`` read inline)
    ms = store._leader_checks()
    files, ifiles = store.data.mapped_files, store.index.mapped_files
    if not files or not ifiles:
        return []
    mf, imf = files[-1], ifiles[-1]
    first = store.ledger_end_index + 1
    at, iat = mf.wrote_position, imf.wrote_position
    if at == mf.file_size or iat == imf.file_size or \
            imf.file_from_offset + iat != first * INDEX_UNIT_SIZE:
        return []
    if store.data.zero_ahead:
        mf.zero_ahead()
    entries, used, iused = write_entries(
        mf.view, at, mf.file_from_offset + at, store.data.mapped_file_size - at, imf.view, iat,
        store.index.mapped_file_size - iat, first, ms.curr_term, born, store_host, now, sends,
        Entry, len(ms.peer_map) > 1)
    if not entries:
        return entries
    mf.wrote_position = mf.committed_position = at + used
    imf.wrote_position = imf.committed_position = iat + iused
    last = entries[-1]
    store.ledger_end_index = ms.ledger_end_index = last.index
    store.ledger_end_term = ms.ledger_end_term = last.term
    if store.ledger_begin_index == -1:
        store.ledger_begin_index = first
    store._recent_first, store._recent_bytes = keep_more(
        store._recent, entries, store._recent_first, store._recent_bytes, RECENT_BYTES)
    return entries


def _write_rows(data, at: int, pos: int, room: int, index, index_at: int, index_room: int,
                first_index: int, rows: list[tuple]) -> tuple[int, int, int]:
    """Write a push's ``rows`` (``decode_push``'s: index, term, body, pos,
    magic, channel, chainCrc, bodyCrc, size) as entries at
    ``data[at:at + room]`` (``pos``: where ``at`` lies in the data files),
    their index units at ``index[index_at:index_at + index_room]``, the
    bytes ``_place`` and the body copy write.  Stops before the first row
    not in order (index, pos), not leaving a blank's room, whose index unit
    would not fit, or with a field out of the record's range.  Returns
    (rows written, data bytes written, index bytes written).  The twin of
    ``rmq._fast.dledger_append.write_rows``."""
    if at < 0 or room < 0 or at + room > len(data) or index_at < 0 or index_room < 0 or \
            index_at + index_room > len(index):
        raise ValueError("a place outside its file")
    used = iused = n = 0
    idx = first_index
    for index_of, term, body, row_pos, magic, channel, chain_crc, body_crc, _size in rows:
        if body is None or index_of != idx or row_pos != pos + used or \
                not all(-2**31 <= v < 2**31 for v in (magic, channel, chain_crc, body_crc)):
            break
        size = len(body) + BODY_OFFSET
        if size >= 2**31 or used + size + MIN_BLANK_LEN > room or \
                iused + INDEX_UNIT_SIZE > index_room:
            break
        start = at + used
        RECORD_HEADER.pack_into(data, start, magic, size, idx, term, row_pos, channel, chain_crc,
                                body_crc, len(body))
        data[start + BODY_OFFSET:start + size] = body
        INDEX_UNIT.pack_into(index, index_at + iused, magic, row_pos, size, idx, term)
        used += size
        iused += INDEX_UNIT_SIZE
        idx += 1
        n += 1
    return n, used, iused


def _kept_run(store: DLedgerMmapFileStore, first: int, max_bytes: int) -> list[Entry]:
    """``DLedgerMmapFileStore.kept_run``: the entries a leader's push from
    ``first`` carries: ``get(first)``, then the next ones while the entries'
    sizes stay below ``max_bytes`` (0: that one alone), up to the ledger's
    end; read from the kept entries (``kept_entry``), ``get`` for one not
    kept.  The twin of ``rmq._fast.dledger_push.kept_run``."""
    recent, at = store._recent, store._recent_first
    last = store.ledger_end_index
    entry = kept_entry(recent, at, first) if store.ledger_begin_index <= first <= last else None
    if entry is None:
        entry = store.get(first)  # (or its refusal)
    entries = [entry]
    entry.size = size = BODY_OFFSET + len(entry.body)  # (compute_size)
    index = first + 1
    while size < max_bytes and index <= last:
        entry = kept_entry(recent, at, index)
        if entry is None:
            entry = store.get(index)
        entries.append(entry)
        size += entry.size
        index += 1
    return entries


def kept_entry(recent: list[Entry], first: int, index: int) -> Entry | None:
    """The kept entry of ``index`` (``recent``: the kept entries, in index
    order from ``first``), None when it is not kept."""
    i = index - first
    return recent[i] if 0 <= i < len(recent) else None


def _keep_more(recent: list[Entry], entries: list[Entry], first: int, kept: int,
               max_bytes: int) -> tuple[int, int]:
    """Add ``entries`` (appended in order) to ``recent``, the kept entries
    from index ``first`` (``kept`` bytes; dropped first when ``entries`` do
    not follow them), then, when more than ``max_bytes`` are kept, drop the
    oldest down to three quarters of it (at once: the list's move is paid
    once per quarter of ``max_bytes`` appended), never the last entry.
    Returns the new (first, kept).  The twin of
    ``rmq._fast.dledger_push.keep_more``."""
    if not entries:
        return first, kept
    if not recent or first + len(recent) != entries[0].index:
        recent.clear()
        first, kept = entries[0].index, 0
    recent.extend(entries)
    for entry in entries:
        kept += entry.size
    if kept > max_bytes:
        target, drop = max_bytes - max_bytes // 4, 0
        while kept > target and drop < len(recent) - 1:
            kept -= recent[drop].size
            drop += 1
        del recent[:drop]
        first += drop
    return first, kept


_p = compiled("dledger_push")
DLedgerMmapFileStore.kept_run = _kept_run if _p is None else _p.kept_run
keep_more = _keep_more if _p is None else _p.keep_more
_c = compiled("dledger_append")
write_rows = _write_rows if _c is None else _c.write_rows
# (the twins of the compiled ``append_rows`` and ``end_of``, which take the
# methods' places)
append_rows_twin = DLedgerMmapFileStore.append_rows_as_follower
end_of_twin = DLedgerMmapFileStore._end_of
if _c is not None:
    _c.bind_store(Entry, Role.LEADER, RECENT_BYTES, ZERO_AHEAD)
    _c.bind_follower(Role.FOLLOWER, append_rows_twin, end_of_twin)
    DLedgerMmapFileStore.append_rows_as_follower = _c.append_rows
    DLedgerMmapFileStore._end_of = _c.end_of


def _advance(mf, n: int) -> None:
    """Appended ``n`` bytes to a mapped file written directly (no write buffer)."""
    mf.wrote_position += n
    mf.committed_position = mf.wrote_position


def _update_committed_index(store: DLedgerMmapFileStore, term: int, index: int) -> None:
    """``DLedgerMmapFileStore.update_committed_index``: move the committed
    index up (never past this node's last entry).  The twin of
    ``rmq._fast.dledger_frames.update_committed_index``, which the compiled
    quorum check calls without a Python frame (the store's fields at their
    slots)."""
    end = store.ledger_end_index
    if index == -1 or end == -1 or term < store.member_state.curr_term:
        return
    if index > end:
        index = end
    if index <= store.committed_index:
        return
    # (the leader's commit, once per follower's answer: its kept entry, read inline)
    kept = kept_entry(store._recent, store._recent_first, index)
    if kept is not None and index >= store.ledger_begin_index:
        store.committed_pos = kept.pos + kept.size
    else:
        store.committed_pos = store._end_of(index)
    store.committed_index = index


_frames = compiled("dledger_frames")
if _frames is None:
    DLedgerMmapFileStore.update_committed_index = _update_committed_index
else:
    DLedgerMmapFileStore.update_committed_index = _frames.update_committed_index
    _frames.bind_store(DLedgerMmapFileStore)
