"""The stored-message record of the commit log (``CommitLog.DefaultAppendMessageCallback``
and ``MessageDecoder`` in 4.9.8; ../shared/spec/STORE_FORMAT.md sections 2 and 17).

Record layout, big-endian, no padding::

    TOTALSIZE     int   whole record, this field included
    MAGICCODE     int   0xDAA320A7 (a blank end-of-file record: 0xCBD43194)
    BODYCRC       int   zlib.crc32(stored body) & 0x7FFFFFFF
    QUEUEID       int
    FLAG          int
    QUEUEOFFSET   long  logical offset in topic/queueId
    PHYSICALOFFSET long offset of this record in the commit log stream
    SYSFLAG       int   0x10: born host IPv6, 0x20: store host IPv6
    BORNTIMESTAMP long
    BORNHOST      4+4 or 16+4 (address, port)
    STORETIMESTAMP long
    STOREHOST     4+4 or 16+4
    RECONSUMETIMES int
    PREPARED TRANSACTION OFFSET long
    BODY          int length + bytes
    TOPIC         signed byte length + UTF-8
    PROPERTIES    short length + UTF-8 ``name\\x01value`` pairs joined by ``\\x02``

A blank record is ``int remaining-bytes-in-file, int BLANK_MAGIC``.

The functions ``record_size``, ``write_record``, ``write_blank``,
``batch_size``, ``write_batch``, ``scan_record`` and
``string_to_message_properties`` are the hot paths; the
pure-Python versions here are the twins of ``rmq._fast.store_codec`` and the
compiled ones replace them at the bottom of the module (as
``fast_send_properties``'s from ``rmq._fast.send_fast`` does).  Both produce the same
bytes and the same tuples.
"""

from __future__ import annotations

import functools
import socket
import struct
import zlib
from array import array

from rmq._fast import compiled
from rmq.common import message as mc
from rmq.common.java import hashmap_order, string_hash
from rmq.store.message import MessageExt, wait_store_msg_ok

MESSAGE_MAGIC_CODE = -626843481  # 0xDAA320A7
BLANK_MAGIC_CODE = -875286124  # 0xCBD43194
END_FILE_MIN_BLANK_LENGTH = 8
MAX_TOPIC_LENGTH = 127
MAX_PROPERTIES_LENGTH = 32767

# scan_record status values
SCAN_END = 0  # no valid record here (zero tail, garbage, truncated)
SCAN_MESSAGE = 1
SCAN_BLANK = 2
SCAN_SIZE_MISMATCH = 3  # magic ok, recomputed size differs: corrupted record
SCAN_CRC_ERROR = 4

# TOTALSIZE, MAGIC, BODYCRC, QUEUEID, FLAG, QUEUEOFFSET, PHYSICALOFFSET, SYSFLAG, BORNTIMESTAMP
_HEAD = struct.Struct(">iiiiiqqiq")
_INT = struct.Struct(">i")
_SHORT = struct.Struct(">h")
_LONG = struct.Struct(">q")
_BLANK = struct.Struct(">ii")
_STORE_TAIL = struct.Struct(">qiq")  # RECONSUMETIMES is between: handled explicitly
_TAIL = struct.Struct(">iqi")  # RECONSUMETIMES, PREPARED TX OFFSET, BODY LENGTH
_BATCH_INNER = struct.Struct(">iiiii")  # TOTALSIZE, MAGIC, BODYCRC, FLAG, BODY LENGTH

SCAN_FIELDS = (
    "status size topic queue_id queue_offset phy_offset sys_flag store_timestamp "
    "tags_code keys uniq_key delay props_pos props_len prepared_tx_offset"
).split()


def body_crc(body) -> int:
    """BODYCRC as stored: CRC-32 of the stored body with the top bit cleared."""
    return zlib.crc32(body) & 0x7FFFFFFF


def host_len(sys_flag: int, v6_bit: int) -> int:
    return 20 if sys_flag & v6_bit else 8


