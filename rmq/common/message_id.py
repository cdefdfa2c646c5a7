"""Message ids: the broker's "offset message id" and the client's UNIQ_KEY.

Offset message id (``MessageDecoder.createMessageId``), STORE_FORMAT.md 2.6:
upper-case hex of store host address (4 or 16 bytes) + port (4-byte int) +
commit log physical offset (8-byte long): 32 hex chars for IPv4, 56 for IPv6.

UNIQ_KEY (``MessageClientIDSetter``), STORE_FORMAT.md 2.12: upper-case hex of
client IP (4/16) + pid low 16 bits (2) + class-loader hash (4) -- a fixed
prefix per process -- then milliseconds since the start of the current month
in local time (4-byte int) + a per-process counter (2-byte short).
"""

from __future__ import annotations

import datetime as _dt
import ipaddress
import itertools
import os
import random
import socket
import struct
import time

_PORT_OFFSET = struct.Struct(">iq")


def host_bytes(ip: str) -> bytes:
    """Raw address bytes as Java stores them (IPv4-mapped IPv6 -> 4 bytes)."""
    addr = ipaddress.ip_address(ip)
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        addr = addr.ipv4_mapped
    return addr.packed


def socket_address_bytes(host: tuple[str, int]) -> bytes:
    """Address bytes + 4-byte big-endian port: the BORNHOST/STOREHOST field."""
    return host_bytes(host[0]) + struct.pack(">i", host[1])


def create_message_id(store_host: tuple[str, int], commit_log_offset: int) -> str:
    """Offset message id of a record stored at ``commit_log_offset``."""
    return (host_bytes(store_host[0]) + _PORT_OFFSET.pack(store_host[1], commit_log_offset)).hex().upper()


def decode_message_id(msg_id: str) -> tuple[tuple[str, int], int]:
    """``(store_host, commit_log_offset)`` of an offset message id.

    Raises ValueError for anything that is not 32 or 56 hex characters.
    """
    if len(msg_id) not in (32, 56):
        raise ValueError(f"bad offset message id length {len(msg_id)}: {msg_id!r}")
    raw = bytes.fromhex(msg_id)
    ip_len = 4 if len(raw) == 16 else 16
    ip = str(ipaddress.ip_address(raw[:ip_len]))
    port, offset = _PORT_OFFSET.unpack_from(raw, ip_len)
    return (ip, port), offset


def _local_ip_bytes() -> bytes:
    """The client IP part: first non-loopback IPv4 if one is known, else 127.0.0.1."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect(("10.255.255.255", 1))
            return socket.inet_aton(s.getsockname()[0])
    except OSError:
        return socket.inet_aton("127.0.0.1")


def _month_start_ms(now_ms: int) -> tuple[int, int]:
    """Start of the current and of the next month in local time, epoch ms."""
    now = _dt.datetime.fromtimestamp(now_ms / 1000).astimezone()
    start = now.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    nxt = (start + _dt.timedelta(days=32)).replace(day=1)
    return int(start.timestamp() * 1000), int(nxt.timestamp() * 1000)


_HEX2 = [f"{i:02X}" for i in range(256)]  # the counter's two bytes by table: no formatting


class MessageClientIDSetter:
    """Generates UNIQ_KEY values in the 4.9.8 layout; one per process.

    Every send stamps one, so the text up to the counter (prefix + time part)
    is kept for the current millisecond and only the counter's four hex digits
    are added per id.  No lock: ``next`` on an ``itertools.count`` is atomic
    under the GIL and the cached state is swapped as one tuple, so ids stay
    unique across threads."""

    def __init__(self, ip: bytes | None = None, pid: int | None = None) -> None:
        ip = ip if ip is not None else _local_ip_bytes()
        pid = os.getpid() if pid is None else pid
        loader_hash = random.getrandbits(31)
        self._prefix = (ip + struct.pack(">Hi", pid & 0xFFFF, loader_hash)).hex().upper()
        self._counter = itertools.count(random.getrandbits(15))
        self._month = _month_start_ms(time.time_ns() // 1_000_000)
        self._head: tuple[int, str] = (-1, "")  # (ms, prefix + time part of that ms)

    @property
    def prefix(self) -> str:
        return self._prefix

    def _head_of(self, now_ms: int) -> str:
        """Prefix + time part for ``now_ms`` (remembered for the next id)."""
        start, nxt = self._month
        if now_ms >= nxt or now_ms < start:
            start, nxt = self._month = _month_start_ms(now_ms)
        head = f"{self._prefix}{(now_ms - start) & 0xFFFFFFFF:08X}"
        self._head = (now_ms, head)
        return head

    def create_uniq_id(self, now_ms: int | None = None) -> str:
        if now_ms is None:
            now_ms = time.time_ns() // 1_000_000
        ms, head = self._head
        if ms != now_ms:
            head = self._head_of(now_ms)
        count = next(self._counter) & 0xFFFF
        return head + _HEX2[count >> 8] + _HEX2[count & 0xFF]

    def create_uniq_ids(self, n: int, now_ms: int | None = None) -> list[str]:
        """``n`` ids for one batch: one clock read, ``n`` consecutive counter values."""
        if now_ms is None:
            now_ms = time.time_ns() // 1_000_000
        ms, head = self._head
        if ms != now_ms:
            head = self._head_of(now_ms)
        hex2 = _HEX2
        return [head + hex2[(c >> 8) & 0xFF] + hex2[c & 0xFF]
                for c in itertools.islice(self._counter, n)]

    def month_start_ms(self) -> int:
        return self._month[0]


_default: MessageClientIDSetter | None = None


def _generator() -> MessageClientIDSetter:
    global _default
    if _default is None:
        _default = MessageClientIDSetter()
    return _default


def create_uniq_id() -> str:
    """A fresh UNIQ_KEY from the process-wide generator."""
    return (_default or _generator()).create_uniq_id()


def create_uniq_ids(n: int) -> list[str]:
    """``n`` fresh UNIQ_KEYs (a batch) from the process-wide generator."""
    return (_default or _generator()).create_uniq_ids(n)


def uniq_id_ip(uniq_id: str) -> str:
    """The client IP encoded in a UNIQ_KEY (32 chars -> IPv4, 56 -> IPv6)."""
    raw = bytes.fromhex(uniq_id)
    return str(ipaddress.ip_address(raw[:4] if len(raw) == 16 else raw[:16]))
