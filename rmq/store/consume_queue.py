"""ConsumeQueue: the per topic/queue index of commit log positions.

Mirrors ``ConsumeQueue`` of 4.9.8 (STORE_FORMAT.md 5, 9.2, 9.5, 11.2).  Each
entry is 20 bytes, big-endian::

    long  commit log physical offset
    int   message size (TOTALSIZE)
    long  tags code (hash of TAGS, or delivery time on SCHEDULE_TOPIC_XXXX)

Entry ``n`` (logical offset n) lives at logical byte ``n * 20`` of the stream
made of files named by their first logical byte.  All zero = never written;
``(0, 0x7FFFFFFF, 0)`` = pre-blank filler before the first entry of a queue
whose first file was created at a non-zero offset.
"""

from __future__ import annotations

import logging
import os
import struct

from rmq._fast import compiled
from rmq.store.consume_queue_ext import ConsumeQueueExt, CqExtUnit, is_ext_addr
from rmq.store.mapped_file import MappedFile, MappedFileQueue

log = logging.getLogger("store")

CQ_STORE_UNIT_SIZE = 20
FILLER_SIZE = 0x7FFFFFFF
# A consume queue's files are sparse, as 4.9.8's are, and written within
# their reserved blocks (MappedFile's ``window``): a queue's file takes on disk
# about what it holds, where reserving each 5.7 MiB file whole held ~5.8 GiB
# for 1,024 queues that had taken a message each.  A window grows by half of
# what it holds (one page at first, at least a page and at most ROOM_MAX at a
# time): a queue holds on disk at most twice its entries, or ROOM_MAX more.
# The consume-queue flusher grows it once three quarters are written
# (``keep_room``); a put that finds it full grows it on the general path (the
# lanes keep within it and leave such a queue to that path).
ROOM_MIN = 4096
ROOM_MAX = 1024 * 1024
_ENTRY = struct.Struct(">qiq")


def _cq_write(buf, pos: int, offset: int, size: int, tags_code: int) -> None:
    """Write one entry at ``buf[pos:]``."""
    if pos < 0 or pos + 20 > len(buf):
        raise ValueError("consume queue entry out of range")
    _ENTRY.pack_into(buf, pos, offset, size, tags_code)


def _cq_valid_bytes(buf, start: int, end: int) -> int:
    """Bytes of valid entries (offset >= 0 and size > 0) from ``start`` up to
    the first invalid one or ``end``."""
    pos = start
    end = min(end, len(buf))
    unpack = _ENTRY.unpack_from
    while pos + 20 <= end:
        off, size, _tags = unpack(buf, pos)
        if off < 0 or size <= 0:
            break
        pos += 20
    return pos - start


def _cq_filler(buf, start: int, end: int) -> None:
    """Fill ``[start, end)`` with pre-blank filler entries."""
    entry = _ENTRY.pack(0, FILLER_SIZE, 0)
    for pos in range(start, end, 20):
        buf[pos : pos + 20] = entry


cq_write = _cq_write
cq_valid_bytes = _cq_valid_bytes
cq_filler = _cq_filler
_c = compiled("store_cq")
if _c is not None:
    cq_write = _c.cq_write
    cq_valid_bytes = _c.cq_valid_bytes
    cq_filler = _c.cq_filler


