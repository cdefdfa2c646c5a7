"""A parked timer message read straight from its commit-log record.

The timer store reads every parked message twice (to enqueue it, to deliver
it) at up to 10,000 a second; ``decode_message`` builds a full MessageExt
with its offset message id, which costs more than the rest of a delivery.
This reads only what the timer needs (layout: ../shared/spec/STORE_FORMAT.md
2.1), keeps the born host as its stored bytes, and leaves the body out when
it is not wanted.
"""

from __future__ import annotations

import struct
from typing import Any

from rmq.store.message_codec import MESSAGE_MAGIC_CODE, string_to_message_properties

_HEAD = struct.Struct(">iiiiiqqiq")
_STORE_TS = struct.Struct(">q")
_TAIL = struct.Struct(">iqi")
_PROPS_LEN = struct.Struct(">h")


class Parked:
    """What the timer needs of one stored message."""

    __slots__ = ("topic", "queue_id", "flag", "queue_offset", "sys_flag", "born_timestamp",
                 "born_host_field", "store_timestamp", "reconsume_times", "body", "body_crc",
                 "properties", "properties_text", "store_size")

    def __init__(self) -> None:
        self.body = b""


def read_parked(store: Any, phy: int, size: int | None = None, with_body: bool = True) -> Parked | None:
    """The message stored at ``phy``, or None when it is gone or not a message."""
    mv = store.select_one_message_by_offset(phy, size)
    if mv is None:
        return None
    try:
        return parse_parked(mv, with_body)
    except (struct.error, IndexError, UnicodeDecodeError, ValueError):
        return None
    finally:
        mv.release()


def parse_parked(mv: memoryview, with_body: bool) -> Parked:
    size, magic, crc, queue_id, flag, queue_offset, _phy, sys_flag, born_ts = _HEAD.unpack_from(mv, 0)
    if magic != MESSAGE_MAGIC_CODE:
        raise ValueError("not a message")
    m = Parked()
    m.store_size, m.body_crc, m.queue_id, m.flag = size, crc, queue_id, flag
    m.queue_offset, m.sys_flag, m.born_timestamp = queue_offset, sys_flag, born_ts
    p = 48
    host_len = 20 if sys_flag & 0x10 else 8
    m.born_host_field = bytes(mv[p:p + host_len])
    p += host_len
    (m.store_timestamp,) = _STORE_TS.unpack_from(mv, p)
    p += 8 + (20 if sys_flag & 0x20 else 8)
    m.reconsume_times, _prepared, body_len = _TAIL.unpack_from(mv, p)
    p += 16
    if with_body:
        m.body = bytes(mv[p:p + body_len])
    p += body_len
    topic_len = mv[p]
    m.topic = bytes(mv[p + 1:p + 1 + topic_len]).decode("utf-8")
    p += 1 + topic_len
    (props_len,) = _PROPS_LEN.unpack_from(mv, p)
    raw = bytes(mv[p + 2:p + 2 + props_len])
    m.properties_text = raw
    m.properties = string_to_message_properties(raw)
    return m
