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

import random as _random

from cpython.list cimport PyList_GET_ITEM, PyList_New, PyList_SET_ITEM
from cpython.long cimport PyLong_AsLongLongAndOverflow
from cpython.ref cimport PyObject, PyTypeObject, Py_INCREF
from orjson import dumps
from libc.stdint cimport int64_t, uint8_t
from libc.string cimport memcpy
from posix.time cimport CLOCK_MONOTONIC, CLOCK_REALTIME, clock_gettime, timespec
from types import MemberDescriptorType

from rmq._fast.json_text cimport json_load8, json_store8, json_write_int

from rmq._fast.offset_table cimport commit_in, offset_in, offsets_of
from rmq._fast.pop_revive cimport direct, write_ck_arr
from rmq._fast.slots cimport set_slot_or_attr, slot_offset, slot_offsets, slot_or_attr
from rmq._fast.topic_table cimport table_config

cdef extern from "Python.h":
    object PyUnicode_New(Py_ssize_t size, Py_UCS4 maxchar)
    void *PyUnicode_DATA(object o)
    int PyUnicode_IS_ASCII(object o)
    Py_ssize_t PyUnicode_GET_LENGTH(object o)

cdef object _CK = None
cdef object _FOUND = None
cdef object _filter_result = None
cdef str _RETRY_PREFIX = None
cdef bint _bound = False
cdef object _lane_pop_twin = None
cdef object _PopResult = None
cdef object _PopRequest = None
cdef object _pop_header = None
cdef object _SUCCESS = None
cdef object _POLLING_TIMEOUT = None
# classes whose small methods a pop calls are done here for these exact
# types (``bind_types``; None: always called)
cdef object _STORE_TYPE = None  # DefaultMessageStore: get_min_offset_in_queue
cdef object _CQ_TYPE = None  # ConsumeQueue: get_min_offset_in_queue
cdef object _POLLING_TYPE = None  # PopPolling: notify
cdef object _STATS_TYPE = None  # BrokerStats: inc_get
cdef object _CQ_UNIT = 20
cdef Py_ssize_t _CQ_MIN_AT = 0  # where a ConsumeQueue's min_logic_offset lies (0: unknown)
cdef Py_ssize_t _CQT_AT = 0  # where the store's consume_queue_table lies (0: unknown)
# where BrokerStats keeps _get_pending and get_total (0: unknown, the attribute)
cdef Py_ssize_t _STATS_AT[2]
_STATS_FIELDS = ("_get_pending", "get_total")

cdef enum:
    MAX_POP_NUMS = 32
    BORN_TIME_SLACK_MS = 500
    PERM_READ = 4


def bind(ck_type: type, found: object, filter_result: object, retry_prefix: str) -> None:
    """PopCheckPoint, GetMessageStatus.FOUND, the SQL92 record filter's
    ``filter_result`` and the pop retry topics' prefix."""
    global _CK, _FOUND, _filter_result, _RETRY_PREFIX, _bound
    _CK = ck_type
    _FOUND = found
    _filter_result = filter_result
    _RETRY_PREFIX = retry_prefix
    _bound = True


# PopResult's fields, all of which ``new_pop_result`` sets (to the class's
# defaults, checked at bind), and where each lies in an instance (``_at``, by
# these indexes): a PopResult made here is written and read at those offsets,
# without the attribute protocol (~140 instructions a field)
cdef tuple _POP_RESULT_SLOTS = ("bodies", "count", "start_info", "msg_info", "order_info", "rest",
                                "size", "pop_time", "invisible", "revive_qid", "orderly")
cdef enum:
    R_BODIES, R_COUNT, R_START_INFO, R_MSG_INFO, R_ORDER_INFO, R_REST, R_SIZE, R_POP_TIME, \
        R_INVISIBLE, R_REVIVE_QID, R_ORDERLY, R_FIELDS
cdef Py_ssize_t _at[R_FIELDS]
cdef tuple _NO_ARGS = ()


