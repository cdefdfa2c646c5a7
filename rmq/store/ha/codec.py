"""The HA stream's two byte formats (PROTOCOL.md 7.3-7.4, STORE_FORMAT.md 16).

Slave -> master, repeated, nothing else on the connection::

    +--------------------------------+
    | maxPhyOffset  int64 big-endian |   the next commit-log byte the slave needs
    +--------------------------------+

Master -> slave, repeated::

    +------------------------+-------------------+---------------------------+
    | phyOffset int64 BE     | size int32 BE     | size bytes of commit log  |
    +------------------------+-------------------+---------------------------+

``size`` is at most ``haTransferBatchSize`` and 0 for a heartbeat; a frame
never spans two commit-log files; records may be split across frames.
No handshake, no checksum: TCP and the offsets lining up are the only checks.

The parsers below are incremental (fed whatever the socket delivered) and
own their buffers, so the protocols above them never await per frame.
"""

from __future__ import annotations

import struct

REPORT = struct.Struct(">q")
HEADER = struct.Struct(">qi")
HEADER_SIZE = HEADER.size  # 12
REPORT_SIZE = REPORT.size  # 8
MAX_FRAME_BODY = 4 * 1024 * 1024 - HEADER_SIZE


class HAProtocolError(ValueError):
    """The peer sent bytes that cannot be a valid HA stream."""


def encode_report(max_offset: int) -> bytes:
    """One slave offset report."""
    return REPORT.pack(max_offset)


def encode_header(phy_offset: int, size: int) -> bytes:
    """The 12-byte header of a data frame (size 0 = heartbeat)."""
    return HEADER.pack(phy_offset, size)


class OffsetReportReader:
    """Master side: keeps only the last complete 8-byte report.

    4.9.8 reads into a buffer and takes the value ending at the last multiple
    of 8, so a burst of reports collapses into the newest; bytes of an
    incomplete report wait for the rest.
    """

    __slots__ = ("_pending",)

    def __init__(self) -> None:
        self._pending = b""

    def feed(self, data: bytes) -> int | None:
        """The newest complete report in ``data`` (plus earlier leftovers), or None."""
        buf = self._pending + data if self._pending else data
        whole = len(buf) - len(buf) % REPORT_SIZE
        self._pending = bytes(buf[whole:])
        if whole == 0:
            return None
        return REPORT.unpack_from(buf, whole - REPORT_SIZE)[0]


class FrameReader:
    """Slave side: splits the master's byte stream into (offset, payload) frames.

    ``max_body`` bounds a frame's declared size (a 4.9.8 slave reads into a
    4 MiB buffer, so nothing larger can be valid): a corrupt or foreign stream
    is refused instead of making the reader wait for gigabytes.
    """

    __slots__ = ("_buf", "max_body")

    def __init__(self, max_body: int) -> None:
        self._buf = bytearray()
        self.max_body = max_body

    def feed(self, data: bytes) -> list[tuple[int, bytearray]]:
        """The frames completed by ``data``, in order; a partial frame stays buffered."""
        buf = self._buf
        buf += data
        frames: list[tuple[int, bytearray]] = []
        pos, end = 0, len(buf)
        unpack = HEADER.unpack_from
        while end - pos >= HEADER_SIZE:
            offset, size = unpack(buf, pos)
            if size < 0 or size > self.max_body or offset < 0:
                raise HAProtocolError(f"bad HA frame header: offset {offset} size {size}")
            start = pos + HEADER_SIZE
            if end - start < size:
                break
            pos = start + size
            frames.append((offset, buf[start:pos]))
        if pos:
            del buf[:pos]
        return frames

    def buffered(self) -> int:
        """Bytes received but not yet returned as frames."""
        return len(self._buf)
