"""Bulk dispatch of a run of records of one topic/queue (the hot part of
``ReputMessageService.doReput`` for batches).

``dispatch_run`` writes consume queue entries (and index entries) for
consecutive plain messages of one topic/queue straight into the mapped
files.  It stops at the first record that needs the general per-record path
in ``DefaultMessageStore._dispatch``: another topic/queue, a transaction type
other than NOT/COMMIT, a DELAY property, non-ASCII properties or topic, a
queue offset that is not the next entry of the consume queue file, a record
already dispatched, a full consume queue or index file.  The pure-Python
version below is the twin of ``rmq._fast.store_dispatch``; both write the same
bytes and return the same tuple.  With ``entry_header`` (DLedger's 48
bytes) each record lies in an entry of its own behind that header, whose
size word (at 4) must be the record's size plus the header; a blank entry
(magic -1) ends the run.
"""

from __future__ import annotations

import struct

from rmq._fast import compiled
from rmq.common.java import ascii_hash_update, index_key_hash_ascii, signed32
from rmq.store.index import _index_put
from rmq.store.message_codec import _find_props

MESSAGE_MAGIC_CODE = -626843481
_HEAD = struct.Struct(">iiiiiqqi")  # size, magic, crc, qid, flag, qoff, phy, sysflag
_LONG = struct.Struct(">q")
_INT = struct.Struct(">i")
_SHORT = struct.Struct(">h")
_CQ = struct.Struct(">qiq")


# String.hashCode over ASCII bytes and the index key hash (rmq.common.java),
# under the names the commit log's dispatch imports them by
_java_hash_ascii = ascii_hash_update
_signed = signed32
_key_hash = index_key_hash_ascii


def _dispatch_run(buf, pos: int, limit: int, topic: bytes, queue_id: int, cq, cq_pos: int, cq_base: int,
                  max_physic_offset: int, index, max_slots: int, max_index: int,
                  entry_header: int = 0) -> tuple:
    """Returns ``(pos, cq_pos, count, max_physic_offset, last)``; ``last`` is
    None or ``(queue_offset, tags_code, store_ts)``."""
    if pos < 0 or limit > len(buf) or cq_pos < 0 or cq_pos > len(cq) or cq_pos % 20 or \
            entry_header < 0:
        raise ValueError("bad dispatch range")
    if index is not None and (max_slots <= 0 or max_index <= 0 or len(index) < 40 + max_slots * 4 + max_index * 20):
        raise ValueError("index buffer smaller than its layout")
    if any(c >= 0x80 for c in topic):
        return pos, cq_pos, 0, max_physic_offset, None
    topic_hash = _java_hash_ascii(0, topic)
    count = 0
    last = None
    tlen = len(topic)
    while pos + entry_header + 91 <= limit and cq_pos + 20 <= len(cq):
        r = pos + entry_header  # the record's start
        size, magic, _crc, qid, _flag, qoff, phy, sys_flag = _HEAD.unpack_from(buf, r)
        if magic != MESSAGE_MAGIC_CODE or size < 91 or r + size > limit:
            break
        if entry_header and (_INT.unpack_from(buf, pos)[0] == -1 or
                             _INT.unpack_from(buf, pos + 4)[0] != size + entry_header):
            break
        tx = sys_flag & 0xC
        if qid != queue_id or tx not in (0, 8) or cq_base + cq_pos != qoff * 20:
            break
        if phy + size <= max_physic_offset:
            break
        p = r + 48 + (20 if sys_flag & 0x10 else 8)
        (store_ts,) = _LONG.unpack_from(buf, p)
        p += 8 + (20 if sys_flag & 0x20 else 8)
        (body_len,) = _INT.unpack_from(buf, p + 12)
        p += 16
        if body_len < 0 or body_len > size - 91:
            break
        p += body_len
        if buf[p] != tlen or bytes(buf[p + 1 : p + 1 + tlen]) != topic:
            break
        p += 1 + tlen
        (props_len,) = _SHORT.unpack_from(buf, p)
        ppos = p + 2
        if props_len < 0 or ppos + props_len != r + size:
            break
        raw = bytes(buf[ppos : ppos + props_len])
        tags, keys, uniq, delay = _find_props(raw)
        if delay is not None or any(c >= 0x80 for c in raw):
            break
        if index is not None and (keys or uniq):
            (end_phy,) = _LONG.unpack_from(index, 24)
            if phy >= end_phy:
                todo = ([uniq] if uniq else []) + ([k for k in keys.split(b" ") if k] if keys else [])
                (count_now,) = _INT.unpack_from(index, 36)
                if max(1, count_now) + len(todo) > max_index:
                    break
                for k in todo:
                    _index_put(index, max_slots, max_index, _key_hash(topic_hash, k), phy, store_ts)
        tags_code = _signed(_java_hash_ascii(0, tags)) if tags else 0
        _CQ.pack_into(cq, cq_pos, phy, size, tags_code)
        cq_pos += 20
        max_physic_offset = phy + size
        last = (qoff, tags_code, store_ts)
        pos = r + size
        count += 1
    return pos, cq_pos, count, max_physic_offset, last


