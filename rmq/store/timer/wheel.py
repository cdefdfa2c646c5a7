"""TimerWheel: the ``timerwheel`` file of 2 * 7 days of 32-byte slots
(layout in ``layout.py``), mapped and written in place.

5.3.3 copies the whole 38.7 MB file into a direct buffer and writes changed
bytes back once a second; rmq writes the mapping itself, so a slot update is in
the page cache (and survives a killed process) the moment it is made, and the
wheel costs no anonymous memory.

The file is sparse, as 5.3.3's, and its slots are written anywhere in it: a
page's block is reserved before its first slot is written (``reserve_slot``),
so a full disk refuses the timer entry (taken again later) instead of a write
into a hole ending the process with SIGBUS.
"""

from __future__ import annotations

import errno
import mmap
import os
import struct

from rmq.store.mapped_file import OS_PAGE_SIZE, reserve_blocks
from rmq.store.timer import layout as L

BLANK = -1
IGNORE = -2
# a slot's delayed time (in precision units) and its num, the rest skipped
_TIME_AND_NUM = struct.Struct(">q16xi4x")


class TimerWheel:
    def __init__(self, file_name: str, precision_ms: int) -> None:
        self.file_name = file_name
        self.precision_ms = precision_ms
        os.makedirs(os.path.dirname(file_name) or ".", exist_ok=True)
        fd = os.open(file_name, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            size = os.fstat(fd).st_size
            if size not in (0, L.WHEEL_LENGTH):
                raise ValueError(f"Timer wheel length:{size} != expected:{L.WHEEL_LENGTH}")
            if size == 0:
                os.ftruncate(fd, L.WHEEL_LENGTH)
            self.mm = mmap.mmap(fd, L.WHEEL_LENGTH, mmap.MAP_SHARED,
                                mmap.PROT_READ | mmap.PROT_WRITE)
        except BaseException:
            os.close(fd)
            raise
        self.fd = fd  # (kept: pages are reserved as slots are first written)
        # 1 for each page whose block is on disk (a slot never crosses a page)
        self.reserved = bytearray(-(-L.WHEEL_LENGTH // OS_PAGE_SIZE))
        self._mark_data()

    def _mark_data(self) -> None:
        """Mark the pages an existing file holds on disk (``SEEK_DATA`` /
        ``SEEK_HOLE``): whole pages only, a page partly held is reserved
        again at its first write."""
        pos = 0
        while pos < L.WHEEL_LENGTH:
            try:
                data = os.lseek(self.fd, pos, os.SEEK_DATA)
            except OSError as e:
                if e.errno != errno.ENXIO:  # (ENXIO: no data past pos)
                    raise
                return
            hole = os.lseek(self.fd, data, os.SEEK_HOLE)
            first, end = -(-data // OS_PAGE_SIZE), hole // OS_PAGE_SIZE
            self.reserved[first:end] = b"\x01" * max(0, end - first)
            pos = hole

    def reserve_slot(self, time_ms: int) -> bool:
        """Reserve the block of the page ``time_ms``'s slot is in, before the
        slot is written (see the module docstring); False when the disk has
        no room for it.  A flag read once the page is reserved."""
        page = self._pos(time_ms) // OS_PAGE_SIZE
        if self.reserved[page]:
            return True
        if not reserve_blocks(self.fd, page * OS_PAGE_SIZE, OS_PAGE_SIZE, self.file_name):
            return False
        self.reserved[page] = 1
        return True

    def _pos(self, time_ms: int) -> int:
        return L.slot_index(time_ms, self.precision_ms) * L.SLOT_SIZE

    def get_raw_slot(self, time_ms: int) -> L.Slot:
        t, first, last, num, magic = L.unpack_slot_raw(self.mm, self._pos(time_ms))
        return L.Slot(t * self.precision_ms, first, last, num, magic)

    def get_slot(self, time_ms: int) -> L.Slot:
        """The slot of ``time_ms``, or ``EMPTY_SLOT`` when it holds another time."""
        slot = self.get_raw_slot(time_ms)
        if slot.time_ms != time_ms // self.precision_ms * self.precision_ms:
            return L.EMPTY_SLOT
        return slot

    def put_slot(self, time_ms: int, first: int, last: int, num: int = 0, magic: int = 0) -> bool:
        """Write the slot of ``time_ms``; False, with nothing written, when
        its page has no room on disk (``reserve_slot``)."""
        if not self.reserve_slot(time_ms):
            return False
        pos = self._pos(time_ms)
        self.mm[pos:pos + L.SLOT_SIZE] = L.pack_slot(time_ms, self.precision_ms, first, last, num, magic)
        return True

    def revise_slot(self, time_ms: int, first: int, last: int, force: bool) -> None:
        """Recovery: point the slot at ``last`` (and ``first`` unless IGNORE);
        a stale slot is rewritten only with ``force``."""
        raw = self.get_raw_slot(time_ms)
        if raw.time_ms != time_ms // self.precision_ms * self.precision_ms:
            if force:
                f = first if first != IGNORE else last
                self.put_slot(time_ms, f, last, 0, 0)
            return
        self.put_slot(time_ms, raw.first_pos if first == IGNORE else first,
                      raw.last_pos if last == IGNORE else last, raw.num, raw.magic)

    def check_phy_pos(self, time_start_ms: int, max_offset: int) -> int:
        """The smallest first unit of a live slot whose last unit lies past
        ``max_offset`` (the log lost its tail), or a huge number."""
        p = self.precision_ms
        min_first = 2**63 - 1
        for i in range(L.SLOTS_TOTAL * 2):
            t = time_start_ms + i * p
            slot = self.get_raw_slot(t)
            if slot.time_ms // p != t // p:
                continue
            if slot.last_pos > max_offset and slot.first_pos < min_first:
                min_first = slot.first_pos
        return min_first

    def get_num(self, time_ms: int) -> int:
        return self.get_slot(time_ms).num

    def count_ahead(self, start_ms: int, slots: int) -> int:
        """Sum of ``num`` over the ``slots`` consecutive slots from the one of
        ``start_ms``, counting only slots that hold their own time (as
        ``get_slot`` reads them one by one); one pass over the mapping so that
        a day of 100 ms slots is summed at a scrape."""
        first = start_ms // self.precision_ms
        ring = L.SLOTS_TOTAL * 2
        total = done = 0
        while done < slots:
            index = (first + done) % ring
            n = min(slots - done, ring - index)
            chunk = self.mm[index * L.SLOT_SIZE:(index + n) * L.SLOT_SIZE]
            expect = first + done
            for k, (t, num) in enumerate(_TIME_AND_NUM.iter_unpack(chunk)):
                if t == expect + k:
                    total += num
            done += n
        return total

    def flush(self) -> None:
        self.mm.flush()

    def close(self) -> None:
        self.mm.flush()
        self.mm.close()
        os.close(self.fd)
