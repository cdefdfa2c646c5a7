# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Compiled twins of ``ck_body`` and ``ack_body`` in rmq/broker/pop_records.py.

A pop writes one checkpoint per queue it read and an ack one ack record per
request: their JSON bodies (5.3.3's short names, in fastjson's order) are
rendered here straight into one buffer, without orjson calls, %-formatting
or a map; strings are written the way orjson writes them (json_text).
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.exc cimport PyErr_Occurred
from cpython.list cimport PyList_GET_ITEM, PyList_GET_SIZE
from cpython.long cimport PyLong_AsLongLongAndOverflow
from libc.stdint cimport INT64_MAX, INT64_MIN, int64_t, uint8_t, uint64_t
from libc.stdlib cimport free, malloc
from libc.string cimport memcpy

from rmq._fast.json_text cimport json_load8, json_store8, json_write_int, json_write_string


cdef extern from "Python.h":
    const char *PyUnicode_AsUTF8AndSize(object o, Py_ssize_t *size) except NULL


cdef struct Text:
    # a str's UTF-8 bytes: its own buffer when ASCII, else the UTF-8 copy the
    # str keeps of itself (PyUnicode_AsUTF8AndSize), alive as long as the str
    const uint8_t *p
    Py_ssize_t n


cdef inline int utf8_of(Text *t, str s) except -1:
    """``t`` set to the UTF-8 bytes of ``s`` (UnicodeEncodeError for a lone
    surrogate, as ``s.encode()`` raises); no object made for an ASCII str."""
    t.p = <const uint8_t *>PyUnicode_AsUTF8AndSize(s, &t.n)
    return 0


cdef inline uint8_t *lit(uint8_t *o, const char *s, Py_ssize_t n) noexcept nogil:
    memcpy(o, s, n)
    return o + n


cdef uint8_t *write_int_obj(uint8_t *o, object v) except NULL:
    """An int as orjson writes it; one past 64 bits signed (up to 64 bits
    unsigned, as orjson takes) from its decimal text."""
    cdef int ovf = 0
    cdef long long x = PyLong_AsLongLongAndOverflow(v, &ovf)
    if x == -1 and not ovf and PyErr_Occurred():
        return NULL
    if not ovf:
        return json_write_int(o, x)
    big = str(v).encode()
    if PyBytes_GET_SIZE(big) > 20:
        raise OverflowError("an offset past 64 bits")
    return lit(o, PyBytes_AS_STRING(big), PyBytes_GET_SIZE(big))


cdef uint8_t *int_list(uint8_t *o, list values) except NULL:
    """``[a,b,...]`` as orjson writes a list of ints."""
    cdef Py_ssize_t i, n = PyList_GET_SIZE(values)
    o[0] = 91
    o += 1
    for i in range(n):
        if i:
            o[0] = 44
            o += 1
        o = write_int_obj(o, <object>PyList_GET_ITEM(values, i))
    o[0] = 93
    return o + 1


cdef inline uint8_t *int_arr(uint8_t *o, const int64_t *values, Py_ssize_t n,
                           int64_t base) noexcept:
    """``[a,b,...]`` of ``values[:n]`` less ``base`` each (the caller vouched
    that no difference leaves 64 bits).  A value one past the one before (the
    offsets of a run, as most pops and acks have them) is that one's text, of
    up to eight digits and not ending in 9, copied as a word and its last
    digit stepped.  Room for 22 bytes a value past ``o``."""
    cdef Py_ssize_t i, w = 0
    cdef uint8_t *last = o
    cdef bint short = False  # the text before: non-negative, of up to eight digits
    o[0] = 91
    o += 1
    for i in range(n):
        if i:
            o[0] = 44
            o += 1
            if short and last[w - 1] != 57 and \
                    <uint64_t>values[i] - <uint64_t>values[i - 1] == 1:
                json_store8(o, json_load8(last))
                o[w - 1] += 1
                last = o
                o += w
                continue
        last = o
        o = json_write_int(o, values[i] - base)
        w = o - last
        short = w <= 8 and last[0] != 45
    o[0] = 93
    return o + 1


