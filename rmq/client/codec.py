"""Client-side message encoding and decoding.

Pull, query and view bodies are stored-message records back to back
(../shared/spec/PROTOCOL.md 5.1).  ``decode_messages`` checks and reads each
record in one pass into ``MessageExt`` objects, skipping what the client never
uses (tags hash code, index keys); ``rmq._fast.client_codec`` is its compiled
twin (same arguments, same objects, same errors).

Offsets inside a record (IPv4 hosts; +12 per IPv6 host)::

     0 TOTALSIZE  4 MAGIC  8 BODYCRC 12 QUEUEID 16 FLAG 20 QUEUEOFFSET 28 PHYSICALOFFSET
    36 SYSFLAG   40 BORNTIMESTAMP 48 BORNHOST(8|20) STORETIMESTAMP(8) STOREHOST(8|20)
       RECONSUMETIMES(4) PREPAREDTXOFFSET(8) BODYLENGTH(4) BODY TOPICLEN(1) TOPIC PROPLEN(2) PROPS

Batch bodies (SEND_BATCH_MESSAGE, PROTOCOL.md 5.3), one element per message::

    TOTALSIZE int | MAGIC int (0) | BODYCRC int (0) | FLAG int | BODYLENGTH int | BODY
    | PROPERTIESLENGTH short | PROPERTIES
"""

from __future__ import annotations

import socket
import struct
import zlib

from rmq._fast import compiled
from rmq.client.exceptions import MessageDecodeError
from rmq.client.message import Message, MessageExt
from rmq.common.message import (
    COMPRESSED_FLAG,
    PROPERTY_MAX_OFFSET,
    PROPERTY_MIN_OFFSET,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
)

__all__ = ["MessageDecodeError", "decode_messages", "decompress_body", "encode_batch",
           "parse_properties", "properties_string"]

MESSAGE_MAGIC_CODE = -626843481  # 0xDAA320A7
_HEAD = struct.Struct(">iiiiiqqiq")  # TOTALSIZE .. BORNTIMESTAMP: the first 48 bytes
_Q = struct.Struct(">q")
_I = struct.Struct(">i")
_H = struct.Struct(">h")
_TAIL = struct.Struct(">iqi")  # RECONSUMETIMES, PREPAREDTXOFFSET, BODYLENGTH
_BATCH_HEAD = struct.Struct(">iiiii")
COMPRESSION_TYPE_MASK = 0x700
ZLIB_TYPES = (0x000, 0x300)
_hosts: dict[bytes, str] = {}  # raw BORNHOST/STOREHOST field -> "ip:port"
_id_heads: dict[bytes, str] = {}  # raw STOREHOST field -> its offset-message-id hex
_topics: dict[bytes, str] = {}  # raw topic -> text


def properties_string(props: dict[str, str]) -> str:
    """``name\\x01value`` pairs joined by ``\\x02`` (no trailing separator);
    None values are left out, other non-text values written with ``str``."""
    try:  # all text (every send): joined in C
        return "\x02".join(map("\x01".join, props.items()))
    except TypeError:
        return "\x02".join([f"{k}\x01{v}" for k, v in props.items() if v is not None])


def decompress_body(body: bytes, sys_flag: int) -> bytes:
    """Inflate a body whose sysFlag says compressed (zlib: type 0 or 3)."""
    if sys_flag & COMPRESSION_TYPE_MASK not in ZLIB_TYPES:
        raise MessageDecodeError(f"unsupported compression type in sysFlag {sys_flag:#x}")
    try:
        return zlib.decompress(body)
    except zlib.error as e:
        raise MessageDecodeError(f"corrupt compressed body: {e}") from None


def _cached(cache: dict[bytes, str], raw: bytes, make) -> str:
    """``make(raw)`` remembered: a pull sees few distinct hosts and topics."""
    text = cache.get(raw)
    if text is None:
        if len(cache) > 4096:
            cache.clear()
        text = cache[raw] = make(raw)
    return text


def _host(raw: bytes) -> str:
    if len(raw) == 20:
        return f"{socket.inet_ntop(socket.AF_INET6, raw[:16])}:{_I.unpack_from(raw, 16)[0]}"
    return f"{socket.inet_ntoa(raw[:4])}:{_I.unpack_from(raw, 4)[0]}"


def _id_head(raw: bytes) -> str:
    return raw.hex().upper()


def _topic(raw: bytes) -> str:
    return raw.decode("utf-8", "replace")


def parse_properties(text: str) -> dict[str, str]:
    """``MessageDecoder.string2messageProperties``: segments split on ``\\x02``,
    each kept only when its first ``\\x01`` is neither its first nor its last
    character (empty names and values are skipped; the value may hold further
    ``\\x01``); a later duplicate wins.  A fresh dict every call (callers add
    MIN_OFFSET/MAX_OFFSET to it)."""
    if not ("\x01\x02" in text or "\x02\x01" in text or text[:1] == "\x01"
            or text[-1:] == "\x01"):  # no empty name or value anywhere: the common case
        try:
            return dict(seg.split("\x01", 1) for seg in text.split("\x02") if seg)
        except ValueError:  # a segment without \x01
            pass
    props = {}
    for seg in text.split("\x02"):
        i = seg.find("\x01")
        if 0 < i < len(seg) - 1:
            props[seg[:i]] = seg[i + 1:]
    return props


