"""TimerLog: the append-only log of timer units (``timerlog/``, layout in
``layout.py``), mapped files of ``mappedFileSizeTimerLog`` bytes each.

Units of one wheel slot are chained backwards through ``prevPos``; a slot in
the wheel points at its last unit.  The log lives in mapped files only, so
millions of pending timers cost page cache, not the broker's heap.
"""

from __future__ import annotations

import logging

from rmq.store.mapped_file import MappedFile, MappedFileQueue
from rmq.store.timer import layout as L

log = logging.getLogger("store")


class TimerLog:
    def __init__(self, store_path: str, file_size: int) -> None:
        self.file_size = file_size
        self.mfq = MappedFileQueue(store_path, file_size)

    def load(self) -> bool:
        return self.mfq.load()

    def append(self, unit: bytes) -> int:
        """Append one unit; its timer-log offset, or -1 when no file could be made."""
        mf = self.mfq.get_last_mapped_file(0, need_create=True)
        if mf is None:
            log.error("Create mapped file1 error for timer log")
            return -1
        if len(unit) + L.MIN_BLANK_LEN > self.file_size - mf.wrote_position:
            remaining = self.file_size - mf.wrote_position
            mf.view[mf.wrote_position:mf.wrote_position + L.MIN_BLANK_LEN] = L.pack_blank(remaining)
            mf.wrote_position = mf.committed_position = self.file_size
            mf = self.mfq.get_last_mapped_file(0, need_create=True)
            if mf is None:
                log.error("create mapped file2 error for timer log")
                return -1
        pos = mf.wrote_position
        mf.view[pos:pos + len(unit)] = unit
        mf.wrote_position = mf.committed_position = pos + len(unit)
        return mf.file_from_offset + pos

    def file_at(self, offset: int) -> MappedFile | None:
        return self.mfq.find_mapped_file_by_offset(offset)

    def read_unit(self, offset: int) -> L.Unit | None:
        mf = self.mfq.find_mapped_file_by_offset(offset)
        if mf is None:
            return None
        pos = offset - mf.file_from_offset
        if pos + L.UNIT_SIZE > self.file_size:
            return None
        return L.unpack_unit(mf.view, pos)

    def write_position(self) -> int:
        return self.mfq.get_max_wrote_position()

    def flush(self) -> None:
        self.mfq.flush(0)

    def offset_for_last_unit(self) -> int:
        """``getOffsetForLastUnit``: where the last unit of a full file starts."""
        fs = self.file_size
        return fs - (fs - L.MIN_BLANK_LEN) % L.UNIT_SIZE - L.MIN_BLANK_LEN - L.UNIT_SIZE

    def shutdown(self) -> None:
        self.mfq.flush(0)
        self.mfq.shutdown()
