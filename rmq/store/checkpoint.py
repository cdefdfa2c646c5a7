"""StoreCheckpoint: the 4096-byte ``checkpoint`` file (STORE_FORMAT.md 8.1).

    0  long physicMsgTimestamp   last commit log data known flushed
    8  long logicsMsgTimestamp   last message written into a consume queue
    16 long indexMsgTimestamp    end time of the last index file that filled up
"""

from __future__ import annotations

import mmap
import os
import struct

from rmq.store.mapped_file import reserve_mapped

_LAYOUT = struct.Struct(">qqq")
FILE_SIZE = 4096


class StoreCheckpoint:
    # slots: the compiled single put sets ``logics_msg_timestamp`` at its slot
    # (rmq._fast.store_put), each put
    __slots__ = ("path", "fd", "mm", "physic_msg_timestamp", "logics_msg_timestamp",
                 "index_msg_timestamp")

    def __init__(self, path: str) -> None:
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        existed = os.path.exists(path)
        self.path = path
        self.fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        if os.fstat(self.fd).st_size != FILE_SIZE:
            os.ftruncate(self.fd, FILE_SIZE)
        reserve_mapped(self.fd, FILE_SIZE, path, not existed)
        self.mm = mmap.mmap(self.fd, FILE_SIZE)
        if existed:
            self.physic_msg_timestamp, self.logics_msg_timestamp, self.index_msg_timestamp = \
                _LAYOUT.unpack_from(self.mm, 0)
        else:
            self.physic_msg_timestamp = self.logics_msg_timestamp = self.index_msg_timestamp = 0

    def flush(self) -> None:
        """Copy the three values into the mapping and force it."""
        _LAYOUT.pack_into(self.mm, 0, self.physic_msg_timestamp, self.logics_msg_timestamp,
                          self.index_msg_timestamp)
        self.mm.flush()

    def min_timestamp(self) -> int:
        return max(0, min(self.physic_msg_timestamp, self.logics_msg_timestamp) - 3000)

    def min_timestamp_index(self) -> int:
        return min(self.min_timestamp(), self.index_msg_timestamp)

    def shutdown(self) -> None:
        if not self.mm.closed:
            self.flush()
            self.mm.close()
            os.close(self.fd)