def bind_lane(lane_pop_twin: object, pop_result: type, pop_request: type, pop_header: object,
              success: object, polling_timeout: object) -> None:
    """For ``lane_pop``: its twin (what it hands anything unusual),
    PopResult (a plain slots class of exactly these fields), PopRequest,
    the header reader and the SUCCESS and POLLING_TIMEOUT codes."""
    global _lane_pop_twin, _PopResult, _PopRequest, _pop_header, _SUCCESS, _POLLING_TIMEOUT
    cdef Py_ssize_t at[R_FIELDS]
    cdef int i
    if getattr(pop_result, "__slots__", None) != _POP_RESULT_SLOTS:
        raise TypeError(f"new_pop_result sets the fields {_POP_RESULT_SLOTS}, "
                        f"not those of {pop_result!r}")
    slot_offsets(pop_result, _POP_RESULT_SLOTS, at, MemberDescriptorType, False, True)
    _lane_pop_twin = lane_pop_twin
    _PopResult = pop_result
    for i in range(R_FIELDS):
        _at[i] = at[i]
    made, made_here = pop_result(), new_pop_result()  # (the defaults, restated in C)
    if any(getattr(made, f) != getattr(made_here, f) for f in _POP_RESULT_SLOTS):
        raise TypeError(f"new_pop_result's defaults are not those of {pop_result!r}")
    _PopRequest = pop_request
    _pop_header = pop_header
    _SUCCESS = success
    _POLLING_TIMEOUT = polling_timeout


# The fields of the pop processor and of its pop context (plain slots
# classes, ``bind_holders``) a pop reads, and where each lies in an instance:
# read at that offset for an instance of exactly that class, through the
# attribute for any other (a test's stand-in)
cdef tuple _PROC_SLOTS = ("bc", "store", "com", "tcm", "sgm", "stats", "ctx", "_filter_cache",
                          "_retry_names")
cdef enum:
    P_BC, P_STORE, P_COM, P_TCM, P_SGM, P_STATS, P_CTX, P_FILTER_CACHE, P_RETRY_NAMES, P_FIELDS
cdef tuple _CTX_SLOTS = ("revive", "locks", "polling", "_ck_counter")
cdef enum:
    X_REVIVE, X_LOCKS, X_POLLING, X_CK_COUNTER, X_FIELDS
# and of the configs a pop checks: the broker's, the topic's, the group's
cdef tuple _CONF_SLOTS = ("brokerPermission", "popFromRetryProbability", "brokerName", "perm",
                          "readQueueNums", "consumeEnable", "consumeMessageOrderly")
cdef enum:
    B_PERMISSION, B_RETRY_PROBABILITY, B_NAME, T_PERM, T_READ_QUEUES, G_ENABLE, G_ORDERLY, \
        C_FIELDS
# and of the store's read (GetMessageResult)
cdef tuple _READ_SLOTS = ("status", "sizes", "run_offsets", "run_counts", "next_begin_offset",
                          "max_offset", "body_views")
cdef enum:
    G_STATUS, G_SIZES, G_RUN_OFFSETS, G_RUN_COUNTS, G_NEXT, G_MAX, G_VIEWS, G_FIELDS
cdef object _READ_TYPE = None
cdef Py_ssize_t _g_at[G_FIELDS]
cdef object _PROC_TYPE = None
cdef object _CTX_TYPE = None
cdef object _BC_TYPE = None
cdef object _TC_TYPE = None
cdef object _GC_TYPE = None
cdef Py_ssize_t _p_at[P_FIELDS]
cdef Py_ssize_t _x_at[X_FIELDS]
cdef Py_ssize_t _c_at[C_FIELDS]


def bind_holders(processor_type: type, context_type: type, broker_config_type: type,
                 topic_config_type: type, group_config_type: type, read_type: type) -> None:
    """PopMessageProcessor and PopContext, whose fields a pop reads (their
    fixed objects: the broker's config, the store, the controller's
    managers, the context, the caches, the revive service, the locks, the
    polling, the counter) at their slots; BrokerConfig, TopicConfig and
    SubscriptionGroupConfig, whose fields a pop checks likewise; and
    GetMessageResult, the store's read."""
    global _PROC_TYPE, _CTX_TYPE, _BC_TYPE, _TC_TYPE, _GC_TYPE, _READ_TYPE
    cdef Py_ssize_t p_at[P_FIELDS]
    cdef Py_ssize_t x_at[X_FIELDS]
    cdef Py_ssize_t c_at[C_FIELDS]
    cdef Py_ssize_t g_at[G_FIELDS]
    cdef int i
    slot_offsets(processor_type, _PROC_SLOTS, p_at, MemberDescriptorType, False, True)
    slot_offsets(context_type, _CTX_SLOTS, x_at, MemberDescriptorType, False, True)
    slot_offsets(broker_config_type, _CONF_SLOTS[:T_PERM], c_at, MemberDescriptorType, False,
                 True)
    slot_offsets(topic_config_type, _CONF_SLOTS[T_PERM:G_ENABLE], c_at + T_PERM,
                 MemberDescriptorType, False, True)
    slot_offsets(group_config_type, _CONF_SLOTS[G_ENABLE:], c_at + G_ENABLE,
                 MemberDescriptorType, False, True)
    slot_offsets(read_type, _READ_SLOTS, g_at, MemberDescriptorType, False, True)
    for i in range(P_FIELDS):
        _p_at[i] = p_at[i]
    for i in range(X_FIELDS):
        _x_at[i] = x_at[i]
    for i in range(C_FIELDS):
        _c_at[i] = c_at[i]
    for i in range(G_FIELDS):
        _g_at[i] = g_at[i]
    _PROC_TYPE = processor_type
    _CTX_TYPE = context_type
    _BC_TYPE = broker_config_type
    _TC_TYPE = topic_config_type
    _GC_TYPE = group_config_type
    _READ_TYPE = read_type