def _record_size(sys_flag: int, body_len: int, topic_len: int, props_len: int) -> int:
    """TOTALSIZE of a record (STORE_FORMAT.md 2.3)."""
    return (
        4 + 4 + 4 + 4 + 4 + 8 + 8 + 4 + 8
        + (20 if sys_flag & 0x10 else 8)
        + 8
        + (20 if sys_flag & 0x20 else 8)
        + 4 + 8 + 4 + body_len + 1 + topic_len + 2 + props_len
    )


def _write_record(
    buf, pos: int, queue_id: int, flag: int, queue_offset: int, phy_offset: int,
    sys_flag: int, born_ts: int, born_host: bytes, store_ts: int, store_host: bytes,
    reconsume_times: int, prepared_tx_offset: int, body, topic: bytes, props: bytes,
) -> int:
    """Encode one record at ``buf[pos:]``; returns its size.

    ``born_host`` / ``store_host`` are the 8- or 20-byte host fields.  Raises
    ValueError when the record does not fit into ``buf`` or a field is out of
    range (callers check sizes first; this is the last line of defence).
    """
    body_len = len(body)
    topic_len = len(topic)
    props_len = len(props)
    size = _record_size(sys_flag, body_len, topic_len, props_len)
    if len(born_host) != host_len(sys_flag, 0x10) or len(store_host) != host_len(sys_flag, 0x20):
        raise ValueError("host field length does not match the sysFlag")
    if topic_len > MAX_TOPIC_LENGTH or props_len > MAX_PROPERTIES_LENGTH:
        raise ValueError("topic or properties too long")
    if pos < 0 or pos + size > len(buf):
        raise ValueError("record does not fit into the buffer")
    _HEAD.pack_into(
        buf, pos, size, MESSAGE_MAGIC_CODE, zlib.crc32(body) & 0x7FFFFFFF, queue_id, flag,
        queue_offset, phy_offset, sys_flag, born_ts,
    )
    p = pos + 48
    hl = len(born_host)
    buf[p : p + hl] = born_host
    p += hl
    _LONG.pack_into(buf, p, store_ts)
    p += 8
    hl = len(store_host)
    buf[p : p + hl] = store_host
    p += hl
    _TAIL.pack_into(buf, p, reconsume_times, prepared_tx_offset, body_len)
    p += 16
    buf[p : p + body_len] = body
    p += body_len
    buf[p] = topic_len
    p += 1
    buf[p : p + topic_len] = topic
    p += topic_len
    _SHORT.pack_into(buf, p, props_len)
    p += 2
    buf[p : p + props_len] = props
    return size


def _write_blank(buf, pos: int, max_blank: int) -> None:
    """The end-of-file blank: remaining byte count + BLANK_MAGIC_CODE."""
    if pos < 0 or pos + 8 > len(buf):
        raise ValueError("blank does not fit into the buffer")
    _BLANK.pack_into(buf, pos, max_blank, BLANK_MAGIC_CODE)


def _batch_size(wire, sys_flag: int, topic_len: int, batch_props_len: int) -> tuple[int, int]:
    """Stored size and message count of a SEND_BATCH_MESSAGE body.

    Raises ValueError for a malformed body (truncated inner record, negative
    lengths, an inner TOTALSIZE that disagrees with its contents).
    """
    mv = memoryview(wire)
    n = len(mv)
    pos = 0
    total = 0
    count = 0
    while pos < n:
        if pos + 20 > n:
            raise ValueError("truncated batch record header")
        inner_size, _magic, _crc, _flag, body_len = _BATCH_INNER.unpack_from(mv, pos)
        if body_len < 0 or pos + 20 + body_len + 2 > n:
            raise ValueError("bad batch body length")
        (props_len,) = _SHORT.unpack_from(mv, pos + 20 + body_len)
        end = pos + 22 + body_len + props_len
        if props_len < 0 or end > n or inner_size != end - pos:
            raise ValueError("bad batch record size")
        if props_len and batch_props_len and mv[end - 1] != 2:
            props_len += 1 + batch_props_len
        elif batch_props_len:
            props_len += batch_props_len
        if props_len > MAX_PROPERTIES_LENGTH:
            raise ValueError("batch properties too long")
        total += _record_size(sys_flag, body_len, topic_len, props_len)
        count += 1
        pos = end
    return total, count


