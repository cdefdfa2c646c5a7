"""DLedger entries: the data-file record, the 32-byte index unit and the JSON
form carried in PUSH requests (DLedger 0.3.1.2 ``DLedgerEntry`` and
``DLedgerEntryCoder``).

Data record, big-endian::

    magic:int size:int index:long term:long pos:long channel:int
    chainCrc:int bodyCrc:int bodySize:int body

``size`` is the whole record (48-byte header + body); ``pos`` is the record's
own offset in the data files, which recovery checks.  Index unit::

    magic:int pos:long size:int index:long term:long
"""

from __future__ import annotations

import struct
from binascii import a2b_base64, b2a_base64
from dataclasses import dataclass, field

from rmq._fast import compiled
from rmq.dledger.protocol import Ordered

MAGIC = 1  # DLedgerMmapFileStore.MAGIC_1, the only magic 0.3.1.2 writes
BLANK_MAGIC = -1  # MmapFileList.BLANK_MAGIC_CODE: the rest of a data file is unused
MIN_BLANK_LEN = 8
POS_OFFSET = 4 + 4 + 8 + 8
HEADER_SIZE = POS_OFFSET + 8 + 4 + 4 + 4  # 44
BODY_OFFSET = HEADER_SIZE + 4  # 48: where the body starts (4.9.8 commit-log data)
INDEX_UNIT_SIZE = 32

RECORD_HEADER = struct.Struct(">iiqqqiiii")
INDEX_UNIT = struct.Struct(">iqiqq")


def _b64encode(data) -> bytes:
    """``binascii.b2a_base64`` without the newline (twin of ``rmq._fast.b64.encode``)."""
    return b2a_base64(data, newline=False)


# an entry's body in a push, in base64 (compiled: one pass, binascii for odd input)
_b64 = compiled("b64")
b64encode = _b64encode if _b64 is None else _b64.encode
b64decode = a2b_base64 if _b64 is None else _b64.decode


@dataclass(slots=True)
class Entry:
    """One Raft entry; ``pos`` and ``size`` are its place in the data files."""

    index: int = -1
    term: int = -1
    body: bytes = b""
    pos: int = -1
    magic: int = MAGIC
    channel: int = 0
    chain_crc: int = 0
    body_crc: int = 0
    size: int = 0
    # the entry's JSON object in a push, made once (``json_bytes``): the
    # leader pushes the same entry to every follower
    wire: bytes | None = field(default=None, compare=False, repr=False)

    def compute_size(self) -> int:
        self.size = BODY_OFFSET + len(self.body)
        return self.size

    def same(self, other: Entry | None) -> bool:
        """``DLedgerEntry.equals``: size, magic, index, term, channel, pos and body."""
        return other is not None and (
            self.size, self.magic, self.index, self.term, self.channel, self.pos, self.body) == (
            other.size, other.magic, other.index, other.term, other.channel, other.pos,
            other.body)

    # --- the data record --------------------------------------------------------
    def encode(self) -> bytes:
        size = self.compute_size()
        return RECORD_HEADER.pack(self.magic, size, self.index, self.term, self.pos, self.channel,
                            self.chain_crc, self.body_crc, len(self.body)) + self.body

    @classmethod
    def decode(cls, data, offset: int = 0) -> Entry:
        """The record at ``offset``; ValueError when it is not a whole record."""
        if len(data) - offset < BODY_OFFSET:
            raise ValueError("truncated entry header")
        magic, size, index, term, pos, channel, chain, body_crc, body_size = \
            RECORD_HEADER.unpack_from(data, offset)
        if body_size < 0 or body_size + BODY_OFFSET != size or offset + size > len(data):
            raise ValueError(f"bad entry size {size} (body {body_size})")
        body = bytes(data[offset + BODY_OFFSET:offset + size])
        return cls(index, term, body, pos, magic, channel, chain, body_crc, size)

    # --- the JSON of PushEntryRequest (fastjson: getters, byte[] as base64) -----
    def to_json_obj(self) -> dict:
        """Keys in fastjson's (sorted) order, none null: encoded as built."""
        return Ordered(body=b64encode(self.body).decode("ascii"),
                       bodyCrc=self.body_crc, chainCrc=self.chain_crc, channel=self.channel,
                       index=self.index, magic=self.magic, pos=self.pos,
                       size=self.compute_size(), term=self.term)

    def json_bytes(self) -> bytes:
        """``to_json_obj`` as encoded, byte for byte (kept on the entry: the
        leader pushes the same entry to each follower)."""
        wire = self.wire
        if wire is None:
            wire = self.wire = b'{"body":"%b","bodyCrc":%d,"chainCrc":%d,"channel":%d,' \
                b'"index":%d,"magic":%d,"pos":%d,"size":%d,"term":%d}' % (
                    b64encode(self.body), self.body_crc, self.chain_crc,
                    self.channel, self.index, self.magic, self.pos, self.compute_size(),
                    self.term)
        return wire

    @classmethod
    def from_json_obj(cls, obj: dict) -> Entry:
        body = obj.get("body")
        entry = cls(int(obj.get("index", -1)), int(obj.get("term", -1)),
                    b64decode(body) if body else b"", int(obj.get("pos", -1)),
                    int(obj.get("magic", MAGIC)), int(obj.get("channel", 0)),
                    int(obj.get("chainCrc", 0)), int(obj.get("bodyCrc", 0)))
        entry.compute_size()
        return entry


def encode_index(pos: int, size: int, magic: int, index: int, term: int) -> bytes:
    return INDEX_UNIT.pack(magic, pos, size, index, term)


def decode_index(data, offset: int = 0) -> tuple[int, int, int, int, int]:
    """(magic, pos, size, index, term) of the index unit at ``offset``."""
    return INDEX_UNIT.unpack_from(data, offset)


def blank(length: int) -> bytes:
    """The filler 0.3.1.2 writes where the next record does not fit a data file."""
    return struct.pack(">ii", BLANK_MAGIC, length) + bytes(length - 8)