cdef inline object pfield(object p, int f):
    """Field ``f`` of the pop processor ``p``."""
    return slot_or_attr(p, _p_at[f] if type(p) is _PROC_TYPE else 0, <str>_PROC_SLOTS[f])


cdef inline object xfield(object ctx, int f):
    """Field ``f`` of the pop context ``ctx``."""
    return slot_or_attr(ctx, _x_at[f] if type(ctx) is _CTX_TYPE else 0, <str>_CTX_SLOTS[f])


cdef inline object gfield(object result, int f):
    """Field ``f`` of the store's read ``result``."""
    return slot_or_attr(result, _g_at[f] if type(result) is _READ_TYPE else 0,
                        <str>_READ_SLOTS[f])


cdef inline object cfield(object conf, int f):
    """Field ``f`` of a config: the broker's (``B_*``), a topic's (``T_*``)
    or a group's (``G_*``)."""
    cdef object cls = _BC_TYPE if f < T_PERM else _TC_TYPE if f < G_ENABLE else _GC_TYPE
    return slot_or_attr(conf, _c_at[f] if type(conf) is cls else 0, <str>_CONF_SLOTS[f])


def bind_types(store_type: type, cq_type: type, polling_type: type, stats_type: type,
               cq_unit: int) -> None:
    """DefaultMessageStore, ConsumeQueue, PopPolling and BrokerStats and the
    consume queue's entry size: a pop reads the queue's low offset, tells
    the long polling and counts the get of these here, as their methods
    (``get_min_offset_in_queue``, ``notify``, ``inc_get``) do, without their
    frames; anything of another type is asked through the method."""
    global _STORE_TYPE, _CQ_TYPE, _POLLING_TYPE, _STATS_TYPE, _CQ_UNIT, _CQ_MIN_AT, _CQT_AT
    _CQ_MIN_AT = max(0, slot_offset(cq_type, "min_logic_offset", MemberDescriptorType))
    _CQT_AT = max(0, slot_offset(store_type, "consume_queue_table", MemberDescriptorType, True))
    _STORE_TYPE = store_type
    _CQ_TYPE = cq_type
    _POLLING_TYPE = polling_type
    _STATS_TYPE = stats_type
    slot_offsets(stats_type, _STATS_FIELDS, _STATS_AT, MemberDescriptorType, True)
    _STATS_AT[0] = max(0, _STATS_AT[0])
    _STATS_AT[1] = max(0, _STATS_AT[1])
    _CQ_UNIT = cq_unit


cpdef object min_offset_in_queue(object store, str topic, object qid):
    """``store.get_min_offset_in_queue(topic, qid)``."""
    if _STORE_TYPE is None or type(store) is not _STORE_TYPE:
        return store.get_min_offset_in_queue(topic, qid)
    qs = (<dict>slot_or_attr(store, _CQT_AT, "consume_queue_table")).get(topic)
    if qs is None:
        return -1
    cq = (<dict>qs).get(qid) if type(qs) is dict else qs.get(qid)
    if cq is None:
        return -1
    if type(cq) is not _CQ_TYPE:
        return cq.get_min_offset_in_queue()
    return slot_or_attr(cq, _CQ_MIN_AT, "min_logic_offset") // _CQ_UNIT