def _write_batch(
    buf, pos: int, wire, queue_id: int, sys_flag: int, born_ts: int, born_host: bytes,
    store_ts: int, store_host: bytes, reconsume_times: int, topic: bytes, batch_props: bytes,
    first_queue_offset: int, phy_offset: int, sizes,
) -> int:
    """Re-encode every inner record of ``wire`` as a full record (STORE_FORMAT.md
    2.14) at ``buf[pos:]`` with consecutive queue and physical offsets; each
    record's size goes to ``sizes[i]``.  Returns the bytes written.  The
    caller has validated ``wire`` with ``batch_size`` and checked the space."""
    mv = memoryview(wire)
    n = len(mv)
    rpos = 0
    wpos = pos
    i = 0
    bpl = len(batch_props)
    while rpos < n:
        _size, _magic, _crc, flag, body_len = _BATCH_INNER.unpack_from(mv, rpos)
        body = mv[rpos + 20 : rpos + 20 + body_len]
        (props_len,) = _SHORT.unpack_from(mv, rpos + 20 + body_len)
        pstart = rpos + 22 + body_len
        props = bytes(mv[pstart : pstart + props_len])
        if bpl:
            if props_len and props[-1] != 2:
                props += b"\x02"
            props += batch_props
        size = _write_record(
            buf, wpos, queue_id, flag, first_queue_offset + i, phy_offset + (wpos - pos),
            sys_flag, born_ts, born_host, store_ts, store_host, reconsume_times, 0, body,
            topic, props,
        )
        sizes[i] = size
        wpos += size
        rpos = pstart + props_len
        i += 1
    return wpos - pos


def _java_hash_utf8(data: bytes) -> int:
    return string_hash(data.decode("utf-8", "replace"))


def has_timer_property(props: bytes) -> bool:
    """Whether a property string names a TIMER_ property (a batch the put
    hook parks, so the fast paths leave it alone)."""
    return props.startswith(b"TIMER_") or b"\x02TIMER_" in props


def _find_props(props: bytes) -> tuple[bytes | None, bytes | None, bytes | None, bytes | None]:
    """TAGS, KEYS, UNIQ_KEY and DELAY values of a property string, following the
    reference parser (segments of >= 3 chars with a \\x01 inside; later wins)."""
    tags = keys = uniq = delay = None
    for seg in props.split(b"\x02"):
        idx = seg.find(b"\x01")
        if idx <= 0 or idx == len(seg) - 1:
            continue
        name = seg[:idx]
        if name == b"TAGS":
            tags = seg[idx + 1 :]
        elif name == b"KEYS":
            keys = seg[idx + 1 :]
        elif name == b"UNIQ_KEY":
            uniq = seg[idx + 1 :]
        elif name == b"DELAY":
            delay = seg[idx + 1 :]
    return tags, keys, uniq, delay


_NOT_A_MESSAGE = (SCAN_END, 0, None, 0, 0, 0, 0, 0, 0, None, None, None, 0, 0, 0)


