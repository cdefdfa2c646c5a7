# cython: language_level=3
"""Compiled twins of ``_write_now``, ``_written``, ``_add_ck`` and
``_apply_ack`` in rmq/broker/pop_revive.py: each revive record a pop or an
ack writes -- its body, its append through the store's one-record session
and its bookkeeping (the service's maps, its heap, the read offset and the
group's offset) -- step for step, without the interpreter's frames.  The
classes, enum members and names of the layers above are handed over by
``bind``.
"""

from heapq import heappush

from posix.time cimport CLOCK_REALTIME, clock_gettime, timespec

from rmq._fast.offset_table cimport commit_offset, query_offset
from rmq._fast.pop_records import ack_body, ck_body
from rmq._fast.store_put import put_single

cdef object _CK = None
cdef object _PENDING = None
cdef object _GRACE = 0
cdef object _SYNC_FLUSH = None
cdef object _SYNC_MASTER = None
cdef tuple _TAGS = None  # (tag, tagsCode) of a checkpoint, an ack, a batch ack
cdef str _PROPS_HEAD = None  # TIMER_DELIVER_MS's key and separator
cdef str _TAGS_KEY = None  # the separator and TAGS's key
cdef bint _bound = False


def bind(ck_type: type, pending_type: type, grace_ms: int, sync_flush: object,
         sync_master: object, tags: tuple, timer_deliver_key: str, tags_key: str) -> None:
    """PopCheckPoint, Pending, the grace of a checkpoint the timer wrote,
    FlushDiskType.SYNC_FLUSH, BrokerRole.SYNC_MASTER, ((tag, tagsCode) of a
    checkpoint, an ack, a batch ack) and the two property keys of a record."""
    global _CK, _PENDING, _GRACE, _SYNC_FLUSH, _SYNC_MASTER, _TAGS, _PROPS_HEAD, _TAGS_KEY
    global _bound
    _CK = ck_type
    _PENDING = pending_type
    _GRACE = grace_ms
    _SYNC_FLUSH = sync_flush
    _SYNC_MASTER = sync_master
    _TAGS = tuple(tags)
    _PROPS_HEAD = timer_deliver_key + "\x01"
    _TAGS_KEY = "\x02" + tags_key + "\x01"
    _bound = True


cdef inline long long now_ms() noexcept nogil:
    """time.time_ns() // 1_000_000."""
    cdef timespec ts
    clock_gettime(CLOCK_REALTIME, &ts)
    return <long long>ts.tv_sec * 1000 + ts.tv_nsec // 1000000


cpdef write_now(object svc, object qid, object record):
    """``PopReviveService.write_now``: True once stored and applied, None with
    nothing done when the general way must store the record."""
    if not _bound:
        raise RuntimeError("pop_revive.bind was not called")
    store = svc.store
    cfg = store.config
    if cfg.flushDiskType is _SYNC_FLUSH:
        return None
    # record_body
    if isinstance(record, _CK):
        body = ck_body(record.bit_map, record.broker_name, record.cid, record.offset_diffs,
                       record.invisible_time, record.pop_time, record.queue_id,
                       record.revive_offset, record.reput_times, record.start_offset,
                       record.topic)
        tag, code = _TAGS[0]
    else:
        offsets = record.offsets
        body = ack_body(offsets, record.broker_name, record.group, record.pop_time,
                        record.queue_id, record.start_offset, record.topic)
        tag, code = _TAGS[1] if len(offsets) == 1 else _TAGS[2]
    cdef long long now = now_ms()
    # put_at_once
    topic = svc.topic
    if cfg.brokerRole is _SYNC_MASTER or not cfg.timerWheelEnable or \
            not (<str>topic).isascii():
        return None
    r = put_single(store, topic, (<str>topic).encode(), qid, 0, body, None, None,
                   f"{_PROPS_HEAD}{now}{_TAGS_KEY}{tag}", code, 0, now,
                   store.commit_log.store_host_field, 0)
    if r is None:
        return None
    written(svc, qid, record, r[0])
    return True


cdef inline str merge_key(object topic, object group, object queue_id, object start_offset,
                          object pop_time, object broker_name):
    """``pop_records.merge_key``."""
    return f"{topic}{group}{queue_id}{start_offset}{pop_time}{broker_name}"


cpdef written(object svc, object qid, object record, object offset):
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
    if query_offset(com, cid, topic, queue_id) < last:
        commit_offset(com, "PopReviveService", cid, topic, queue_id, last)


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
        settle(svc, key)


cdef settle(object svc, str key):
    """``PopReviveService._settle``."""
    entry = (<dict>svc.pending).pop(key, None)
    if entry is None:
        return
    queue = svc.by_queue.get(entry.revive_qid)
    if queue is not None:
        queue.pop(key, None)
    for cb in svc.on_settled:
        cb(entry.ck)