cpdef notify_polling(object polling, str topic):
    """``polling.notify(topic)``: not called when nobody waits for ``topic``."""
    if _POLLING_TYPE is not None and type(polling) is _POLLING_TYPE and \
            not (<dict>polling.waiters).get(topic):
        return
    polling.notify(topic)


cpdef count_get(object stats, str group, str topic, object queue_id, object nums, object size):
    """``stats.inc_get(group, topic, queue_id, nums, size, 0, False)``:
    added here to a queue's counts already pending."""
    cdef list pending
    if _STATS_TYPE is None or type(stats) is not _STATS_TYPE:
        stats.inc_get(group, topic, queue_id, nums, size, 0, False)
        return
    # (the offset in a local: an attribute read may run code that walks other classes)
    cdef Py_ssize_t at_total = _STATS_AT[1]
    found = (<dict?>slot_or_attr(stats, _STATS_AT[0], "_get_pending")).get(
        (topic, group, queue_id))
    if type(found) is not list or len(<list>found) != 6:
        stats.inc_get(group, topic, queue_id, nums, size, 0, False)
        return
    pending = <list>found
    set_slot_or_attr(stats, at_total, "get_total",
                     slot_or_attr(stats, at_total, "get_total") + nums)
    pending[0] += nums
    pending[1] += size
    pending[2] += 1


cdef inline str retry_flag(str topic):
    """``pop_records.retry_flag``."""
    if not topic.startswith(_RETRY_PREFIX):
        return "0"
    return "2" if "+" in topic else "1"


cdef inline bint exact_int(object v, long long *out):
    """An exact int of 64 bits into ``out``: True; else False."""
    cdef int ovf = 0
    if type(v) is not int:
        return False
    out[0] = PyLong_AsLongLongAndOverflow(v, &ovf)
    return not ovf


cdef str info_text(str flag, object qid, object offset, list offsets):
    """``f"{flag} {qid} {offset}"`` (a start offset's info) or, with
    ``offsets``, ``f"{flag} {qid} {a,b,...}"`` (the offsets as orjson writes
    a list of ints, its brackets cut off: a message offset's info), written
    in one buffer; None when a value is not an exact int of 64 bits or there
    are more than ``MAX_POP_NUMS`` offsets (the caller's f-strings then)."""
    cdef int64_t values[MAX_POP_NUMS]
    cdef long long v = 0
    cdef Py_ssize_t i, n = 0 if offsets is None else len(offsets)
    if n > MAX_POP_NUMS:
        return None
    if offsets is None:
        if not exact_int(offset, &v):
            return None
        values[0] = v
        n = 1
    else:
        for i in range(n):
            if not exact_int(<object>PyList_GET_ITEM(offsets, i), &v):
                return None
            values[i] = v
    return info_text_of(flag, qid, values, n)


cdef uint8_t *write_offsets(uint8_t *o, const int64_t *values, Py_ssize_t n) noexcept nogil:
    """``json_write_ints(o, values, n, 0)`` (1 to ``MAX_POP_NUMS`` values,
    room for 21 bytes each and 24 after the last): a value one more than the
    one before -- the offsets of a read, one by one -- written as that one's
    digits copied and counted up in place, not divided out again."""
    cdef uint8_t *prev = o
    cdef uint8_t *d
    cdef Py_ssize_t i, k
    o = json_write_int(o, values[0])
    for i in range(1, n):
        o[0] = 44
        o += 1
        if not (0 <= values[i - 1] < values[i] and values[i] - values[i - 1] == 1):
            prev = o
            o = json_write_int(o, values[i])
            continue
        k = o - 1 - prev  # the digits before (1 to 19 of them) copied whole words at a time
        json_store8(o, json_load8(prev))
        if k > 8:
            json_store8(o + 8, json_load8(prev + 8))
            json_store8(o + 16, json_load8(prev + 16))
        prev = o
        d = o + k - 1
        while d[0] == 57 and d > o:  # the nines carried
            d[0] = 48
            d -= 1
        if d[0] == 57:  # all nines: one digit more
            o = json_write_int(o, values[i])
        else:
            d[0] += 1
            o += k
    return o