cdef inline uint8_t *bn_and_c(uint8_t *o, bint has_bn, const Text *bn,
                               const Text *c) noexcept:
    """``,"bn":..`` (when there is a broker name) and ``,"c":..``: both records'."""
    if has_bn:
        o = lit(o, b',"bn":', 6)
        o = json_write_string(o, bn.p, bn.n)
    o = lit(o, b',"c":', 5)
    return json_write_string(o, c.p, c.n)


cdef inline uint8_t *so_and_t(uint8_t *o, long long start_offset, const Text *t) noexcept:
    """``,"so":..,"t":..}``: both records' last fields and the close."""
    o = lit(o, b',"so":', 6)
    o = json_write_int(o, start_offset)
    o = lit(o, b',"t":', 5)
    o = json_write_string(o, t.p, t.n)
    o[0] = 125
    return o + 1


def ck_body(long long bit_map, object broker_name, str cid, list diffs,
            long long invisible_time, long long pop_time, long long queue_id,
            long long revive_offset, object reput_times, long long start_offset,
            str topic) -> bytes:
    """A checkpoint's JSON body (``PopCheckPoint.encode``)."""
    return c_ck_body(bit_map, broker_name, cid, diffs, NULL, 0, invisible_time, pop_time,
                     queue_id, revive_offset, reput_times, start_offset, topic)


cdef bytes ck_body_arr(object broker_name, str cid, const int64_t *offs, Py_ssize_t n,
                       long long invisible_time, long long pop_time, long long queue_id,
                       long long start_offset, str topic):
    """The JSON body of a pop's checkpoint of the offsets ``offs[:n]`` (no
    bit map, revive offset or reput times): ``ck_body`` of their diffs from
    ``start_offset``, each within 64 bits (the caller's word; not checked)."""
    return c_ck_body(0, broker_name, cid, None, offs, n, invisible_time, pop_time,
                     queue_id, 0, None, start_offset, topic)


cdef bytes c_ck_body(long long bit_map, object broker_name, str cid, list diffs,
                     const int64_t *offs, Py_ssize_t n, long long invisible_time,
                     long long pop_time, long long queue_id, long long revive_offset,
                     object reput_times, long long start_offset, str topic):
    """``ck_body`` of ``diffs``, or when it is None of the offsets
    ``offs[:n]`` less ``start_offset``."""
    cdef Text bn = Text(NULL, 0), c, rp = Text(NULL, 0), t
    utf8_of(&c, cid)
    utf8_of(&t, topic)
    if broker_name is not None:
        utf8_of(&bn, <str?>broker_name)
    if reput_times is not None:
        utf8_of(&rp, <str?>reput_times)
    if diffs is not None:
        n = PyList_GET_SIZE(diffs)
    cdef Py_ssize_t cap = (200 + 22 * 7 + 22 * n + 6 * (bn.n + c.n + rp.n + t.n) + 4 * 18)
    cdef uint8_t *buf = <uint8_t *>malloc(cap)
    if buf == NULL:
        raise MemoryError()
    cdef uint8_t *o = buf
    try:
        o = lit(o, b'{"bm":', 6)
        o = json_write_int(o, bit_map)
        o = bn_and_c(o, broker_name is not None, &bn, &c)
        o = lit(o, b',"d":', 5)
        if diffs is None:
            o = int_arr(o, offs, n, start_offset)
        else:
            o = int_list(o, diffs)
        o = lit(o, b',"it":', 6)
        o = json_write_int(o, invisible_time)
        o = lit(o, b',"n":', 5)
        o = json_write_int(o, n)
        o = lit(o, b',"pt":', 6)
        o = json_write_int(o, pop_time)
        o = lit(o, b',"q":', 5)
        o = json_write_int(o, queue_id)
        o = lit(o, b',"reviveTime":', 14)
        if (invisible_time > 0 and pop_time > INT64_MAX - invisible_time) or \
                (invisible_time < 0 and pop_time < INT64_MIN - invisible_time):
            big = str(<object>pop_time + <object>invisible_time).encode()  # past 64 bits
            o = lit(o, PyBytes_AS_STRING(big), PyBytes_GET_SIZE(big))
        else:
            o = json_write_int(o, pop_time + invisible_time)
        o = lit(o, b',"ro":', 6)
        o = json_write_int(o, revive_offset)
        if reput_times is not None:
            o = lit(o, b',"rp":', 6)
            o = json_write_string(o, rp.p, rp.n)
        o = so_and_t(o, start_offset, &t)
        return PyBytes_FromStringAndSize(<char *>buf, o - buf)
    finally:
        free(buf)