def _bad(pos: int, n: int) -> MessageDecodeError:
    return MessageDecodeError(f"bad message record at byte {pos} of {n}")


def _decode_messages(body, broker_name: str = "", min_offset: int | None = None,
                     max_offset: int | None = None, check_crc: bool = False) -> list[MessageExt]:
    """Every record of a pull/query/view body as ``MessageExt`` (bodies inflated,
    ``msg_id`` = UNIQ_KEY or offset id).  ``min_offset``/``max_offset`` are added
    as MIN_OFFSET/MAX_OFFSET properties, as the Java client does after a pull.
    ``check_crc`` verifies BODYCRC (the 4.9.8 client does not; off by default).
    Anything but complete, consistent records raises ``MessageDecodeError``.

    Pure-Python twin of ``rmq._fast.client_codec.decode_messages``."""
    mv = memoryview(body)
    n = len(mv)
    out: list[MessageExt] = []
    append = out.append
    head, tail, q_at, h_at = _HEAD.unpack_from, _TAIL.unpack_from, _Q.unpack_from, _H.unpack_from
    hosts, id_heads, topics = _hosts, _id_heads, _topics
    new_ext = MessageExt.__new__  # every slot is assigned below: skip __init__'s defaults
    uniq_key = PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX
    extra = {}
    if min_offset is not None:
        extra[PROPERTY_MIN_OFFSET] = str(min_offset)
    if max_offset is not None:
        extra[PROPERTY_MAX_OFFSET] = str(max_offset)
    pos = 0
    while pos < n:
        if pos + 48 > n:
            raise _bad(pos, n)
        size, magic, crc, queue_id, flag, queue_offset, phy, sys_flag, born_ts = head(mv, pos)
        end = pos + size
        if magic != MESSAGE_MAGIC_CODE or size < 91 or end > n:
            raise _bad(pos, n)
        born_end = pos + (68 if sys_flag & 0x10 else 56)
        store_end = born_end + 8 + (20 if sys_flag & 0x20 else 8)
        body_pos = store_end + 16
        if body_pos + 3 > end:
            raise _bad(pos, n)
        reconsume, prepared, body_len = tail(mv, store_end)
        topic_pos = body_pos + body_len
        if body_len < 0 or topic_pos + 3 > end:
            raise _bad(pos, n)
        topic_len = mv[topic_pos]
        props_pos = topic_pos + 3 + topic_len
        if topic_len > 127 or props_pos > end:
            raise _bad(pos, n)
        props_len = h_at(mv, props_pos - 2)[0]
        if props_pos + props_len != end:
            raise _bad(pos, n)
        if check_crc and body_len and zlib.crc32(mv[body_pos:topic_pos]) & 0x7FFFFFFF != crc:
            raise MessageDecodeError(f"body CRC mismatch at byte {pos} of {n}")
        m = new_ext(MessageExt)
        m.topic = _cached(topics, bytes(mv[topic_pos + 1:props_pos - 2]), _topic)
        m.queue_id = queue_id
        m.queue_offset = queue_offset
        m.commit_log_offset = phy
        m.sys_flag = sys_flag
        m.store_timestamp = q_at(mv, born_end)[0]
        m.store_size = size
        m.body_crc = crc
        m.flag = flag
        m.born_timestamp = born_ts
        m.born_host = _cached(hosts, bytes(mv[pos + 48:born_end]), _host)
        store_raw = bytes(mv[born_end + 8:store_end])
        m.store_host = _cached(hosts, store_raw, _host)
        m.reconsume_times = reconsume
        m.prepared_transaction_offset = prepared
        raw = bytes(mv[body_pos:topic_pos])
        m.body = decompress_body(raw, sys_flag) if sys_flag & COMPRESSED_FLAG else raw
        if props_len:
            props = parse_properties(str(mv[props_pos:end], "utf-8", "replace"))
        else:
            props = {}
        if extra:
            props.update(extra)
        m.properties = props
        # Java writes the offset as 8 raw bytes: a negative one prints as two's complement
        offset_id = _cached(id_heads, store_raw, _id_head) + f"{phy & 0xFFFFFFFFFFFFFFFF:016X}"
        m.offset_msg_id = offset_id
        m.msg_id = props.get(uniq_key) or offset_id
        m.broker_name = broker_name
        append(m)
        pos = end
    return out


def _encode_batch(msgs: list[Message]) -> bytes:
    """The SEND_BATCH_MESSAGE body of ``msgs`` (``MessageDecoder.encodeMessages``);
    bodies are sent uncompressed, as Java does.

    Pure-Python twin of ``rmq._fast.client_codec.encode_batch``."""
    parts: list[bytes] = []
    append = parts.append
    pack_head, pack_short = _BATCH_HEAD.pack, _H.pack
    for msg in msgs:
        props = properties_string(msg.properties).encode("utf-8")
        body = msg.body
        append(pack_head(22 + len(body) + len(props), 0, 0, msg.flag, len(body)))
        append(body)
        append(pack_short(len(props)))
        append(props)
    return b"".join(parts)


# the twin by default; the compiled module replaces it when built
decode_messages = _decode_messages
encode_batch = _encode_batch

_c = compiled("client_codec")
if _c is not None:
    decode_messages = _c.decode_messages
    encode_batch = _c.encode_batch