cdef str info_text_of(str flag, object qid, const int64_t *values, Py_ssize_t n):
    """``info_text``'s text of the numbers ``values[:n]`` (1 to
    ``MAX_POP_NUMS`` of them): ``f"{flag} {qid} {a,b,...}"``; None when
    ``qid`` is not an exact int of 64 bits or ``flag`` is not a short ASCII
    text."""
    cdef char buf[(MAX_POP_NUMS + 2) * 21 + 8]
    cdef uint8_t *o
    cdef long long v = 0
    cdef Py_ssize_t fl = PyUnicode_GET_LENGTH(flag)
    if n > MAX_POP_NUMS or fl > 4 or not PyUnicode_IS_ASCII(flag) or not exact_int(qid, &v):
        return None
    memcpy(buf, PyUnicode_DATA(flag), fl)
    o = <uint8_t *>buf + fl
    o[0] = 32
    o = json_write_int(o + 1, v)
    o[0] = 32
    o = write_offsets(o + 1, values, n)
    n = <char *>o - buf
    text = PyUnicode_New(n, 127)
    memcpy(PyUnicode_DATA(text), buf, n)
    return text


cdef object start_offset(object p, object com, object queues, str group, str topic, object qid,
                         object init_mode):
    """``PopMessageProcessor._start_offset``, of the group's offsets
    ``queues`` (``offsets_of`` in ``com``, the offset manager)."""
    offset = offset_in(com, queues, group, topic, qid)
    if offset < 0:
        offset = p._init_offset(group, topic, qid, init_mode)
    low = min_offset_in_queue(pfield(p, P_STORE), topic, qid)
    if low > offset:
        offset = low
    return offset if offset > 0 else 0


cdef list queue_offsets(object result):
    """``GetMessageResult.message_queue_offsets``: the runs' offsets one by
    one (the list made at its size, no iterator over the runs)."""
    cdef list firsts = gfield(result, G_RUN_OFFSETS)
    cdef list counts = gfield(result, G_RUN_COUNTS)
    cdef Py_ssize_t r, runs = len(firsts), total = 0, at = 0
    cdef long long first, n, i
    cdef object item
    if len(counts) != runs:
        raise ValueError("run_offsets and run_counts differ in length")
    for r in range(runs):
        n = counts[r]
        if n > 0:
            total += n
    cdef list out = PyList_New(total)
    for r in range(runs):
        first = firsts[r]
        n = counts[r]
        for i in range(n):
            item = first + i
            Py_INCREF(item)
            PyList_SET_ITEM(out, at, item)
            at += 1
    return out


cdef Py_ssize_t fill_offsets(object result, int64_t *out, long long low) except -2:
    """``queue_offsets`` into ``out`` (room for ``MAX_POP_NUMS``): their
    number, or -1 (nothing to rely on in ``out``) when there are more, a
    run's first offset or count is not an exact int of 64 bits, or an offset
    is below ``low`` (the read's start: a checkpoint's diffs stay small)."""
    firsts = gfield(result, G_RUN_OFFSETS)
    counts = gfield(result, G_RUN_COUNTS)
    cdef Py_ssize_t r, runs, at = 0
    cdef long long first = 0, n = 0, i
    if type(firsts) is not list or type(counts) is not list:
        return -1
    runs = len(<list>firsts)
    if len(<list>counts) != runs:
        return -1
    for r in range(runs):
        if not exact_int(<object>PyList_GET_ITEM(firsts, r), &first) or \
                not exact_int(<object>PyList_GET_ITEM(counts, r), &n):
            return -1
        if n <= 0:
            continue
        if n > MAX_POP_NUMS - at or first < low or first > 0x7FFFFFFFFFFFFFFF - n:
            return -1
        for i in range(n):
            out[at] = first + i
            at += 1
    return at


cdef list offsets_list(const int64_t *offs, Py_ssize_t n):
    """The offsets ``offs[:n]`` as a list of ints."""
    cdef Py_ssize_t i
    return [offs[i] for i in range(n)]


def pop_queue_now(p, out, str group, str topic, str read_topic, qid, nums, pop_time,
                  invisible, revive_qid, init_mode, bint orderly, matches, record_filter):
    """``_pop_queue_now`` of rmq/broker/processor/pop.py, step for step."""
    if not _bound:
        raise RuntimeError("pop_queue.bind was not called")
    return queue_now(p, out, group, topic, read_topic, qid, nums, pop_time, invisible,
                     revive_qid, init_mode, orderly, matches, record_filter)


