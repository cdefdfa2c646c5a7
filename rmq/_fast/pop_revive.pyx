# cython: language_level=3
"""Compiled twins of ``_written``, ``_add_ck`` and ``_apply_ack`` in
rmq/broker/pop_revive.py: the bookkeeping of each revive record a pop or an
ack writes (the service's maps, its heap, the read offset and the group's
offset), step for step, without the interpreter's frames.  The record and
pending-entry classes are handed over by ``bind`` (rmq.broker is a layer
above this package).
"""

from heapq import heappush

cdef object _CK = None
cdef object _PENDING = None
cdef object _GRACE = 0
cdef bint _bound = False


def bind(ck_type: type, pending_type: type, grace_ms: int) -> None:
    """PopCheckPoint, Pending and the grace of a checkpoint the timer wrote."""
    global _CK, _PENDING, _GRACE, _bound
    _CK = ck_type
    _PENDING = pending_type
    _GRACE = grace_ms
    _bound = True


cdef inline str merge_key(object topic, object group, object queue_id, object start_offset,
                          object pop_time, object broker_name):
    """``pop_records.merge_key``."""
    return f"{topic}{group}{queue_id}{start_offset}{pop_time}{broker_name}"


def written(object svc, object qid, object record, object offset) -> None:
    """Apply a record this broker stored at ``offset`` of revive queue ``qid``."""
    if not _bound:
        raise RuntimeError("pop_revive.bind was not called")
    read_offsets = svc.read_offsets
    read = read_offsets.get(qid, 0)
    if offset < read:
        return
    if offset == read and svc.loaded:
        read_offsets[qid] = offset + 1
    else:
        svc.applied.setdefault(qid, set()).add(offset)
    if isinstance(record, _CK):
        add_ck(svc, record, qid, offset)
        if record.pop_time + record.invisible_time < svc._next_wake_ms:
            svc._wake.set()
    else:
        apply_ack(svc, record)


cpdef add_ck(object svc, object ck, object qid, object record_offset, bint via_timer=False):
    """A checkpoint pending, and the group's offset past its messages."""
    topic = ck.topic
    cid = ck.cid
    queue_id = ck.queue_id
    so = ck.start_offset
    pop_time = ck.pop_time
    key = merge_key(topic, cid, queue_id, so, pop_time, ck.broker_name)
    pending = svc.pending
    if key in pending:
        return
    diffs = ck.offset_diffs
    entry = _PENDING(ck, qid, record_offset, {so + d for d in diffs}, via_timer)
    pending[key] = entry
    svc.by_queue.setdefault(qid, {})[key] = entry
    seq = svc._seq + 1
    svc._seq = seq
    due = pop_time + ck.invisible_time
    if via_timer:
        due = due + _GRACE
    heappush(svc.heap, (due, seq, key))
    if not diffs:
        return
    com = svc.c.consumer_offset_manager
    last = so + max(diffs) + 1
    if com.query_offset(cid, topic, queue_id) < last:
        com.commit_offset("PopReviveService", cid, topic, queue_id, last)


cpdef apply_ack(object svc, object ack):
    """The ack's offsets off its pending checkpoint, settled once none is left."""
    key = merge_key(ack.topic, ack.group, ack.queue_id, ack.start_offset, ack.pop_time,
                    ack.broker_name)
    entry = svc.pending.get(key)
    if entry is None:
        return
    left = entry.left
    left.difference_update(ack.offsets)
    if not left:
        svc._settle(key)
