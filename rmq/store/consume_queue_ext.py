"""ConsumeQueueExt: the per-queue extension units of 4.9.8's consume queue.

With ``enableConsumeQueueExt`` each consume-queue entry's third field (the
tags code) may hold an *address* into ``consumequeue_ext/<topic>/<queueId>/``
instead of the tags code itself.  An address is the unit's byte offset in
that file stream plus ``Long.MIN_VALUE`` (so it is <= ``MAX_ADDR``, which
no tags code, an int hash widened to long, can be).  A unit, big-endian::

    short size         (20 + bitmap bytes)
    long  tags code
    long  store timestamp
    short bitmap size  (bytes)
    bytes bitmap       (the SQL92 bloom-filter bits of the message)

A unit never crosses a file end: when it does not fit (keeping 4 bytes
free), ``-1`` is written as the next size and the file counts as full.
Recovery walks the units until a size <= 0 and truncates there; the
consume queue then truncates the tail past its last kept entry's address.
"""

from __future__ import annotations

import logging
import os
import struct
from dataclasses import dataclass

from rmq.store.mapped_file import MappedFile, MappedFileQueue

log = logging.getLogger("store")

LONG_MIN = -(1 << 63)
MAX_ADDR = -(1 << 31) - 1  # Integer.MIN_VALUE - 1L
MAX_REAL_OFFSET = MAX_ADDR - LONG_MIN
END_BLANK_DATA_LENGTH = 4
MIN_EXT_UNIT_SIZE = 20
MAX_EXT_UNIT_SIZE = 0x7FFF
_HEAD = struct.Struct(">hqqh")
FAILED = 1  # what ``put`` returns when nothing was written (not an address)
RESERVE_AHEAD = 1 << 20  # blocks reserved at a time ahead of the units (MappedFile.reserve_range)


def is_ext_addr(value: int) -> bool:
    """True when a consume-queue tags field is an ext address."""
    return value <= MAX_ADDR


def decorate(offset: int) -> int:
    return offset + LONG_MIN if not is_ext_addr(offset) else offset


def undecorate(address: int) -> int:
    return address - LONG_MIN if is_ext_addr(address) else address


@dataclass(slots=True)
class CqExtUnit:
    tags_code: int = 0
    store_timestamp: int = 0
    bitmap: bytes = b""

    @property
    def size(self) -> int:
        return MIN_EXT_UNIT_SIZE + len(self.bitmap)

    def encode(self) -> bytes:
        return _HEAD.pack(self.size, self.tags_code, self.store_timestamp,
                          len(self.bitmap)) + self.bitmap

    @classmethod
    def decode(cls, buf, pos: int) -> CqExtUnit | None:
        """The unit at ``buf[pos:]``; None for the end marker, a zero tail or
        a unit that does not fit where it claims to be."""
        if pos < 0 or pos + MIN_EXT_UNIT_SIZE > len(buf):
            return None
        size, tags, ts, bitmap_len = _HEAD.unpack_from(buf, pos)
        if size < MIN_EXT_UNIT_SIZE or bitmap_len < 0 or size != MIN_EXT_UNIT_SIZE + bitmap_len \
                or pos + size > len(buf):
            return None
        return cls(tags, ts, bytes(buf[pos + MIN_EXT_UNIT_SIZE:pos + size]))