cdef object queue_now(p, out, str group, str topic, str read_topic, qid, nums, pop_time,
                      invisible, revive_qid, init_mode, bint orderly, matches, record_filter):
    ctx = pfield(p, P_CTX)
    key = (read_topic, group, qid)
    cdef set locks = xfield(ctx, X_LOCKS)
    if key in locks:
        return None
    if orderly and ctx.order.blocked(key, pop_time):
        return None
    locks.add(key)
    cdef bint held = False
    cdef bint found
    cdef int64_t offs[MAX_POP_NUMS]
    cdef Py_ssize_t n
    cdef long long so = 0
    try:
        # the group's offsets of the topic, read once for the query here and
        # the commit in ``tail``
        com = pfield(p, P_COM)
        queues = offsets_of(com, group, read_topic)
        offset = start_offset(p, com, queues, group, read_topic, qid, init_mode)
        result = pfield(p, P_STORE).get_message(group, read_topic, qid, offset, nums, None,
                                                matches)
        if result is None:
            return None
        if record_filter is not None:
            _filter_result(result, record_filter)
        found = gfield(result, G_STATUS) is _FOUND and len(gfield(result, G_SIZES)) > 0
        # the offsets in ``offs`` (``n`` of them) or, when they do not fit
        # there, in the list ``offsets`` (made from ``offs`` where a list is
        # needed)
        offsets = None
        n = 0
        if found:
            n = fill_offsets(result, offs, so) if exact_int(offset, &so) else -1
            if n < 0:
                offsets = queue_offsets(result)
                n = len(offsets)
        next_offset = gfield(result, G_NEXT)
        rest = gfield(result, G_MAX) - next_offset
        if rest > 0:
            set_field(out, R_REST, field(out, R_REST) + rest)
        if read_topic != topic:
            buffers = [bytes(b) for b in result.message_buffers] if found else []
            result.release()
        elif found:
            buffers = gfield(result, G_VIEWS)
        else:
            buffers = []
            result.release()
        if not n:
            if next_offset != offset and next_offset >= 0 and (not orderly or not found):
                commit_in(com, queues, "pop", group, read_topic, qid, next_offset)
            return None
        if orderly:
            if offsets is None:
                offsets = offsets_list(offs, n)
            counts = ctx.order.on_pop(key, offsets, pop_time, invisible)
            order_info = field(out, R_ORDER_INFO)
            flag = retry_flag(read_topic)
            for o in offsets:
                if counts[o] > 0:
                    order_info.append(f"{flag} qo{qid}%{o} {counts[o]}")
            order_info.append(f"{flag} {qid} {min(counts.values())}")
            stored = True
        else:
            broker_name = cfield(pfield(p, P_BC), B_NAME)
            revive = xfield(ctx, X_REVIVE)
            if offsets is None and direct(revive, "write_ck_now"):
                # (``tail`` commits the group's offset past them: the filing does not)
                stored = write_ck_arr(revive, revive_qid, read_topic, group, qid, offset,
                                      pop_time, invisible, offs, n, broker_name, True)
            else:
                if offsets is None:
                    offsets = offsets_list(offs, n)
                stored = revive.write_ck_now(revive_qid, read_topic, group, qid, offset,
                                             pop_time, invisible, offsets, broker_name)
            if stored is None:
                if offsets is None:
                    offsets = offsets_list(offs, n)
                ck = _CK(read_topic, group, qid, offset, pop_time, invisible,
                         [o - offset for o in offsets], broker_name)
                ck.revive_offset = 0
                held = True
                return (key, ck, result, offsets, next_offset, buffers, offset)
        tail(p, out, group, topic, read_topic, qid, offset, offsets, offs, n, next_offset,
             buffers, result, stored, not orderly, queues, pop_time, invisible, revive_qid)
        return None
    finally:
        if not held:
            locks.discard(key)


cpdef pop_queue_tail(p, out, str group, str topic, str read_topic, qid, offset, list offsets,
                     next_offset, list buffers, result, stored, bint commit, pop_time,
                     invisible, revive_qid):
    """``_pop_queue_tail`` of rmq/broker/processor/pop.py, step for step."""
    tail(p, out, group, topic, read_topic, qid, offset, offsets, NULL, len(offsets),
         next_offset, buffers, result, stored, commit,
         offsets_of(pfield(p, P_COM), group, read_topic) if commit else None, pop_time,
         invisible, revive_qid)


