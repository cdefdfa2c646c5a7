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
    i_unpack, q_unpack = _I.unpack_from, _Q.unpack_from
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
        size, topic, queue_id, queue_offset, phy, sys_flag, store_ts = r[1:8]
        props_pos, props_len = r[12], r[13]
        born_v6, store_v6 = sys_flag & 0x10, sys_flag & 0x20
        store_ts_pos = pos + (68 if born_v6 else 56)
        store_host_pos = store_ts_pos + 8
        tail = store_host_pos + (20 if store_v6 else 8)
        body_len = i_unpack(mv, tail + 12)[0]
        body_pos = tail + 16
        m = MessageExt()
        m.topic = topic
        m.queue_id = queue_id
        m.queue_offset = queue_offset
        m.commit_log_offset = phy
        m.sys_flag = sys_flag
        m.store_timestamp = store_ts
        m.store_size = size
        m.flag = i_unpack(mv, pos + 16)[0]
        m.body_crc = i_unpack(mv, pos + 8)[0]
        m.born_timestamp = q_unpack(mv, pos + 40)[0]
        m.born_host = _host(mv, pos + 48, bool(born_v6))
        m.store_host = _host(mv, store_host_pos, bool(store_v6))
        m.reconsume_times = i_unpack(mv, tail)[0]
        m.prepared_transaction_offset = r[14]
        raw = bytes(mv[body_pos:body_pos + body_len])
        m.body = decompress_body(raw, sys_flag) if sys_flag & COMPRESSED_FLAG else raw
        props = string_to_message_properties(mv[props_pos:props_pos + props_len]) if props_len else {}
        if extra_props:
            props.update(extra_props)
        m.properties = props
        offset_id = (bytes(mv[store_host_pos:store_host_pos + (20 if store_v6 else 8)]).hex().upper()
                     + f"{phy:016X}")
        m.offset_msg_id = offset_id
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