class ConsumeQueue:
    """One topic/queue's consume queue files."""

    # slots: the reput walk reads and sets a queue's fields at their offsets
    # (``store_dispatch.reput_walk``), as it does its tail file's
    __slots__ = ("topic", "queue_id", "file_size", "mfq", "ext", "max_physic_offset",
                 "min_logic_offset", "checkpoint", "tail_file")

    def __init__(self, topic: str, queue_id: int, root: str, file_size: int, checkpoint=None,
                 ext: ConsumeQueueExt | None = None) -> None:
        self.topic = topic
        self.queue_id = queue_id
        self.file_size = file_size
        self.mfq = MappedFileQueue(os.path.join(root, topic, str(queue_id)), file_size,
                                   random_access=True, window=True)
        # enableConsumeQueueExt: tags codes (and SQL92 bitmaps) in the ext files
        self.ext = ext
        self.max_physic_offset = -1
        self.min_logic_offset = 0
        self.checkpoint = checkpoint
        # the file the last entry went to, None until an entry is written after
        # load or recovery (appends straight to the tail start there); a plain
        # attribute: the send lane checks it for each queue of each read
        self.tail_file: MappedFile | None = None

    # --- load / recover ----------------------------------------------------------
    def load(self) -> bool:
        ok = self.mfq.load()
        if self.ext is not None:
            ok = self.ext.load() and ok
        return ok

    def recover(self) -> None:
        self.tail_file = None
        self._recover()

    def _recover(self) -> None:
        """STORE_FORMAT.md 9.2: from the third-to-last file, keep whole valid
        files, stop at the first invalid entry, truncate there."""
        files = self.mfq.mapped_files
        if not files:
            return
        idx = max(0, len(files) - 3)
        process = files[idx].file_from_offset
        max_ext = -1
        while idx < len(files):
            mf = files[idx]
            valid = cq_valid_bytes(mf.view, 0, self.file_size)
            if valid:
                off, size, _ = _ENTRY.unpack_from(mf.view, valid - 20)
                if size != FILLER_SIZE:
                    max_ext = off + size
            process = mf.file_from_offset + valid
            if valid == self.file_size and idx + 1 < len(files):
                idx += 1
                continue
            break
        self.max_physic_offset = max_ext
        self.mfq.flushed_where = process
        self.mfq.committed_where = process
        self.mfq.truncate_dirty_files(process)
        self._truncate_ext_tail()

    def _ext_addr_near(self, last: bool) -> int | None:
        """The ext address of the last (or first) entry that has one."""
        files = self.mfq.mapped_files if last else self.mfq.mapped_files[:1]
        for mf in reversed(files) if last else files:
            end = mf.read_position()
            positions = range(end - 20, -1, -20) if last else range(0, end, 20)
            for pos in positions:
                off, size, tags = _ENTRY.unpack_from(mf.view, pos)
                if size > 0 and size != FILLER_SIZE and is_ext_addr(tags):
                    return tags
        return None

    def _truncate_ext_tail(self) -> None:
        """Units past the last kept entry's go (they belong to dropped entries)."""
        if self.ext is None:
            return
        self.ext.recover()
        addr = self._ext_addr_near(last=True)
        if addr is not None:
            self.ext.truncate_by_max_address(addr)

    def _last_written(self) -> MappedFile | None:
        """The last file holding entries, or the first file when none does:
        files a put made ahead of dispatch (DispatchRoom) are empty, and the
        queue ends before them.  Usually the last file, found at once."""
        files = self.mfq.mapped_files
        for mf in reversed(files):
            if mf.wrote_position:
                return mf
        return files[0] if files else None

    def get_last_offset(self) -> int:
        """Physical end (offset + size) of the last real entry, -1 if none."""
        mf = self._last_written()
        if mf is None:
            return -1
        pos = mf.wrote_position - 20
        while pos >= 0:
            off, size, _ = _ENTRY.unpack_from(mf.view, pos)
            if off >= 0 and 0 < size < FILLER_SIZE:
                return off + size
            pos -= 20
        return -1

    def truncate_dirty_logic_files(self, phy_offset: int) -> None:
        """STORE_FORMAT.md 9.5: drop entries at or above ``phy_offset``."""
        self.tail_file = None
        while True:
            mf = self.mfq.get_last_mapped_file()
            if mf is None:
                break
            pos = 0
            new_max = -1
            kept = 0
            end = min(self.file_size, len(mf.view))  # (past its window: never written)
            while pos + 20 <= end:
                off, size, _ = _ENTRY.unpack_from(mf.view, pos)
                if pos == 0 and size > 0 and off >= phy_offset and size != FILLER_SIZE:
                    self.mfq.delete_last_mapped_file()
                    kept = -1
                    break
                if off < 0 or size <= 0 or (size != FILLER_SIZE and off >= phy_offset):
                    break
                if size != FILLER_SIZE:
                    new_max = off + size
                pos += 20
                kept = pos
            if kept == -1:
                continue
            if kept == 0 and len(self.mfq.mapped_files) > 1:
                self.mfq.delete_last_mapped_file()  # empty: made ahead of dispatch
                continue
            mf.set_positions(kept)
            self.max_physic_offset = new_max
            break
        if not self.mfq.mapped_files:
            self.max_physic_offset = -1
        self._truncate_ext_tail()

    # --- offsets -----------------------------------------------------------------------
    def get_min_offset_in_queue(self) -> int:
        return self.min_logic_offset // CQ_STORE_UNIT_SIZE

    def get_max_offset_in_queue(self) -> int:
        mf = self._last_written()
        return (mf.file_from_offset + mf.read_position()) // CQ_STORE_UNIT_SIZE if mf else 0

    def correct_min_offset(self, phy_min_offset: int) -> None:
        """STORE_FORMAT.md 5.4: first entry of the first file pointing at data
        that still exists."""
        mf = self.mfq.get_first_mapped_file()
        if mf is None:
            return
        end = mf.read_position()
        view = mf.view
        for pos in range(0, end, 20):
            off, size, _ = _ENTRY.unpack_from(view, pos)
            if size == FILLER_SIZE:
                continue
            if off >= phy_min_offset:
                self.min_logic_offset = mf.file_from_offset + pos
                return
        self.min_logic_offset = mf.file_from_offset + end

    # --- writes ------------------------------------------------------------------------
    def put_message_position_info(self, offset: int, size: int, tags_code: int, cq_offset: int,
                                  store_ts: int = 0, bitmap: bytes | None = None) -> bool:
        """Append one entry for logical offset ``cq_offset`` (idempotent: entries
        already covered by ``max_physic_offset`` or below the write position are
        ignored, STORE_FORMAT.md 5.5).  With an ext file the tags code, store
        time and bitmap go there and the entry holds the unit's address (the
        plain tags code when the unit cannot be stored, as 4.9.8)."""
        if offset + size <= self.max_physic_offset:
            return True
        if self.ext is not None:
            addr = self.ext.put(CqExtUnit(tags_code, store_ts, bitmap or b""))
            if is_ext_addr(addr):
                tags_code = addr
            else:
                log.warning("save consume queue extend failed, only the tags code is kept: "
                            "%s-%d offset %d", self.topic, self.queue_id, cq_offset)
        expect = cq_offset * CQ_STORE_UNIT_SIZE
        mf = self.tail_file
        if mf is not None:
            pos = mf.wrote_position
            if pos + 20 <= mf.reserved_to and mf.file_from_offset + pos == expect:
                # the common case: the next entry of the current file
                cq_write(mf.view, pos, offset, size, tags_code)
                mf.wrote_position = mf.committed_position = pos + 20
                self.max_physic_offset = offset + size
                return True
        mf = self._file_for(expect)
        if mf is None:
            return False
        current = mf.file_from_offset + mf.wrote_position
        if expect < current:
            return True
        if expect != current:
            log.warning("[BUG]logic queue order maybe wrong, expectLogicOffset: %d currentLogicOffset: %d "
                        "topic: %s queue: %d", expect, current, self.topic, self.queue_id)
        if not self.make_room(mf, mf.wrote_position + 20):
            return False
        cq_write(mf.view, mf.wrote_position, offset, size, tags_code)
        mf.wrote_position += 20
        mf.committed_position = mf.wrote_position
        self.max_physic_offset = offset + size
        self.tail_file = mf
        return True

    def _file_for(self, expect: int) -> MappedFile | None:
        # the file holding ``expect``: a put may have made the next one already
        # (DispatchRoom), so the last file is not always the one
        mf = self.mfq.find_mapped_file_by_offset(expect)
        if mf is None:
            mf = self.mfq.get_last_mapped_file(expect, need_create=True)
        if mf is None:
            return None
        if mf.first_create_in_queue and mf.wrote_position == 0 and expect != 0 and \
                expect > mf.file_from_offset:
            # first file of this queue made for a non-zero offset: fill the gap
            fill_to = expect - mf.file_from_offset
            if not self.make_room(mf, fill_to + 20):
                return None
            cq_filler(mf.view, 0, fill_to)
            mf.set_positions(fill_to)
            mf.flushed_position = 0
            self.mfq.flushed_where = expect
            self.min_logic_offset = expect
        elif mf.wrote_position == 0 and mf.file_from_offset == expect and len(self.mfq.mapped_files) == 1:
            self.min_logic_offset = expect
        return mf

    def room_target(self, have: int, end: int) -> int:
        """Where a window reserved up to ``have`` grows to for a write up to
        ``end``: by half of what it holds, in ``ROOM_MIN`` .. ``ROOM_MAX``,
        whole pages, within the file."""
        to = max(end, have + min(max(have // 2, ROOM_MIN), ROOM_MAX))
        return min(to + -to % ROOM_MIN, self.file_size)

    def make_room(self, mf: MappedFile, end: int) -> bool:
        """Reserve the blocks of ``mf`` up to ``end`` (a byte of the file)
        and ahead of it (``ROOM_MIN``), so that its writers may write there;
        False, with the queue's ``no_space`` and ``last_error`` set, when the
        disk has no room."""
        have = mf.reserved_to
        if end <= have:
            return True
        if mf.reserve_range(have, self.room_target(have, end), 0, quiet=True):
            return True
        mfq = self.mfq
        mfq.no_space = True
        mfq.last_error = f"reserve the blocks of {mf.file_name} from {have} failed: no space"
        return False

    def keep_room(self) -> None:
        """Grow the window of the file appends go to once three quarters of
        it are written, off the put path (the consume-queue flusher's rounds): the
        lanes keep within a window and leave a queue whose window is full to
        the general path, so they then seldom meet one.  Left as it is when
        the disk has no room: the put that needs it asks (``make_room``)."""
        mf = self.tail_file
        if mf is None:
            return
        have = mf.reserved_to
        if have < self.file_size and mf.wrote_position >= have - have // 4:
            # (a file closed meanwhile, by a truncation, reserves nothing)
            mf.reserve_range(have, self.room_target(have, have + 1), 0, quiet=True)

    # --- reads -------------------------------------------------------------------------
    def get_index_buffer(self, start_index: int) -> tuple[memoryview, int] | None:
        """Entries from logical offset ``start_index`` to the end of its file:
        ``(view, logical byte offset of view[0])``."""
        offset = start_index * CQ_STORE_UNIT_SIZE
        if offset < self.min_logic_offset:
            return None
        mf = self.mfq.find_mapped_file_by_offset(offset)
        if mf is None:
            return None
        view = mf.select(offset % self.file_size)
        if view is None:
            return None
        return view, offset

    def read_entry(self, index: int) -> tuple[int, int, int] | None:
        offset = index * CQ_STORE_UNIT_SIZE
        mf = self.mfq.find_mapped_file_by_offset(offset)
        if mf is None:
            return None
        pos = offset % self.file_size
        if pos + 20 > mf.read_position():
            return None
        try:
            return _ENTRY.unpack_from(mf.view, pos)
        except ValueError:
            return None

    def resolve_tags(self, tags: int) -> int | None:
        """The tags code of an entry's third field: the field itself, or its
        ext unit's tags code when it is an ext address (None when that unit
        cannot be read)."""
        if not is_ext_addr(tags) or self.ext is None:
            return tags
        unit = self.ext.get(tags)
        return unit.tags_code if unit is not None else None

    def get_offset_in_queue_by_time(self, timestamp: int, store_time_of) -> int:
        """Queue offset whose store time is nearest ``timestamp`` (the first exact
        match when one exists); binary search over the live entries."""
        lo = self.get_min_offset_in_queue()
        hi = self.get_max_offset_in_queue() - 1
        if hi < lo:
            return 0
        left_idx = right_idx = -1
        left_ts = right_ts = 0
        while lo <= hi:
            mid = (lo + hi) // 2
            entry = self.read_entry(mid)
            ts = store_time_of(entry[0], entry[1]) if entry and entry[1] != FILLER_SIZE else -1
            if ts < 0:
                lo = mid + 1
                continue
            if ts < timestamp:
                left_idx, left_ts = mid, ts
                lo = mid + 1
            else:
                right_idx, right_ts = mid, ts
                hi = mid - 1
        if right_idx != -1 and right_ts == timestamp:
            return right_idx
        if left_idx == -1:
            return right_idx if right_idx != -1 else 0
        if right_idx == -1:
            return left_idx
        return right_idx if abs(timestamp - left_ts) > abs(timestamp - right_ts) else left_idx

    # --- flush / clean ------------------------------------------------------------------
    def flush(self, least_pages: int) -> bool:
        ok = self.mfq.flush(least_pages)
        if self.ext is not None:
            ok = self.ext.flush(least_pages) and ok
        return ok

    def delete_expired_file(self, phy_min_offset: int) -> int:
        def last_entry_offset(mf: MappedFile, pos: int) -> int | None:
            try:
                off, size, _ = _ENTRY.unpack_from(mf.view, pos)
            except (ValueError, struct.error):  # (released, or past a window)
                return None
            return off if size > 0 else None

        n = self.mfq.delete_expired_file_by_offset(phy_min_offset, CQ_STORE_UNIT_SIZE, last_entry_offset)
        self.correct_min_offset(phy_min_offset)
        if self.ext is not None:
            first = self._ext_addr_near(last=False)
            if first is not None:
                self.ext.truncate_by_min_address(first)
        return n

    def destroy(self) -> None:
        self.tail_file = None
        self.max_physic_offset = -1
        self.min_logic_offset = 0
        self.mfq.destroy()
        if self.ext is not None:
            self.ext.destroy()
        try:
            os.rmdir(os.path.dirname(self.mfq.store_paths[0]))
        except OSError:
            pass

    def shutdown(self) -> None:
        self.mfq.shutdown()
        if self.ext is not None:
            self.ext.shutdown()