cdef tail(p, out, str group, str topic, str read_topic, qid, offset, list offsets,
          const int64_t *offs, Py_ssize_t n, next_offset, list buffers, result, stored,
          bint commit, queues, pop_time, invisible, revive_qid):
    """``pop_queue_tail`` of ``offsets``, or when it is None of the ``n``
    offsets ``offs[:n]`` (1 to ``MAX_POP_NUMS``); the group's offset
    committed in ``queues`` (``offsets_of``)."""
    if not stored:
        if read_topic != topic:
            return
        result.release()
        return
    if commit:
        commit_in(pfield(p, P_COM), queues, "pop", group, read_topic, qid, next_offset)
    flag = retry_flag(read_topic)
    text = info_text(flag, qid, offset, None)
    field(out, R_START_INFO).append(text if text is not None else f"{flag} {qid} {offset}")
    text = info_text(flag, qid, None, offsets) if offsets is not None else \
        info_text_of(flag, qid, offs, n)
    if text is None:
        if offsets is None:
            offsets = offsets_list(offs, n)
        text = f"{flag} {qid} {(<bytes>dumps(offsets))[1:-1].decode()}"
    field(out, R_MSG_INFO).append(text)
    if read_topic != topic:
        buffers = [p._as_original(b, topic, offset, pop_time, invisible, revive_qid,
                                  read_topic) for b in buffers]
    cdef Py_ssize_t size = 0
    for b in buffers:
        size += len(b)
    set_field(out, R_SIZE, field(out, R_SIZE) + size)
    bodies = field(out, R_BODIES)
    if type(bodies) is list:
        (<list>bodies).extend(buffers)
    else:
        bodies.extend(buffers)
    set_field(out, R_COUNT, field(out, R_COUNT) + n)
    if gfield(result, G_MAX) > next_offset:
        notify_polling(xfield(pfield(p, P_CTX), X_POLLING), read_topic)


cdef inline long long clock_ms(int clock):
    """``time.time_ns() // 1_000_000`` (CLOCK_REALTIME) or the monotonic
    clock in milliseconds, as ``time`` reads them."""
    cdef timespec ts
    clock_gettime(clock, &ts)
    return <long long>ts.tv_sec * 1000 + ts.tv_nsec // 1000000


cdef inline object field(object out, int f):
    """Field ``f`` of ``out``, a PopResult: at its slot for one of
    ``_PopResult``, else through the attribute (a test's stand-in)."""
    return slot_or_attr(out, _at[f] if type(out) is _PopResult else 0,
                        <str>_POP_RESULT_SLOTS[f])


cdef inline int set_field(object out, int f, object value) except -1:
    """Field ``f`` of ``out``, a PopResult, set to ``value`` (as ``field``
    reads it)."""
    return set_slot_or_attr(out, _at[f] if type(out) is _PopResult else 0,
                            <str>_POP_RESULT_SLOTS[f], value)


cdef object new_pop_result():
    """``PopResult()`` without the dataclass's ``__init__`` (a Python call
    and its default factories): the instance made by the class's ``tp_new``
    and each field set to its default in its slot."""
    out = (<PyTypeObject *>_PopResult).tp_new(<type>_PopResult, <PyObject *>_NO_ARGS, NULL)
    set_field(out, R_BODIES, [])
    set_field(out, R_COUNT, 0)
    set_field(out, R_START_INFO, [])
    set_field(out, R_MSG_INFO, [])
    set_field(out, R_ORDER_INFO, [])
    set_field(out, R_REST, 0)
    set_field(out, R_SIZE, 0)
    set_field(out, R_POP_TIME, 0)
    set_field(out, R_INVISIBLE, 0)
    set_field(out, R_REVIVE_QID, 0)
    set_field(out, R_ORDERLY, False)
    return out


