"""Store helpers shared by the fast-path tests that compare a store filled by
a fast path with one filled by the general path."""

from __future__ import annotations

import struct

MESSAGE_MAGIC = -626843481  # MESSAGE_MAGIC_CODE of a stored record
BORNHOST_V6_FLAG = 0x10


def commit_log_records(store) -> list[bytes]:
    """Every record of the commit log with its store timestamp zeroed (the
    one field two fills of the same messages differ in); a file's blank
    end marker counts as one 8-byte entry."""
    out = []
    for mf in store.commit_log.mfq.mapped_files:
        pos = 0
        while pos + 8 <= mf.wrote_position:
            size, magic = struct.unpack_from(">ii", mf.view, pos)
            rec = bytearray(mf.view[pos:pos + (8 if magic != MESSAGE_MAGIC else size)])
            if magic == MESSAGE_MAGIC:
                sys_flag = struct.unpack_from(">i", rec, 36)[0]
                ts_at = 48 + (20 if sys_flag & BORNHOST_V6_FLAG else 8)
                rec[ts_at:ts_at + 8] = bytes(8)
                pos += size
            else:
                pos = mf.wrote_position
            out.append(bytes(rec))
    return out
