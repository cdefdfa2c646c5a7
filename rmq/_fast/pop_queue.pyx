# cython: language_level=3
"""Compiled twins of ``_pop_queue_now`` and ``_pop_queue_tail`` in
rmq/broker/processor/pop.py: one queue's part of a pop -- the lock, the
start offset, the store read, the checkpoint and its record, the group's
offset, the offsets texts and the records handed out -- step for step in one
call, without the interpreter's frames for the processor's small helpers (the
group's offset read and moved in the offset manager's table when nothing
else applies, the offsets texts written here).  The classes and functions of
the layers above are handed over by ``bind``.
"""

from orjson import dumps

from rmq._fast.offset_table cimport commit_offset, query_offset

cdef object _CK = None
cdef object _FOUND = None
cdef object _filter_result = None
cdef str _RETRY_PREFIX = None
cdef bint _bound = False


def bind(ck_type: type, found: object, filter_result: object, retry_prefix: str) -> None:
    """PopCheckPoint, GetMessageStatus.FOUND, the SQL92 record filter's
    ``filter_result`` and the pop retry topics' prefix."""
    global _CK, _FOUND, _filter_result, _RETRY_PREFIX, _bound
    _CK = ck_type
    _FOUND = found
    _filter_result = filter_result
    _RETRY_PREFIX = retry_prefix
    _bound = True


cdef inline str retry_flag(str topic):
    """``pop_records.retry_flag``."""
    if not topic.startswith(_RETRY_PREFIX):
        return "0"
    return "2" if "+" in topic else "1"


cdef object start_offset(object p, str group, str topic, object qid, object init_mode):
    """``PopMessageProcessor._start_offset``."""
    offset = query_offset(p.c.consumer_offset_manager, group, topic, qid)
    if offset < 0:
        offset = p._init_offset(group, topic, qid, init_mode)
    low = p.store.get_min_offset_in_queue(topic, qid)
    if low > offset:
        offset = low
    return offset if offset > 0 else 0


cdef list queue_offsets(object result):
    """``GetMessageResult.message_queue_offsets``."""
    cdef list out = []
    cdef long long first, n, i
    for f, c in zip(result.run_offsets, result.run_counts, strict=True):
        first = f
        n = c
        for i in range(n):
            out.append(first + i)
    return out


def pop_queue_now(p, out, str group, str topic, str read_topic, qid, nums, pop_time,
                  invisible, revive_qid, init_mode, bint orderly, matches, record_filter):
    """``_pop_queue_now`` of rmq/broker/processor/pop.py, step for step."""
    if not _bound:
        raise RuntimeError("pop_queue.bind was not called")
    ctx = p.ctx
    key = (read_topic, group, qid)
    cdef set locks = ctx.locks
    if key in locks:
        return None
    if orderly and ctx.order.blocked(key, pop_time):
        return None
    locks.add(key)
    cdef bint held = False
    cdef bint found
    try:
        offset = start_offset(p, group, read_topic, qid, init_mode)
        result = p.store.get_message(group, read_topic, qid, offset, nums, None, matches)
        if result is None:
            return None
        if record_filter is not None:
            _filter_result(result, record_filter)
        found = result.status is _FOUND and len(result.sizes) > 0
        offsets = queue_offsets(result) if found else []
        next_offset = result.next_begin_offset
        rest = result.max_offset - next_offset
        if rest > 0:
            out.rest += rest
        if read_topic != topic:
            buffers = [bytes(b) for b in result.message_buffers] if found else []
            result.release()
        elif found:
            buffers = result.body_views
        else:
            buffers = []
            result.release()
        if not offsets:
            if next_offset != offset and next_offset >= 0 and (not orderly or not found):
                commit_offset(p.c.consumer_offset_manager, "pop", group, read_topic, qid,
                              next_offset)
            return None
        if orderly:
            counts = ctx.order.on_pop(key, offsets, pop_time, invisible)
            order_info = out.order_info
            flag = retry_flag(read_topic)
            for o in offsets:
                if counts[o] > 0:
                    order_info.append(f"{flag} qo{qid}%{o} {counts[o]}")
            order_info.append(f"{flag} {qid} {min(counts.values())}")
            stored = True
        else:
            broker_name = p.bc.brokerName
            stored = ctx.revive.write_ck_now(revive_qid, read_topic, group, qid, offset,
                                             pop_time, invisible, offsets, broker_name)
            if stored is None:
                ck = _CK(read_topic, group, qid, offset, pop_time, invisible,
                         [o - offset for o in offsets], broker_name)
                ck.revive_offset = 0
                held = True
                return (key, ck, result, offsets, next_offset, buffers, offset)
        pop_queue_tail(p, out, group, topic, read_topic, qid, offset, offsets, next_offset,
                       buffers, result, stored, not orderly, pop_time, invisible, revive_qid)
        return None
    finally:
        if not held:
            locks.discard(key)


cpdef pop_queue_tail(p, out, str group, str topic, str read_topic, qid, offset, list offsets,
                     next_offset, list buffers, result, stored, bint commit, pop_time,
                     invisible, revive_qid):
    """``_pop_queue_tail`` of rmq/broker/processor/pop.py, step for step."""
    if not stored:
        if read_topic != topic:
            return
        result.release()
        return
    if commit:
        commit_offset(p.c.consumer_offset_manager, "pop", group, read_topic, qid, next_offset)
    flag = retry_flag(read_topic)
    out.start_info.append(f"{flag} {qid} {offset}")
    out.msg_info.append(f"{flag} {qid} {(<bytes>dumps(offsets))[1:-1].decode()}")
    if read_topic != topic:
        buffers = [p._as_original(b, topic, offset, pop_time, invisible, revive_qid,
                                  read_topic) for b in buffers]
    cdef Py_ssize_t size = 0
    for b in buffers:
        size += len(b)
    out.size += size
    out.bodies.extend(buffers)
    out.count += len(offsets)
    if result.max_offset > next_offset:
        p.ctx.polling.notify(read_topic)