dispatch_run = _dispatch_run
_c = compiled("store_dispatch")
if _c is not None:
    dispatch_run = _c.dispatch_run


def _walk_head(buf, pos: int, limit: int, entry_header: int) -> tuple[bytes, int] | None:
    """(topic, queue id) of the plain message at ``pos`` (behind its entry
    header), or None when there is none to dispatch in bulk."""
    r = pos + entry_header
    if r + 91 > limit:
        return None
    size, magic, _crc, qid, _flag, _qoff, _phy, sys_flag = _HEAD.unpack_from(buf, r)
    if magic != MESSAGE_MAGIC_CODE or size < 91 or r + size > limit:
        return None
    if entry_header and (_INT.unpack_from(buf, pos)[0] == -1 or
                         _INT.unpack_from(buf, pos + 4)[0] != size + entry_header):
        return None
    p = r + 48 + (20 if sys_flag & 0x10 else 8) + 8 + (20 if sys_flag & 0x20 else 8)
    (body_len,) = _INT.unpack_from(buf, p + 12)
    if body_len < 0 or body_len > size - 91:
        return None
    p += 16 + body_len
    tlen = buf[p]
    if p + 1 + tlen + 2 > r + size:
        return None
    return bytes(buf[p + 1:p + 1 + tlen]), qid


def _dispatch_walk(buf, pos: int, limit: int, queue_of, index, max_slots: int, max_index: int,
                   entry_header: int = 0) -> tuple[int, list[tuple]]:
    """Dispatch the records from ``pos`` whatever their queue (each a run of
    ``_dispatch_run`` while the queue stays the same), each queue's file
    asked for once: ``queue_of(topic bytes, queue id)`` gives (a token, the
    consume queue file's writable buffer, its write position, its file's
    first offset, the queue's max physical offset), or None for a queue the
    walk stops at.  Returns ``(pos, queues)``: the position reached and, per
    queue written, ``(token, cq_pos, count, max_physic_offset, (queue_offset,
    tags_code, store_ts) of its last record, bytes of its records)``."""
    if pos < 0 or limit > len(buf) or entry_header < 0:
        raise ValueError("bad dispatch range")
    if index is not None and (max_slots <= 0 or max_index <= 0 or
                              len(index) < 40 + max_slots * 4 + max_index * 20):
        raise ValueError("index buffer smaller than its layout")
    queues: dict[tuple[bytes, int], list] = {}
    while (h := _walk_head(buf, pos, limit, entry_header)) is not None:
        q = queues.get(h)
        if q is None:
            if len(queues) == _MAX_WALK_QUEUES or any(c >= 0x80 for c in h[0]):
                break
            found = queue_of(*h)
            if found is None:
                break
            token, cq, cq_pos, cq_base, max_phy = found
            if cq_pos < 0 or cq_pos > len(cq) or cq_pos % 20:
                raise ValueError("bad dispatch range")
            q = queues[h] = [token, cq, cq_pos, cq_base, max_phy, 0, None, 0]
        new_pos, q[2], count, q[4], last = _dispatch_run(
            buf, pos, limit, h[0], h[1], q[1], q[2], q[3], q[4], index, max_slots, max_index,
            entry_header)
        if not count:
            break
        q[5] += count
        q[6] = last
        q[7] += new_pos - pos - count * entry_header
        pos = new_pos
    return pos, [(q[0], q[2], q[5], q[4], q[6], q[7]) for q in queues.values() if q[5]]


_MAX_WALK_QUEUES = 64  # queues of one walk (the compiled walk's table)
dispatch_walk = _dispatch_walk
if _c is not None:
    dispatch_walk = _c.dispatch_walk