def _scan_record(buf, pos: int, limit: int, check_crc: bool) -> tuple:
    """Check and read the record at ``buf[pos:limit]`` for dispatch and recovery.

    Returns a tuple laid out as ``SCAN_FIELDS``: status (SCAN_*), size,
    topic (str), queue id, queue offset, physical offset, sysFlag, store
    timestamp, tags code (hash of TAGS), KEYS (str|None), UNIQ_KEY (str|None),
    DELAY level text (str|None), position and length of the properties, and
    the prepared transaction offset.  Anything but SCAN_MESSAGE carries only
    status and size.
    """
    if pos < 0 or pos + 8 > limit or limit > len(buf):
        return _NOT_A_MESSAGE
    size, magic = _BLANK.unpack_from(buf, pos)
    if magic == BLANK_MAGIC_CODE:
        return (SCAN_BLANK, size) + _NOT_A_MESSAGE[2:]
    if magic != MESSAGE_MAGIC_CODE or size < 91 or pos + size > limit:
        return _NOT_A_MESSAGE
    (_s, _m, crc, queue_id, _flag, queue_offset, phy_offset, sys_flag, _born_ts) = _HEAD.unpack_from(buf, pos)
    if size < 91 + (12 if sys_flag & 0x10 else 0) + (12 if sys_flag & 0x20 else 0):
        return (SCAN_SIZE_MISMATCH, size) + _NOT_A_MESSAGE[2:]  # too short for its host fields
    p = pos + 48 + (20 if sys_flag & 0x10 else 8)
    (store_ts,) = _LONG.unpack_from(buf, p)
    p += 8 + (20 if sys_flag & 0x20 else 8)
    _rt, prepared, body_len = _TAIL.unpack_from(buf, p)
    p += 16
    end = pos + size
    if body_len < 0 or p + body_len + 1 > end:
        return (SCAN_SIZE_MISMATCH, size) + _NOT_A_MESSAGE[2:]
    body_pos = p
    p += body_len
    topic_len = buf[p]
    if topic_len > 127 or p + 1 + topic_len + 2 > end:
        return (SCAN_SIZE_MISMATCH, size) + _NOT_A_MESSAGE[2:]
    topic = bytes(buf[p + 1 : p + 1 + topic_len])
    p += 1 + topic_len
    (props_len,) = _SHORT.unpack_from(buf, p)
    p += 2
    if props_len < 0 or _record_size(sys_flag, body_len, topic_len, props_len) != size:
        return (SCAN_SIZE_MISMATCH, size) + _NOT_A_MESSAGE[2:]
    if check_crc and body_len > 0 and zlib.crc32(buf[body_pos : body_pos + body_len]) & 0x7FFFFFFF != crc:
        return (SCAN_CRC_ERROR, size) + _NOT_A_MESSAGE[2:]
    tags = keys = uniq = delay = None
    tags_code = 0
    if props_len:
        tags, keys, uniq, delay = _find_props(bytes(buf[p : p + props_len]))
        if tags:
            tags_code = _java_hash_utf8(tags)
    return (
        SCAN_MESSAGE, size, topic.decode("utf-8", "replace"), queue_id, queue_offset, phy_offset,
        sys_flag, store_ts, tags_code,
        keys.decode("utf-8", "replace") if keys is not None else None,
        uniq.decode("utf-8", "replace") if uniq is not None else None,
        delay.decode("utf-8", "replace") if delay is not None else None,
        p, props_len, prepared,
    )


# --- property strings ---------------------------------------------------------
@functools.lru_cache(maxsize=4096)
def tags_code(tags: str) -> int:
    """tagsCode of a TAGS value (``tagsString2tagsCode``, a Java string hash),
    cached: senders repeat a few tags, the per-character hash loop need not run."""
    return mc.tags_string_to_code(tags)


def message_properties_to_string(props: dict[str, str] | None) -> str:
    """``MessageDecoder.messageProperties2String`` with ``java.util.HashMap``
    iteration order, so the stored bytes equal the Java broker's
    (STORE_FORMAT.md 2.8): pairs ordered by bucket of a table of 16 doubling
    while size > 0.75 x capacity, insertion order within a bucket, joined by
    ``\\x02`` without a trailing separator; null values skipped.  The order
    depends only on the keys in insertion order, so it is computed once per
    key sequence (``rmq.common.java.hashmap_order``): senders repeat the same keys."""
    if not props:
        return ""
    return "\x02".join([f"{k}\x01{v}" for k in hashmap_order(tuple(props))
                         if (v := props[k]) is not None])