class ConsumeQueueExt:
    """One topic/queue's extension files."""

    def __init__(self, topic: str, queue_id: int, root: str, file_size: int) -> None:
        self.topic = topic
        self.queue_id = queue_id
        self.file_size = file_size
        # sparse files, their blocks reserved ahead of the units (as 4.9.8's
        # are sparse: a queue's 48 MiB file holds on disk what it was given);
        # mapped MADV_RANDOM as the consume queues are: a unit's write into a
        # page not yet read would otherwise fault in a readahead window of
        # zero-filled pages, a cost per queue that many queues multiply
        self.mfq = MappedFileQueue(os.path.join(root, topic, str(queue_id)), file_size,
                                   random_access=True, reserve=False)

    def load(self) -> bool:
        return self.mfq.load()

    # --- writes ------------------------------------------------------------------------
    def put(self, unit: CqExtUnit) -> int:
        """Append ``unit``; its address (< 0), or FAILED when it cannot be stored
        (the caller then keeps the plain tags code, as 4.9.8 does)."""
        size = unit.size
        if size > MAX_EXT_UNIT_SIZE or size > self.file_size - END_BLANK_DATA_LENGTH:
            log.error("consume queue ext unit of %d bytes too big (%s-%d)", size, self.topic,
                      self.queue_id)
            return FAILED
        if self.mfq.get_max_offset() + size > MAX_REAL_OFFSET:
            return FAILED
        data = unit.encode()
        for _ in range(3):
            mf = self.mfq.get_last_mapped_file(0, need_create=True)
            if mf is None:
                return FAILED
            pos = mf.wrote_position
            if size > self.file_size - pos - END_BLANK_DATA_LENGTH:
                if not mf.reserve_range(pos, pos + 2, 0):
                    return FAILED
                self._fill_to_end(mf, pos)
                continue
            if not mf.reserve_range(pos, pos + size, RESERVE_AHEAD):
                return FAILED
            mf.view[pos:pos + size] = data
            mf.wrote_position = mf.committed_position = pos + size
            return decorate(mf.file_from_offset + pos)
        return FAILED

    def _fill_to_end(self, mf: MappedFile, pos: int) -> None:
        struct.pack_into(">h", mf.view, pos, -1)
        mf.wrote_position = mf.committed_position = self.file_size

    # --- reads -------------------------------------------------------------------------
    def get(self, address: int) -> CqExtUnit | None:
        if not is_ext_addr(address):
            return None
        offset = undecorate(address)
        mf = self.mfq.find_mapped_file_by_offset(offset)
        if mf is None or not mf.file_from_offset <= offset < mf.file_from_offset + self.file_size:
            return None
        pos = offset % self.file_size
        if pos >= mf.read_position():
            return None
        return CqExtUnit.decode(mf.view, pos)

    def max_address(self) -> int:
        mf = self.mfq.get_last_mapped_file()
        return decorate(0 if mf is None else mf.file_from_offset + mf.wrote_position)

    def min_address(self) -> int:
        mf = self.mfq.get_first_mapped_file()
        return decorate(0 if mf is None else mf.file_from_offset)

    # --- recovery and cleaning ------------------------------------------------------------
    def recover(self) -> None:
        """Walk every file's units (as 4.9.8: each file up to its first size <= 0)
        and truncate after the last file's last unit."""
        files = self.mfq.mapped_files
        if not files:
            return
        process = files[0].file_from_offset
        for mf in files:
            pos = 0
            while True:
                unit = CqExtUnit.decode(mf.view, pos)
                if unit is None:
                    break
                pos += unit.size
            process = mf.file_from_offset + pos
        self.mfq.flushed_where = self.mfq.committed_where = process
        self.mfq.truncate_dirty_files(process)

    def truncate_by_max_address(self, address: int) -> None:
        """Drop everything after the unit at ``address`` (the last kept entry's)."""
        unit = self.get(address)
        if unit is None:
            return
        self.mfq.truncate_dirty_files(undecorate(address) + unit.size)

    def truncate_by_min_address(self, address: int) -> int:
        """Delete the files wholly before ``address`` (the first kept entry's)."""
        if not is_ext_addr(address):
            return 0
        offset = undecorate(address)
        victims = [mf for mf in self.mfq.mapped_files[:-1]
                   if mf.file_from_offset + self.file_size < offset]
        self.mfq.remove_files(victims)
        for mf in victims:
            mf.destroy()
        return len(victims)

    def flush(self, least_pages: int) -> bool:
        return self.mfq.flush(least_pages)

    def destroy(self) -> None:
        self.mfq.destroy()

    def shutdown(self) -> None:
        self.mfq.shutdown()
