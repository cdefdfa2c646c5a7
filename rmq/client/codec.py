"""Client-side message encoding and decoding.

Pull, query and view bodies are stored-message records back to back
(../shared/spec/PROTOCOL.md 5.1).  Each record is checked and read with the
store's ``scan_record`` (compiled in ``rmq._fast.store_codec``), and only the
few fields it does not return (flag, born time and host, reconsume times,
body) are unpacked here.  Offsets inside a record (IPv4 hosts; +12 per IPv6 host)::

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

from rmq.client.message import Message, MessageExt
from rmq.common.message import (
    COMPRESSED_FLAG,
    PROPERTY_MAX_OFFSET,
    PROPERTY_MIN_OFFSET,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
)
from rmq.store.message_codec import SCAN_MESSAGE, scan_record, string_to_message_properties

_I = struct.Struct(">i")
_Q = struct.Struct(">q")
_HOST4 = struct.Struct(">4si")
_BATCH_HEAD = struct.Struct(">iiiii")
_H = struct.Struct(">h")
COMPRESSION_TYPE_MASK = 0x700
ZLIB_TYPES = (0x000, 0x300)


class MessageDecodeError(ValueError):
    """A pull/query body that is not a sequence of complete message records."""


def properties_string(props: dict[str, str]) -> str:
    """``name\\x01value`` pairs joined by ``\\x02`` (no trailing separator)."""
    return "\x02".join([f"{k}\x01{v}" for k, v in props.items() if v is not None])


def _host(buf, p: int, v6: bool) -> str:
    if v6:
        ip = socket.inet_ntop(socket.AF_INET6, bytes(buf[p:p + 16]))
        return f"{ip}:{_I.unpack_from(buf, p + 16)[0]}"
    raw, port = _HOST4.unpack_from(buf, p)
    return f"{socket.inet_ntoa(raw)}:{port}"


def decompress_body(body: bytes, sys_flag: int) -> bytes:
    """Inflate a body whose sysFlag says compressed (zlib: type 0 or 3)."""
    if sys_flag & COMPRESSION_TYPE_MASK not in ZLIB_TYPES:
        raise MessageDecodeError(f"unsupported compression type in sysFlag {sys_flag:#x}")
    try:
        return zlib.decompress(body)
    except zlib.error as e:
        raise MessageDecodeError(f"corrupt compressed body: {e}") from None


_CRC_FLAG_BORN = struct.Struct(">i4xi20xq")  # BODYCRC at 8, FLAG at 16, BORNTIMESTAMP at 40
_TAIL = struct.Struct(">i8xi")  # RECONSUMETIMES, (PREPAREDTXOFFSET), BODYLENGTH
_hosts: dict[bytes, str] = {}  # raw BORNHOST/STOREHOST field -> "ip:port"
_id_heads: dict[bytes, str] = {}  # raw STOREHOST field -> its offset-message-id hex


def _host_text(raw: bytes) -> str:
    """``ip:port`` of a raw host field; cached (a pull sees few distinct hosts)."""
    text = _hosts.get(raw)
    if text is None:
        if len(_hosts) > 4096:
            _hosts.clear()
        text = _hosts[raw] = _host(raw, 0, len(raw) == 20)
    return text


def _id_head(raw: bytes) -> str:
    head = _id_heads.get(raw)
    if head is None:
        if len(_id_heads) > 4096:
            _id_heads.clear()
        head = _id_heads[raw] = raw.hex().upper()
    return head


def parse_properties(text: str) -> dict[str, str]:
    """``string2messageProperties`` for the common case (every segment a well-formed
    ``name\x01value``); anything unusual goes through the store's exact parser."""
    try:
        props = dict(seg.split("\x01", 1) for seg in text.split("\x02") if seg)
    except ValueError:  # a segment without \x01
        return string_to_message_properties(text)
    if "" in props or "" in props.values():  # empty name or value: Java skips them
        return string_to_message_properties(text)
    return props


def decode_messages(body, broker_name: str = "", min_offset: int | None = None,
                    max_offset: int | None = None) -> list[MessageExt]:
    """Every record of a pull/query/view body as ``MessageExt`` (bodies inflated,
    ``msg_id`` = UNIQ_KEY or offset id).  ``min_offset``/``max_offset`` are added
    as MIN_OFFSET/MAX_OFFSET properties, as the Java client does after a pull."""
    mv = memoryview(body)
    n = len(mv)
    out: list[MessageExt] = []
    append = out.append
    pos = 0
    scan = scan_record
    crc_flag_born, tail_unpack = _CRC_FLAG_BORN.unpack_from, _TAIL.unpack_from
    host_text, id_head = _host_text, _id_head
    new_ext = MessageExt.__new__  # every slot is assigned below: skip __init__'s defaults
    uniq_key = PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX
    extra_props = {}
    if min_offset is not None:
        extra_props[PROPERTY_MIN_OFFSET] = str(min_offset)
    if max_offset is not None:
        extra_props[PROPERTY_MAX_OFFSET] = str(max_offset)
    while pos < n:
        r = scan(mv, pos, n, False)
        if r[0] != SCAN_MESSAGE:
            raise MessageDecodeError(f"bad message record at byte {pos} of {n}")
        _st, size, topic, queue_id, queue_offset, phy, sys_flag, store_ts = r[:8]
        props_pos, props_len = r[12], r[13]
        born_len = 20 if sys_flag & 0x10 else 8
        store_len = 20 if sys_flag & 0x20 else 8
        store_host_pos = pos + 56 + born_len
        tail = store_host_pos + store_len
        reconsume, body_len = tail_unpack(mv, tail)
        body_pos = tail + 16
        m = new_ext(MessageExt)
        m.topic = topic
        m.queue_id = queue_id
        m.queue_offset = queue_offset
        m.commit_log_offset = phy
        m.sys_flag = sys_flag
        m.store_timestamp = store_ts
        m.store_size = size
        m.body_crc, m.flag, m.born_timestamp = crc_flag_born(mv, pos + 8)
        m.born_host = host_text(bytes(mv[pos + 48:pos + 48 + born_len]))
        store_raw = bytes(mv[store_host_pos:tail])
        m.store_host = host_text(store_raw)
        m.reconsume_times = reconsume
        m.prepared_transaction_offset = r[14]
        raw = bytes(mv[body_pos:body_pos + body_len])
        m.body = decompress_body(raw, sys_flag) if sys_flag & COMPRESSED_FLAG else raw
        if props_len:
            props = parse_properties(bytes(mv[props_pos:props_pos + props_len]).decode(
                "utf-8", "replace"))
        else:
            props = {}
        if extra_props:
            props.update(extra_props)
        m.properties = props
        offset_id = m.offset_msg_id = id_head(store_raw) + f"{phy:016X}"
        m.msg_id = props.get(uniq_key) or offset_id
        m.broker_name = broker_name
        append(m)
        pos += size
    return out


def encode_batch(msgs: list[Message]) -> bytes:
    """The SEND_BATCH_MESSAGE body of ``msgs`` (``MessageDecoder.encodeMessages``);
    bodies are sent uncompressed, as Java does."""
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