_string_to_message_properties = mc.parse_properties_text


def _send_properties(text: str | bytes | None, cluster: str) -> tuple[dict[str, str], str, int]:
    """What a single send stores (STORE_FORMAT.md 3.2): the request's
    properties plus ``CLUSTER`` (WAIT kept in the map, re-added last, for
    ``isWaitStoreMsgOK``), the stored string in HashMap order without
    ``WAIT``, and the tagsCode of ``TAGS`` (0 without)."""
    props = string_to_message_properties(text)
    props[mc.PROPERTY_CLUSTER] = cluster
    wait = props.pop(mc.PROPERTY_WAIT_STORE_MSG_OK, None)
    stored = message_properties_to_string(props)
    if wait is not None:
        props[mc.PROPERTY_WAIT_STORE_MSG_OK] = wait
    tags = props.get(mc.PROPERTY_TAGS)
    return props, stored, tags_code(tags) if tags else 0


def _fast_send_properties(
    text: str | bytes | None, cluster: str,
) -> tuple[str, int, bool, bool, str | None, str | None]:
    """What the single-send fast path needs of the request's properties, as
    ``send_properties`` decides it: the stored string, the tagsCode, whether
    the sender waits for the flush (``isWaitStoreMsgOK``), whether DELAY,
    TRAN_MSG or a TIMER_ property is present (those sends take the general path), and the KEYS
    and UNIQ_KEY values for the index.  The compiled twin builds no map."""
    props, stored, code = _send_properties(text, cluster)
    return (stored, code, wait_store_msg_ok(props.get(mc.PROPERTY_WAIT_STORE_MSG_OK)),
            mc.PROPERTY_DELAY_TIME_LEVEL in props or mc.PROPERTY_TRANSACTION_PREPARED in props
            or any(k.startswith("TIMER_") for k in props),
            props.get(mc.PROPERTY_KEYS), props.get(mc.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX))


# --- whole-message encode / decode (not on the hot path) ----------------------
def _host_from(buf, p: int, v6: bool) -> tuple[tuple[str, int], int]:
    n = 16 if v6 else 4
    ip = socket.inet_ntop(socket.AF_INET6 if v6 else socket.AF_INET, bytes(buf[p : p + n]))
    (port,) = _INT.unpack_from(buf, p + n)
    return (ip, port), p + n + 4


def host_field(host: tuple[str, int]) -> bytes:
    """The 8- or 20-byte BORNHOST/STOREHOST field of ``(ip, port)``."""
    from rmq.common.message_id import socket_address_bytes

    return socket_address_bytes(host)


def encode_message(msg: MessageExt) -> bytes:
    """One full record of ``msg`` as ``bytes`` (all fields taken from ``msg``;
    the properties string is built in Java HashMap order; the v6 sysFlag bits
    follow the host addresses)."""
    born = host_field(msg.born_host)
    store = host_field(msg.store_host)
    sys_flag = msg.sys_flag & ~0x30
    if len(born) == 20:
        sys_flag |= 0x10
    if len(store) == 20:
        sys_flag |= 0x20
    topic = msg.topic.encode("utf-8")
    props = message_properties_to_string(msg.properties).encode("utf-8")
    out = bytearray(record_size(sys_flag, len(msg.body), len(topic), len(props)))
    write_record(
        out, 0, msg.queue_id, msg.flag, msg.queue_offset, msg.commit_log_offset, sys_flag,
        msg.born_timestamp, born, msg.store_timestamp, store, msg.reconsume_times,
        msg.prepared_transaction_offset, msg.body, topic, props,
    )
    return bytes(out)