def lane_pop(p, channel, dict ext):
    """``_lane_pop`` of rmq/broker/processor/pop.py (the twin): the usual pop
    -- checks passed, not orderly, a TAG filter already made, no pollTime,
    its queues read without waiting for the store -- served here in one call:
    ``read_pop``'s checks read from the configs' tables, then
    ``pop_answer_now``'s queues and answer.  Anything else goes to the twin
    before anything is changed; a queue whose checkpoint record must wait
    goes on in the processor's coroutine as there."""
    cdef Py_ssize_t ti, qi, n, start
    cdef bint one
    if not _bound or _lane_pop_twin is None:
        raise RuntimeError("pop_queue.bind was not called")
    got = _pop_header(ext)
    if type(got) is not tuple:
        return _lane_pop_twin(p, channel, ext)
    (group, topic, queue_id, max_nums, invisible, poll_time, born_time, init_mode, order,
     exp_type, exp) = <tuple>got
    bc = pfield(p, P_BC)
    if order or poll_time > 0 or not (cfield(bc, B_PERMISSION) & PERM_READ) \
            or not 0 < max_nums <= MAX_POP_NUMS or invisible <= 0:
        return _lane_pop_twin(p, channel, ext)
    tcm = pfield(p, P_TCM)
    cdef dict table = tcm.table
    tc = table_config(table, tcm, topic)
    if tc is None or not (cfield(tc, T_PERM) & PERM_READ) or queue_id < -1 \
            or queue_id >= cfield(tc, T_READ_QUEUES):
        return _lane_pop_twin(p, channel, ext)
    cfg = (<dict>pfield(p, P_SGM).table).get(group)
    if cfg is None or not cfield(cfg, G_ENABLE) or cfield(cfg, G_ORDERLY):
        return _lane_pop_twin(p, channel, ext)
    if born_time > 0 and clock_ms(CLOCK_REALTIME) - born_time - poll_time > BORN_TIME_SLACK_MS:
        return _lane_pop_twin(p, channel, ext)
    filters = (<dict>pfield(p, P_FILTER_CACHE)).get((group, topic, exp_type, exp))
    if filters is None or (<tuple>filters)[1] is not None:
        return _lane_pop_twin(p, channel, ext)
    matches = (<tuple>filters)[0]
    # pop_answer_now, _pop_once_now and _pop_queues
    deadline = clock_ms(CLOCK_MONOTONIC)  # (the pollTime is 0: the deadline is now)
    out = new_pop_result()
    pop_time = clock_ms(CLOCK_REALTIME)
    ctx = pfield(p, P_CTX)
    revive_qid = next(xfield(ctx, X_CK_COUNTER)) % xfield(ctx, X_REVIVE).queue_num
    names = (<dict>pfield(p, P_RETRY_NAMES)).get((group, topic))
    if names is None:
        retry = p.retry_topics(group, topic)
    else:
        retry = []
        for name in <tuple>names:
            if table_config(table, tcm, name) is not None:
                retry.append(name)
    if retry and _random.randrange(100) < cfield(bc, B_RETRY_PROBABILITY):
        order_topics = [*retry, topic]
    else:
        order_topics = [topic, *retry]
    ti = 0
    while ti < len(order_topics):
        t = order_topics[ti]
        # the queues in turn, from ``start`` round to it (the list of them
        # made only when a queue's read goes on in the coroutine)
        one = t == topic and queue_id >= 0
        if one:
            n = 1
            start = 0
        else:  # (the topic's config read above: nothing changed it since)
            qtc = tc if t is topic else table_config(table, tcm, t)
            n = cfield(qtc, T_READ_QUEUES) if qtc is not None else 0
            start = <Py_ssize_t>(<double>_random.random() * n)  # (int(random() * n), in C)
        qi = 0
        while qi < n and field(out, R_COUNT) < max_nums:
            qid = queue_id if one else start + qi - (n if start + qi >= n else 0)
            qi += 1
            staged = queue_now(p, out, group, topic, t, qid, max_nums - field(out, R_COUNT),
                               pop_time, invisible, revive_qid, init_mode, False, matches,
                               None)
            if staged is not None:
                qids = [queue_id] if one else [*range(start, n), *range(start)]
                req = _PopRequest(group, topic, queue_id, max_nums, invisible, poll_time,
                                  init_mode, False, matches, None)
                later = p._pop_queues_later(req, out, pop_time, revive_qid, staged,
                                            order_topics, ti, qids, qi)
                return p._pop_answer_rest(channel, req, deadline / 1000.0, later)
        ti += 1
    count = field(out, R_COUNT)
    if count:  # _answer
        set_field(out, R_POP_TIME, pop_time)
        set_field(out, R_INVISIBLE, invisible)
        set_field(out, R_REVIVE_QID, revive_qid)
        set_field(out, R_ORDERLY, False)
        size = field(out, R_SIZE)
        count_get(pfield(p, P_STATS), group, topic, queue_id if queue_id > 0 else 0, count, size)
        return _SUCCESS, None, out, field(out, R_BODIES), size
    return _POLLING_TIMEOUT, "NO_MESSAGE_IN_QUEUE", None, None, 0
