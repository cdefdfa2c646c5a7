"""A SEND_BATCH_MESSAGE body stored in one call: its records, their
consume-queue entries and index keys, straight into the current files.

``append_batch`` is what an append session (``rmq.store.append_run``)
writes a batch with; ``_check_wire`` is its reading of the body (sizes,
count, index keys) and ``batch_key_count`` the general put's bound on the
index keys a batch may need.  The compiled twin of ``append_batch`` is
``rmq._fast.store_batch``; both write the same bytes.
"""

from __future__ import annotations

import struct

from rmq._fast import compiled
from rmq.store import message_codec as codec
from rmq.store.dispatch import _CQ, _java_hash_ascii, _key_hash, _signed
from rmq.store.index import _index_put

_LONG = struct.Struct(">q")
_INT = struct.Struct(">i")
_SHORT = struct.Struct(">h")
_BATCH_INNER = struct.Struct(">iiiii")  # TOTALSIZE, MAGIC, BODYCRC, FLAG, BODY LENGTH
_CQ_UNIT = 20


def _key_count(keys: bytes | None, uniq: bytes | None) -> int:
    return (1 if uniq else 0) + (len([k for k in keys.split(b" ") if k]) if keys else 0)


def _check_wire(wire, sys_flag: int, topic_len: int, batch_props: bytes) -> tuple[int, int, int] | None:
    """(stored size, count, upper bound of index keys) of a batch body the
    fast path takes, or None: malformed, DELAY or non-ASCII properties, a
    joined property string over 32767 bytes."""
    _t, bkeys, buniq, bdelay = codec._find_props(batch_props)
    if bdelay is not None or not batch_props.isascii() or codec.has_timer_property(batch_props):
        return None
    batch_keys = _key_count(bkeys, buniq)
    mv = memoryview(wire)
    n = len(mv)
    pos = total = count = keys = 0
    while pos < n:
        if pos + 22 > n:
            return None
        inner_size, _magic, _crc, _flag, body_len = _BATCH_INNER.unpack_from(mv, pos)
        if body_len < 0 or pos + 22 + body_len > n:
            return None
        (plen,) = _SHORT.unpack_from(mv, pos + 20 + body_len)
        end = pos + 22 + body_len + plen
        if plen < 0 or end > n or inner_size != end - pos:
            return None
        raw = bytes(mv[end - plen:end])
        _t, ikeys, iuniq, delay = codec._find_props(raw)
        if delay is not None or not raw.isascii():
            return None
        joined = plen + (1 if plen and batch_props and raw[-1] != 2 else 0) + len(batch_props)
        if joined > codec.MAX_PROPERTIES_LENGTH:
            return None
        keys += _key_count(ikeys, iuniq) + batch_keys
        total += codec._record_size(sys_flag, body_len, topic_len, joined)
        count += 1
        pos = end
    return total, count, keys


def batch_key_count(wire, batch_props: bytes) -> int:
    """Index entries a batch body's messages may need (an upper bound: each
    message's keys plus the batch's own), for DispatchRoom before the put."""
    _t, bkeys, buniq, _d = codec._find_props(batch_props)
    batch_keys = _key_count(bkeys, buniq)
    mv = memoryview(wire)
    n = len(mv)
    pos = keys = 0
    while pos + 22 <= n:
        inner_size, _magic, _crc, _flag, body_len = _BATCH_INNER.unpack_from(mv, pos)
        if body_len < 0 or pos + 22 + body_len > n:
            break
        (plen,) = _SHORT.unpack_from(mv, pos + 20 + body_len)
        end = pos + 22 + body_len + max(plen, 0)
        _t, ikeys, iuniq, _d = codec._find_props(bytes(mv[end - max(plen, 0):end]))
        keys += _key_count(ikeys, iuniq) + batch_keys
        pos = end
    return keys


def _append_batch(buf, pos: int, limit: int, wire, queue_id: int, sys_flag: int, born_ts: int,
                  born_host: bytes, store_ts: int, store_host: bytes, reconsume: int, topic: bytes,
                  batch_props: bytes, first_qoff: int, phy: int, cq_buf, cq_pos: int, index,
                  max_slots: int, max_index: int, host_hex: str) -> tuple | None:
    """Store a SEND_BATCH_MESSAGE body at ``buf[pos:]`` in one call: the records
    (as ``write_batch``), their consume-queue entries at ``cq_buf[cq_pos:]``,
    their index entries in ``index`` (the current index file's buffer, or None
    when indexing is off) and the comma-joined offset message ids.  Returns
    ``(total bytes, count, message ids, last tagsCode)``, or None with nothing written when
    the fast path does not take the batch (see ``_check_wire``), the records
    would not end by ``limit``, or the consume-queue or index file lacks room
    for all of it.  The compiled twin is ``rmq._fast.store_batch``."""
    if len(born_host) != (20 if sys_flag & 0x10 else 8) or \
            len(store_host) != (20 if sys_flag & 0x20 else 8):
        raise ValueError("host field length does not match the sysFlag")
    if not host_hex.isascii():
        raise ValueError("host hex must be ASCII")
    if len(topic) > codec.MAX_TOPIC_LENGTH or not topic.isascii():
        return None
    checked = _check_wire(wire, sys_flag, len(topic), batch_props)
    if checked is None:
        return None
    total, count, keys = checked
    if count == 0 or pos < 0 or pos + total > limit:
        return None
    if pos + total > len(buf):
        raise ValueError("batch does not fit into the buffer")
    if cq_pos < 0 or cq_pos + count * _CQ_UNIT > len(cq_buf):
        return None
    if index is not None:
        if max_slots <= 0 or max_index <= 0 or len(index) < 40 + max_slots * 4 + max_index * 20:
            raise ValueError("index buffer smaller than its layout")
        if keys and max(1, _INT.unpack_from(index, 36)[0]) + keys > max_index:
            return None
    sizes = codec.new_sizes_array(count)
    codec._write_batch(buf, pos, wire, queue_id, sys_flag, born_ts, born_host, store_ts,
                       store_host, reconsume, topic, batch_props, first_qoff, phy, sizes)
    topic_hash = _java_hash_ascii(0, topic)
    props_at = 48 + len(born_host) + 8 + len(store_host) + 12  # BODY LENGTH field
    ids = []
    wpos = pos
    tags_code = 0
    for i, size in enumerate(sizes):
        rec_phy = phy + wpos - pos
        (body_len,) = _INT.unpack_from(buf, wpos + props_at)
        ppos = wpos + props_at + 4 + body_len + 1 + len(topic) + 2
        plen = wpos + size - ppos
        tags, kv, uniq, _delay = codec._find_props(bytes(buf[ppos:ppos + plen]))
        tags_code = _signed(_java_hash_ascii(0, tags)) if tags else 0
        _CQ.pack_into(cq_buf, cq_pos + i * _CQ_UNIT, rec_phy, size, tags_code)
        if index is not None and (kv or uniq) and rec_phy >= _LONG.unpack_from(index, 24)[0]:
            todo = ([uniq] if uniq else []) + ([k for k in kv.split(b" ") if k] if kv else [])
            for k in todo:
                _index_put(index, max_slots, max_index, _key_hash(topic_hash, k), rec_phy, store_ts)
        ids.append(host_hex + (rec_phy & 0xFFFFFFFFFFFFFFFF).to_bytes(8, "big").hex().upper())
        wpos += size
    return total, count, ",".join(ids), tags_code


append_batch = _append_batch
_c = compiled("store_batch")
if _c is not None:
    append_batch = _c.append_batch