def decode_message(buf, pos: int = 0, read_body: bool = True, check_crc: bool = False) -> MessageExt:
    """Decode the record at ``buf[pos:]`` into a MessageExt (``MessageDecoder.decode``).

    Raises ValueError for anything that is not a complete, consistent message
    record (a blank included).
    """
    mv = memoryview(buf)
    try:
        (size, magic, crc, queue_id, flag, queue_offset, phy_offset, sys_flag, born_ts) = _HEAD.unpack_from(mv, pos)
        if magic != MESSAGE_MAGIC_CODE:
            raise ValueError(f"bad magic code {magic & 0xFFFFFFFF:#x} at {pos}")
        if size < 91 or pos + size > len(mv):
            raise ValueError(f"bad record size {size} at {pos}")
        born_host, p = _host_from(mv, pos + 48, bool(sys_flag & 0x10))
        (store_ts,) = _LONG.unpack_from(mv, p)
        store_host, p = _host_from(mv, p + 8, bool(sys_flag & 0x20))
        reconsume, prepared, body_len = _TAIL.unpack_from(mv, p)
        p += 16
        if body_len < 0 or p + body_len > pos + size:
            raise ValueError("bad body length")
        body = bytes(mv[p : p + body_len]) if read_body else b""
        if check_crc and body_len and zlib.crc32(mv[p : p + body_len]) & 0x7FFFFFFF != crc:
            raise ValueError(f"body CRC mismatch at {pos}")
        p += body_len
        topic_len = mv[p]
        topic = bytes(mv[p + 1 : p + 1 + topic_len]).decode("utf-8")
        p += 1 + topic_len
        (props_len,) = _SHORT.unpack_from(mv, p)
        p += 2
        if props_len < 0 or _record_size(sys_flag, body_len, topic_len, props_len) != size:
            raise ValueError(f"record size mismatch at {pos}")
        props = string_to_message_properties(mv[p : p + props_len])
    except (struct.error, IndexError, UnicodeDecodeError) as e:
        raise ValueError(f"truncated or corrupt record at {pos}: {e}") from None
    from rmq.common.message_id import create_message_id

    return MessageExt(
        topic=topic, flag=flag, properties=props, body=body, queue_id=queue_id, store_size=size,
        queue_offset=queue_offset, sys_flag=sys_flag, born_timestamp=born_ts, born_host=born_host,
        store_timestamp=store_ts, store_host=store_host,
        msg_id=create_message_id(store_host, phy_offset), commit_log_offset=phy_offset,
        body_crc=crc, reconsume_times=reconsume, prepared_transaction_offset=prepared,
    )


def decode_messages(buf, read_body: bool = True) -> list[MessageExt]:
    """Every record of a pull/query body (records back to back).  Raises
    ValueError when the buffer ends inside a record."""
    mv = memoryview(buf)
    out = []
    pos = 0
    n = len(mv)
    while pos < n:
        msg = decode_message(mv, pos, read_body)
        out.append(msg)
        pos += msg.store_size
    return out


def new_sizes_array(count: int) -> array:
    """Output array for ``write_batch`` (one int per record)."""
    return array("i", bytes(4 * count))


# twins by default; the compiled module replaces them when built
record_size = _record_size
write_record = _write_record
write_blank = _write_blank
batch_size = _batch_size
write_batch = _write_batch
scan_record = _scan_record
send_properties = _send_properties
fast_send_properties = _fast_send_properties
string_to_message_properties = _string_to_message_properties

_c = compiled("store_codec")
if _c is not None:
    record_size = _c.record_size
    write_record = _c.write_record
    write_blank = _c.write_blank
    batch_size = _c.batch_size
    write_batch = _c.write_batch
    scan_record = _c.scan_record
    string_to_message_properties = _c.string_to_message_properties

_s = compiled("send_fast")
if _s is not None:
    _s.bind(hashmap_order, _fast_send_properties)
    fast_send_properties = _s.fast_send_properties