cdef enum:
    ACK_ROOM = 2048  # an ack record's body written on the stack up to this size (~70 offsets)
    ARR_ROOM = 64  # a list's offsets taken into a C array up to this many


def ack_body(list offsets, object broker_name, str group, long long pop_time,
             long long queue_id, long long start_offset, str topic) -> bytes:
    """An ack record's JSON body (``AckMsg.encode``): ``ao`` for one offset,
    ``aol`` for any other number.  Offsets that are all ints of 64 bits (up
    to ``ARR_ROOM``) are written from a C array, as the compiled ack's are."""
    cdef int64_t room[ARR_ROOM]
    cdef Py_ssize_t i, n = PyList_GET_SIZE(offsets)
    cdef int ovf = 0
    room[0] = 0  # (an empty list reads none of it)
    if n > ARR_ROOM:
        return c_ack_body(offsets, NULL, 0, broker_name, group, pop_time, queue_id,
                          start_offset, topic)
    for i in range(n):
        item = <object>PyList_GET_ITEM(offsets, i)
        if type(item) is not int:
            break
        room[i] = PyLong_AsLongLongAndOverflow(item, &ovf)
        if ovf:
            break
    else:
        return c_ack_body(None, room, n, broker_name, group, pop_time, queue_id,
                          start_offset, topic)
    return c_ack_body(offsets, NULL, 0, broker_name, group, pop_time, queue_id, start_offset,
                      topic)


cdef bytes ack_body_arr(const int64_t *offs, Py_ssize_t n, object broker_name, str group,
                        long long pop_time, long long queue_id, long long start_offset,
                        str topic):
    """``ack_body`` of the offsets ``offs[:n]``."""
    return c_ack_body(None, offs, n, broker_name, group, pop_time, queue_id, start_offset, topic)


cdef bytes c_ack_body(list offsets, const int64_t *offs, Py_ssize_t n, object broker_name,
                      str group, long long pop_time, long long queue_id,
                      long long start_offset, str topic):
    """``ack_body`` of ``offsets``, or when it is None of ``offs[:n]``:
    written on the stack (a heap block only for a body that may not fit)."""
    cdef Text bn = Text(NULL, 0), c, t
    cdef uint8_t room[ACK_ROOM]
    utf8_of(&c, group)
    utf8_of(&t, topic)
    if broker_name is not None:
        utf8_of(&bn, <str?>broker_name)
    if offsets is not None:
        n = PyList_GET_SIZE(offsets)
    cdef Py_ssize_t cap = 120 + 22 * 4 + 22 * n + 6 * (bn.n + c.n + t.n) + 3 * 18
    cdef uint8_t *buf = room
    if cap > ACK_ROOM:
        buf = <uint8_t *>malloc(cap)
        if buf == NULL:
            raise MemoryError()
    cdef uint8_t *o = buf
    try:
        if n == 1:
            o = lit(o, b'{"ao":', 6)
            if offsets is None:
                o = json_write_int(o, offs[0])
            else:
                o = write_int_obj(o, <object>PyList_GET_ITEM(offsets, 0))
        else:
            o = lit(o, b'{"aol":', 7)
            if offsets is None:
                o = int_arr(o, offs, n, 0)
            else:
                o = int_list(o, offsets)
        o = bn_and_c(o, broker_name is not None, &bn, &c)
        o = lit(o, b',"pt":', 6)
        o = json_write_int(o, pop_time)
        o = lit(o, b',"q":', 5)
        o = json_write_int(o, queue_id)
        o = so_and_t(o, start_offset, &t)
        return PyBytes_FromStringAndSize(<char *>buf, o - buf)
    finally:
        if buf != room:
            free(buf)
