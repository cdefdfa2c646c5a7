"""TimerCheckpoint: ``config/timercheck``, one mapped 4096-byte page
(layout in ``layout.py``).

Fields are written into the mapping as they change, so a killed process
leaves the latest values in the page cache; ``flush`` (every
``timerFlushIntervalMs`` and at shutdown) makes them durable on disk.
rmq's delivery marker sits at byte 512, outside what 5.3.3 reads.
"""

from __future__ import annotations

import mmap
import os
import time

from rmq.store.mapped_file import reserve_mapped
from rmq.store.timer import layout as L


class TimerCheckpoint:
    def __init__(self, path: str) -> None:
        self.path = path
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        existed = os.path.exists(path)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            if os.fstat(fd).st_size < L.CHECKPOINT_SIZE:
                os.ftruncate(fd, L.CHECKPOINT_SIZE)
            reserve_mapped(fd, L.CHECKPOINT_SIZE, path, not existed)
            self.mm = mmap.mmap(fd, L.CHECKPOINT_SIZE, mmap.MAP_SHARED,
                                mmap.PROT_READ | mmap.PROT_WRITE)
        finally:
            os.close(fd)
        f = L.unpack_checkpoint(self.mm) if existed else L.CheckpointFields()
        self.last_read_time_ms = f.last_read_time_ms
        self.last_timer_log_flush_pos = f.last_timer_log_flush_pos
        self.last_timer_queue_offset = f.last_timer_queue_offset
        self.master_timer_queue_offset = f.master_timer_queue_offset
        self.state_version = f.state_version
        self.timestamp = f.timestamp or int(time.time() * 1000)
        self.counter = f.counter

    def fields(self) -> L.CheckpointFields:
        return L.CheckpointFields(
            self.last_read_time_ms, self.last_timer_log_flush_pos, self.last_timer_queue_offset,
            self.master_timer_queue_offset, self.state_version, self.timestamp, self.counter)

    def write(self) -> None:
        """Put the fields into the mapping (no sync)."""
        self.mm[0:L.CHECKPOINT_USED] = L.pack_checkpoint(self.fields())

    def set_read_time(self, ms: int) -> None:
        self.last_read_time_ms = ms
        self.mm[0:8] = ms.to_bytes(8, "big", signed=True)

    def set_queue_offset(self, offset: int) -> None:
        self.last_timer_queue_offset = self.master_timer_queue_offset = offset
        self.mm[16:32] = offset.to_bytes(8, "big", signed=True) + offset.to_bytes(8, "big", signed=True)

    def next_version(self) -> None:
        self.timestamp = int(time.time() * 1000)
        self.counter += 1

    def marker(self) -> L.Marker:
        return L.unpack_marker(self.mm)

    def set_marker(self, m: L.Marker) -> None:
        self.mm[L.MARKER_AT:L.MARKER_AT + 32] = L.pack_marker(m)

    def flush(self) -> None:
        self.write()
        self.mm.flush()

    def close(self) -> None:
        self.flush()
        self.mm.close()
