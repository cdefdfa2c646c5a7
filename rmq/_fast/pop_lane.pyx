# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Compiled twin of ``PopLane`` in rmq/broker/pop_lane.py: the POP_MESSAGE,
ACK_MESSAGE and BATCH_ACK_MESSAGE requests at the start of a read, served
without ``RemotingCommand`` objects or the dispatcher.

The frames are walked in C: the length prefix and the header length checked
in place, and a frame that does not start as one of the lane's requests
(``names_lane_code``: other lanes' frames cost a few byte compares) or whose
header the remoting decoder (compiled) reads as another request ends the
turn.  What lies between the header and the answer -- the processors' own
functions -- is ``PopLaneSupport``'s, shared with the twin; the answers are
written by ``frame`` (a found pop's and a plain answer's header from the
general encoder's pieces, here) from the values those functions return and
written together at the end of the read.
"""

from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize
from cpython.mem cimport PyMem_Free, PyMem_Realloc
from libc.stdint cimport int32_t, int64_t, uint8_t
from libc.string cimport memcmp, memcpy
from types import MemberDescriptorType

from rmq._fast.byteorder cimport get32, put32
from rmq._fast.slots cimport set_slot_or_attr, slot_offset, slot_offsets, slot_or_attr, \
    slot_value
from rmq._fast.frame_body cimport copy_records
from rmq._fast.json_text cimport json_escape8, json_load8, json_write_int
from rmq._fast.remoting_codec cimport decode_header

cdef extern from "Python.h":
    bint PyUnicode_IS_COMPACT_ASCII(object o)
    void *PyUnicode_DATA(object o)
    Py_ssize_t PyUnicode_GET_LENGTH(object o)
    long long PyLong_AsLongLongAndOverflow(object o, int *overflow) except? -1

cdef enum:
    SYSTEM_ERROR = 1


cdef inline bint names_lane_code(const uint8_t *f, Py_ssize_t n) noexcept nogil:
    """``rmq.broker.pop_lane.names_lane_code`` of the frame ``f[:n]``: a JSON
    header starting ``{"code":`` with 200050, 200051 or 200151."""
    if n < 19 or f[0] != 0 or memcmp(f + 4, b'{"code":200', 11) != 0:
        return False
    if 48 <= f[18] <= 57:
        return False
    return ((f[15] == 48 and f[16] == 53 and f[17] == 48)          # 050
            or (f[15] == 48 and f[16] == 53 and f[17] == 49)       # 051
            or (f[15] == 49 and f[16] == 53 and f[17] == 49))      # 151


# The answer headers as pieces of the general encoder's text with the values
# between them (``rmq.broker.pop_lane.AnswerPieces``), set by ``bind``.
cdef enum:
    POP_VALUES = 7   # popTime, invisibleTime, reviveQid, restNum, startOffsetInfo,
                     # msgOffsetInfo (the two texts: 4 and 5), the opaque
    ACK_VALUES = 2   # code, opaque
    INT_ROOM = 24

cdef object _decode_error = None # the error the remoting decoder raises on a bad header
cdef object _general = None      # the twin ``frame``: whatever is not written here
cdef object _pop_result = None   # rmq.broker.processor.pop.PopResult
cdef list _pop_pieces = None
cdef list _ack_pieces = None
cdef int _pop_order[POP_VALUES]
cdef int _ack_order[ACK_VALUES]
# the pop answer's fields ``frame`` reads, and where each lies in an instance
# of ``_pop_result`` (read there without the attribute protocol)
cdef tuple _POP_FIELDS = ("orderly", "pop_time", "invisible", "revive_qid", "rest", "start_info",
                          "msg_info")
cdef enum:
    F_ORDERLY, F_POP_TIME, F_INVISIBLE, F_REVIVE_QID, F_REST, F_START_INFO, F_MSG_INFO, F_FIELDS
cdef Py_ssize_t _at[F_FIELDS]


def bind(decode_error, pop_result, general, pop_pieces, pop_order, ack_pieces, ack_order):
    """The error the remoting decoder raises, the pop answer's class, the twin
    ``frame`` and the header pieces of a found pop's and of a plain (no
    remark) answer, with which value follows each piece; None pieces leave
    every answer to the twin.  The pop answer's class holds the fields
    ``frame`` reads as plain slots."""
    global _decode_error, _general, _pop_result, _pop_pieces, _ack_pieces
    cdef Py_ssize_t at[F_FIELDS]
    cdef int i
    slot_offsets(pop_result, _POP_FIELDS, at, MemberDescriptorType, False, True)
    for i in range(F_FIELDS):
        _at[i] = at[i]
    _decode_error = decode_error
    _general = general
    _pop_result = pop_result
    _pop_pieces = _ack_pieces = None
    if pop_pieces is not None:
        if len(pop_pieces) != POP_VALUES + 1 or sorted(pop_order) != list(range(POP_VALUES)):
            raise ValueError("a pop answer's header holds seven values")
        for i in range(POP_VALUES):
            _pop_order[i] = pop_order[i]
        _pop_pieces = [bytes(b) for b in pop_pieces]
    if ack_pieces is not None:
        if len(ack_pieces) != ACK_VALUES + 1 or sorted(ack_order) != list(range(ACK_VALUES)):
            raise ValueError("a plain answer's header holds two values")
        for i in range(ACK_VALUES):
            _ack_order[i] = ack_order[i]
        _ack_pieces = [bytes(b) for b in ack_pieces]


cdef inline bint as_int64(object o, int64_t *out, bint exact=True):
    """An int (``exact``: not of a subclass, whose str may differ, such as an
    enum's) that fits 64 bits (anything else: False)."""
    cdef int overflow = 0
    if type(o) is not int and (exact or not isinstance(o, int) or isinstance(o, bool)):
        return False
    out[0] = PyLong_AsLongLongAndOverflow(o, &overflow)
    return overflow == 0


cdef inline bint plain_ascii(const uint8_t *p, Py_ssize_t n) noexcept nogil:
    """Whether ``p[:n]`` (ASCII) holds no byte JSON escapes ('"', '\\', control)."""
    cdef Py_ssize_t i = 0
    while i + 8 <= n:
        if json_escape8(json_load8(p + i)):
            return False
        i += 8
    while i < n:
        if p[i] == 34 or p[i] == 92 or p[i] < 32:
            return False
        i += 1
    return True


cdef Py_ssize_t info_len(object parts):
    """Bytes of ``";".join(parts)`` written as JSON string content, or -1 when
    it is not a list of plain ASCII texts (left to the general encoder)."""
    cdef Py_ssize_t n = 0, k
    if type(parts) is not list:
        return -1
    for t in <list>parts:
        if type(t) is not str or not PyUnicode_IS_COMPACT_ASCII(t):
            return -1
        k = PyUnicode_GET_LENGTH(t)
        if not plain_ascii(<const uint8_t *>PyUnicode_DATA(t), k):
            return -1
        n += k + 1
    return n - 1 if n else 0


cdef char *put_info(char *o, list parts):
    """``";".join(parts)`` at ``o`` (``info_len`` vouched for them)."""
    cdef Py_ssize_t k
    cdef bint first = True
    for t in parts:
        if not first:
            o[0] = 59
            o += 1
        first = False
        k = PyUnicode_GET_LENGTH(t)
        memcpy(o, PyUnicode_DATA(t), k)
        o += k
    return o


cdef object body_frame(list pieces, const int *order, int nvalues, char ints[][INT_ROOM],
                       const Py_ssize_t *lens, list texts, int text_from, object body,
                       Py_ssize_t size):
    """Prefix, header (``pieces`` with value ``order[i]`` after piece i: the
    digits ``ints[w]``, or for ``text_from <= w < text_from + len(texts)``
    the texts ``texts[w - text_from]`` joined with ';') and the body's
    ``size`` bytes, in one allocation; None when the frame would be longer
    than its int32 length allows (the general encoder's error to raise)."""
    cdef Py_ssize_t hlen = 0, at, i
    cdef Py_ssize_t ntexts = len(texts) if texts is not None else 0
    cdef char *out
    cdef int w
    for piece in pieces:
        hlen += len(<bytes>piece)
    for i in range(nvalues):
        hlen += lens[i]
    if hlen > 0xFFFFFF or 4 + hlen + size > 2147483647:
        return None
    result = PyBytes_FromStringAndSize(NULL, 8 + hlen + size)
    out = PyBytes_AS_STRING(result)
    put32(<uint8_t *>out, <int32_t>(4 + hlen + size))
    put32(<uint8_t *>out + 4, <int32_t>hlen)
    at = 8
    for i in range(nvalues + 1):
        piece = <bytes>pieces[i]
        memcpy(out + at, PyBytes_AS_STRING(piece), len(piece))
        at += len(piece)
        if i < nvalues:
            w = order[i]
            if text_from <= w < text_from + ntexts:
                at = put_info(out + at, <list>texts[w - text_from]) - out
            else:
                memcpy(out + at, ints[w], lens[w])
                at += lens[w]
    if size:
        copy_records(out, at, size, <list>body)
    return result


cdef inline bint put_int32(object o, char *digits, Py_ssize_t *n, bint exact=True):
    """An int32's digits (anything else: False)."""
    cdef int64_t v = 0
    if not as_int64(o, &v, exact) or not -2147483648 <= v <= 2147483647:
        return False
    n[0] = json_write_int(<uint8_t *>digits, v) - <uint8_t *>digits
    return True


cdef inline bint put_int64(object o, char *digits, Py_ssize_t *n):
    """A 64-bit int's digits (anything else: False)."""
    cdef int64_t v = 0
    if not as_int64(o, &v):
        return False
    n[0] = json_write_int(<uint8_t *>digits, v) - <uint8_t *>digits
    return True


def read_request(frame):
    """``rmq.broker.pop_lane.read_request`` (the twin): ``(code, opaque,
    serialize type, extFields, body)`` of a request frame of one of the
    lane's codes (the bytes after the length prefix), None for any other."""
    cdef Py_buffer pb
    PyObject_GetBuffer(frame, &pb, PyBUF_SIMPLE)
    try:
        return read_at(frame, 0, <const uint8_t *>pb.buf, pb.len, frame)
    finally:
        PyBuffer_Release(&pb)


cdef object read_at(object buf, Py_ssize_t base, const uint8_t *f, Py_ssize_t n, object cut):
    """``read_request`` of the frame at ``f``, ``n`` bytes at ``base`` of
    ``buf`` (whose buffer the caller holds), read where it lies; its body
    cut out of ``cut`` at the same place (None: a copy, bytes -- a batch
    ack's few entries copy for less than a memoryview of ``buf`` and its
    slice cost to make, and the copy does not keep ``buf`` exported)."""
    cdef Py_ssize_t off
    if not names_lane_code(f, n):
        return None
    try:
        fields = decode_header(buf, base, f, n, False)
    except _decode_error:
        return None
    code = fields[0]
    if (code != 200050 and code != 200151 and code != 200051) or <int>fields[4] & 3:
        return None  # a response (1) or a oneway request (2)
    off = fields[8]
    if off >= n:
        return code, fields[3], fields[7], fields[6], None
    if cut is None:
        return code, fields[3], fields[7], fields[6], \
            PyBytes_FromStringAndSize(<const char *>f + off, n - off)
    return code, fields[3], fields[7], fields[6], cut[base + off:base + n]


cdef inline object field(object out, int f):
    """Field ``f`` of ``out``, a pop answer (of ``_pop_result``)."""
    return slot_value(out, _at[f], <str>_POP_FIELDS[f])


def frame(tuple answer, opaque, int stype):
    """``rmq.broker.pop_lane.frame`` (the twin): the response frame of a
    lane answer -- a pop that found messages and a plain ``(code, None)``
    answer written here from the header pieces, in one allocation with the
    records; anything else (a remark, extFields of a dict, the ROCKETMQ
    serialization, an orderly pop, a text to escape) by the twin."""
    return answer_frame(answer, opaque, stype)


cdef object answer_frame(tuple answer, object opaque, int stype):
    """``frame``, without the call of a Python function."""
    cdef char ints[POP_VALUES][INT_ROOM]
    cdef Py_ssize_t lens[POP_VALUES]
    cdef int64_t size = 0
    cdef Py_ssize_t n = len(answer)
    if stype != 0:
        pass
    elif n == 2:
        if _ack_pieces is not None and answer[1] is None \
                and put_int32(answer[0], ints[0], &lens[0], False) \
                and put_int32(opaque, ints[1], &lens[1]):
            got = body_frame(_ack_pieces, _ack_order, ACK_VALUES, ints, lens, None, 0, None, 0)
            if got is not None:
                return got
    elif n == 5 and _pop_pieces is not None and type(answer[2]) is _pop_result \
            and answer[0] == 0 and answer[1] is None:
        out = answer[2]
        body = answer[3]
        if not field(out, F_ORDERLY) and type(body) is list and len(<list>body) \
                and as_int64(answer[4], &size) and 0 < size <= 2147483647 \
                and put_int64(field(out, F_POP_TIME), ints[0], &lens[0]) \
                and put_int64(field(out, F_INVISIBLE), ints[1], &lens[1]) \
                and put_int64(field(out, F_REVIVE_QID), ints[2], &lens[2]) \
                and put_int64(field(out, F_REST), ints[3], &lens[3]) \
                and put_int32(opaque, ints[6], &lens[6]):
            start, msg = field(out, F_START_INFO), field(out, F_MSG_INFO)
            lens[4] = info_len(start)
            lens[5] = info_len(msg)
            if lens[4] >= 0 and lens[5] >= 0:
                got = body_frame(_pop_pieces, _pop_order, POP_VALUES, ints, lens,
                                 [start, msg], 4, body, <Py_ssize_t>size)
                if got is not None:
                    return got
    return _general(answer, opaque, stype)


# set by ``bind_take``: ``PopLaneSupport.take`` (the twin) and its calls,
# the processors' functions (compiled when built) and ``run_eagerly``; and
# where PopLaneSupport's fields ``take`` reads lie in an instance
cdef object _twin_take = None
cdef object _support_type = None
cdef tuple _SUPPORT_FIELDS = ("pop", "ack", "pop_queue", "ack_queue", "revive", "served")
cdef enum:
    S_POP, S_ACK, S_POP_QUEUE, S_ACK_QUEUE, S_REVIVE, S_SERVED, S_FIELDS
cdef Py_ssize_t _s_at[S_FIELDS]
cdef object _lane_pop = None
cdef object _batch_ack_now = None
cdef object _run_eagerly = None
cdef object _queue_type = None  # RequestQueue: its runs_at_once is done here
# the fields runs_at_once reads, and where each lies in a RequestQueue
cdef tuple _QUEUE_FIELDS = ("_waiting", "busy", "workers", "before_run_active")
cdef enum:
    Q_WAITING, Q_BUSY, Q_WORKERS, Q_ACTIVE, Q_FIELDS
cdef Py_ssize_t _q_at[Q_FIELDS]


def bind_take(support_type, lane_pop, batch_ack_now, run_eagerly, queue_type=None):
    """PopLaneSupport (a plain slots class of at least the fields ``take``
    reads), the pop processor's ``lane_pop``, the ack processor's
    ``batch_ack_now`` and ``run_eagerly``, for ``take``: a lane whose
    support's class has PopLaneSupport's ``take`` runs ``take`` instead of
    calling it; and RequestQueue (``runs_at_once`` reads the fields of that
    exact type itself)."""
    global _twin_take, _support_type, _lane_pop, _batch_ack_now, _run_eagerly, _queue_type
    cdef Py_ssize_t at[S_FIELDS]
    cdef Py_ssize_t q_at[Q_FIELDS]
    cdef int i
    slot_offsets(support_type, _SUPPORT_FIELDS, at, MemberDescriptorType, False, True)
    for i in range(Q_FIELDS):  # (0: read through the attribute)
        q_at[i] = 0 if queue_type is None else \
            max(0, slot_offset(queue_type, <str>_QUEUE_FIELDS[i], MemberDescriptorType))
    for i in range(S_FIELDS):
        _s_at[i] = at[i]
    for i in range(Q_FIELDS):
        _q_at[i] = q_at[i]
    _support_type = support_type
    _twin_take = support_type.take
    _lane_pop = lane_pop
    _batch_ack_now = batch_ack_now
    _run_eagerly = run_eagerly
    _queue_type = queue_type


cpdef bint runs_at_once(object pool) except -1:
    """``pool.runs_at_once()``, read here for a RequestQueue (asked twice a
    pop and its ack: no frame for it)."""
    if _queue_type is None or type(pool) is not _queue_type:
        return pool.runs_at_once()
    if qfield(pool, Q_WAITING) or qfield(pool, Q_BUSY) >= qfield(pool, Q_WORKERS):
        return False
    active = qfield(pool, Q_ACTIVE)
    return active is None or not active()


cdef inline object qfield(object pool, int f):
    """Field ``f`` of ``pool``, a RequestQueue."""
    return slot_or_attr(pool, _q_at[f], <str>_QUEUE_FIELDS[f])


cdef inline object sfield(object support, int f):
    """Field ``f`` of ``support``: at its slot for a PopLaneSupport, else
    through the attribute (a subclass's)."""
    return slot_or_attr(support, _s_at[f] if type(support) is _support_type else 0,
                        <str>_SUPPORT_FIELDS[f])


cdef inline int count_served(object support) except -1:
    """``support.served += 1``."""
    return set_slot_or_attr(support, _s_at[S_SERVED] if type(support) is _support_type else 0,
                            "served", sfield(support, S_SERVED) + 1)


cdef object take(object support, object channel, int code, object ext, object body):
    """``PopLaneSupport.take`` (the twin), step for step, without its frame:
    the compiled lane calls it when its support's ``take`` is that one."""
    if code == 200050:
        if body is not None or not runs_at_once(sfield(support, S_POP_QUEUE)):
            return None
        revive = sfield(support, S_REVIVE)
        if not revive.loaded:
            revive.ensure_loaded()
        got = _lane_pop(sfield(support, S_POP), channel, ext if ext else {})
        if got is None:
            return None
        count_served(support)
        return got if type(got) is tuple else _run_eagerly(got)
    if not runs_at_once(sfield(support, S_ACK_QUEUE)):
        return None
    count_served(support)
    if code == 200151:
        got = _batch_ack_now(sfield(support, S_ACK), body if body is not None else b"")
        return got if type(got) is tuple else _run_eagerly(got)
    return _run_eagerly(sfield(support, S_ACK).ack_answer(ext if ext else {}))


cdef class PopLane:
    """See ``rmq.broker.pop_lane.PopLane`` (the twin) for the contract."""

    cdef readonly object support
    cdef readonly Py_ssize_t max_frame
    cdef readonly object service
    cdef object _take, _frame, _failed, _later, _read, _hold
    # the admissions of POP_MESSAGE, ACK_MESSAGE and BATCH_ACK_MESSAGE (None:
    # not bounded), ``lane_admissions`` of the twin module in three fields:
    # found by the request's code without an int made for a dict's key
    cdef object _adm_pop, _adm_ack, _adm_batch
    # what the last ``serve`` took: (request code, response code, count)
    # triples in the order first met (the twin's dict's), in a C block that
    # grows and stays with the lane (no key tuple and dict entry per request)
    cdef long long *_counts
    cdef Py_ssize_t _n_counts, _room_counts
    cdef bint _direct, _own_read, _own_frame
    # the admissions' class and where its in_flight and limit lie (0: read
    # through the attribute)
    cdef object _adm_type
    cdef Py_ssize_t _in_flight_at, _limit_at

    def __init__(self, support, Py_ssize_t max_frame, service=None):
        self.support = support
        self.max_frame = max_frame
        self.service = service
        self._hold = None if service is None else service.hold
        if service is not None:
            self._adm_pop = service.admission_of(200050)
            self._adm_ack = service.admission_of(200051)
            self._adm_batch = service.admission_of(200151)
            for adm in (self._adm_pop, self._adm_ack, self._adm_batch):
                if adm is not None and self._adm_type is None:
                    self._adm_type = type(adm)
                    self._in_flight_at = max(0, slot_offset(
                        type(adm), "in_flight", MemberDescriptorType))
                    self._limit_at = max(0, slot_offset(type(adm), "limit",
                                                        MemberDescriptorType))
        self._take = support.take
        self._frame = support.frame
        self._failed = support.failed_frame
        self._later = support.later
        self._read = support.read
        # the support's take is PopLaneSupport's (not a subclass's or another
        # support's): its compiled twin runs here, chosen once
        self._direct = _twin_take is not None and \
            getattr(type(support), "take", None) is _twin_take
        # the support's reader and writer are this module's: called here
        # without a Python call
        self._own_read = self._read is read_request
        self._own_frame = self._frame is frame

    cdef bint _full(self, object adm) except -1:
        """``adm.in_flight >= adm.limit``: its fields read at their slots for
        the admissions' class."""
        cdef bint own = type(adm) is self._adm_type
        return slot_or_attr(adm, self._in_flight_at if own else 0, "in_flight") >= \
            slot_or_attr(adm, self._limit_at if own else 0, "limit")

    def served(self):
        """(request code, oneway, count, response code) of what the last
        ``serve`` took (a request answered later counted as SUCCESS)."""
        cdef long long *t = self._counts
        return [(t[3 * i], False, t[3 * i + 2], t[3 * i + 1]) for i in range(self._n_counts)]

    cdef int _count(self, int code, int response) except -1:
        """One more request ``code`` answered ``response``."""
        cdef Py_ssize_t i, room
        cdef long long *t = self._counts
        for i in range(self._n_counts):
            if t[3 * i] == code and t[3 * i + 1] == response:
                t[3 * i + 2] += 1
                return 0
        if self._n_counts == self._room_counts:
            room = 2 * self._room_counts + 4
            t = <long long *>PyMem_Realloc(t, room * 3 * sizeof(long long))
            if t is NULL:
                raise MemoryError()
            self._counts = t
            self._room_counts = room
        i = self._n_counts
        t[3 * i] = code
        t[3 * i + 1] = response
        t[3 * i + 2] = 1
        self._n_counts = i + 1
        return 0

    def serve(self, channel, buf, Py_ssize_t pos, Py_ssize_t end):
        """Serve the lane's requests at the start of ``buf[pos:end]``; returns
        the position of the first frame left to the general path and the
        answers to write (None when there are none)."""
        cdef Py_buffer pb
        cdef const uint8_t *p
        cdef Py_ssize_t length, hlen
        cdef int code, response
        # the answers: the first alone (one request a read, the usual case:
        # no list to join), a list once there are more
        cdef object first = None
        cdef list out = None
        self._n_counts = 0
        PyObject_GetBuffer(buf, &pb, PyBUF_SIMPLE)
        try:
            p = <const uint8_t *>pb.buf
            if end > pb.len:
                end = pb.len
            while pos >= 0 and end - pos >= 8:
                length = get32(p + pos)
                if length < 4 or length > self.max_frame or end - pos - 4 < length:
                    break
                if not names_lane_code(p + pos + 4, length):
                    break  # not one of the lane's requests: no decode
                hlen = ((<Py_ssize_t>p[pos + 5] << 16) | (<Py_ssize_t>p[pos + 6] << 8)
                        | p[pos + 7])
                if hlen + 4 > length:
                    break
                if self._own_read:
                    got = read_at(buf, pos + 4, p + pos + 4, length, None)
                else:
                    got = self._read(memoryview(buf)[pos + 4:pos + 4 + length])
                if got is None:
                    break
                code, opaque, stype, ext, body = <tuple>got
                adm = self._adm_pop if code == 200050 else \
                    self._adm_batch if code == 200151 else self._adm_ack
                if adm is not None and self._full(adm):
                    break  # the general path answers it SYSTEM_BUSY
                frame_out = None
                try:
                    if self._direct:
                        answer = take(self.support, channel, code, ext, body)
                    else:
                        answer = self._take(channel, code, ext, body)
                except Exception as exc:  # answered as the general path would
                    frame_out = self._failed(channel, code, opaque, stype, exc)
                    response = SYSTEM_ERROR
                else:
                    if answer is None:
                        break
                    if type(answer) is tuple:
                        frame_out = answer_frame(<tuple>answer, opaque, stype) if self._own_frame \
                            else self._frame(answer, opaque, stype)
                        response = (<tuple>answer)[0]
                    else:
                        self._later(channel, answer, code, opaque, stype)
                        if self._hold is not None:
                            self._hold(answer, adm)
                        response = 0
                if frame_out is None:
                    pass
                elif out is not None:
                    out.append(frame_out)
                elif first is None:
                    first = frame_out
                else:
                    out = [first, frame_out]
                self._count(code, response)
                pos += 4 + length
        finally:
            PyBuffer_Release(&pb)
        if out is not None:
            return pos, b"".join(out)
        if first is None or type(first) is bytes:
            return pos, first
        return pos, b"".join((first,))  # (as the join of one answer makes it: bytes)

    def __dealloc__(self):
        PyMem_Free(self._counts)
