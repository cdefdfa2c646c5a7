# cython: language_level=3
"""Compiled twins of ``_Pending``, ``_write_now`` (and ``write_ck_now``,
``write_ack_now``: a record given by its fields), ``_written``, ``_add_ck``
and ``_apply_ack`` in rmq/broker/pop_revive.py: each revive record a pop or
an ack writes -- its body, its append through the store's one-record session
and its bookkeeping (the service's maps, its heap, the read offset and the
group's offset, the pending checkpoint's offsets in a C array) -- step for
step, without the interpreter's frames.  The classes, enum members and names
of the layers above are handed over by ``bind``.
"""

from heapq import heappush
from types import MemberDescriptorType

cimport cython

from cpython.dict cimport PyDict_SetItem
from cpython.long cimport PyLong_AsLongLongAndOverflow
from cpython.mem cimport PyMem_Free, PyMem_Malloc
from libc.stdint cimport INT64_MAX, INT64_MIN, int64_t, uint8_t
from libc.string cimport memcmp, memcpy, memset

from posix.time cimport CLOCK_REALTIME, clock_gettime, timespec

from rmq._fast.json_text cimport json_write_int
from rmq._fast.offset_table cimport commit_in, offset_in, offsets_of
from rmq._fast.pop_records import ack_body, ck_body
from rmq._fast.pop_records cimport ack_body_arr, ck_body_arr
from rmq._fast.slots cimport set_slot_or_attr, slot_offsets, slot_or_attr
from rmq._fast.store_put cimport ClassOffsets, config_of, put_one


cdef extern from "Python.h":
    ctypedef struct PyObject
    PyObject *_PyType_Lookup(type t, object name)  # borrowed; no error set
    PyObject **_PyObject_GetDictPtr(object o)  # no error set
    PyObject *PyDict_GetItemWithError(PyObject *d, object key) except? NULL  # borrowed
    object PyUnicode_New(Py_ssize_t size, Py_UCS4 maxchar)
    void *PyUnicode_DATA(object o)
    int PyUnicode_IS_ASCII(object o)
    Py_ssize_t PyUnicode_GET_LENGTH(object o)

cdef object _CK = None
cdef object _GRACE = 0
cdef object _SYNC_FLUSH = None
cdef object _SYNC_MASTER = None
cdef tuple _TAGS = None  # (tag, tagsCode) of a checkpoint, an ack, a batch ack
cdef str _PROPS_HEAD = None  # TIMER_DELIVER_MS's key and separator
cdef str _TAGS_KEY = None  # the separator and TAGS's key
cdef bint _bound = False
cdef object _TOPIC = None  # the last revive topic written and its bytes
cdef bytes _TOPIC_B = None


def bind(ck_type: type, grace_ms: int, sync_flush: object, sync_master: object,
         tags: tuple, timer_deliver_key: str, tags_key: str) -> None:
    """PopCheckPoint, the grace of a checkpoint the timer wrote,
    FlushDiskType.SYNC_FLUSH, BrokerRole.SYNC_MASTER, ((tag, tagsCode) of a
    checkpoint, an ack, a batch ack) and the two property keys of a record."""
    global _CK, _GRACE, _SYNC_FLUSH, _SYNC_MASTER, _TAGS, _PROPS_HEAD, _TAGS_KEY
    global _bound
    tags = tuple(tags)
    head = timer_deliver_key + "\x01"
    tags_sep = "\x02" + tags_key + "\x01"
    # (``record_props`` writes them as they are: one byte a character)
    if not all(PyUnicode_IS_ASCII(<str>text) for text in (head, tags_sep, *(t for t, _ in tags))):
        raise ValueError("a revive record's property keys and tags must be ASCII")
    _CK = ck_type
    _GRACE = grace_ms
    _SYNC_FLUSH = sync_flush
    _SYNC_MASTER = sync_master
    _TAGS = tags
    _PROPS_HEAD = head
    _TAGS_KEY = tags_sep
    _bound = True


# PopReviveService and its (compiled) write_ck_now and write_ack_now as the
# class holds them, set by ``bind_service``: ``direct`` vouches for a service
# whose records the compiled pop and ack may write with ``write_ck_arr`` and
# ``write_ack_arr``
cdef object _SVC = None
cdef object _SVC_CK = None
cdef object _SVC_ACK = None
# the service's fields a record's writing reads and sets, at their slots for a
# PopReviveService (0: unknown, or a service of another class: the attribute)
cdef tuple _SVC_FIELDS = ("c", "store", "topic", "read_offsets", "pending", "by_queue", "heap",
                          "_seq", "_wake", "applied", "_next_wake_ms", "loaded", "on_settled")
cdef enum:
    S_C, S_STORE, S_TOPIC, S_READ, S_PENDING, S_BY_QUEUE, S_HEAP, S_SEQ, S_WAKE, S_APPLIED, \
        S_NEXT_WAKE, S_LOADED, S_ON_SETTLED, S_FIELDS
cdef Py_ssize_t _s_at[S_FIELDS]


def bind_service(svc_type: type) -> None:
    """PopReviveService, once its ``write_ck_now`` and ``write_ack_now`` are
    this module's, and where its fields lie."""
    global _SVC, _SVC_CK, _SVC_ACK
    cdef Py_ssize_t i
    _SVC = None  # (no slot read while the offsets change)
    slot_offsets(svc_type, _SVC_FIELDS, _s_at, MemberDescriptorType, True)
    for i in range(S_FIELDS):
        _s_at[i] = max(0, _s_at[i])
    _SVC = svc_type
    _SVC_CK = svc_type.write_ck_now
    _SVC_ACK = svc_type.write_ack_now


cdef inline object sfield(object svc, int f):
    """Field ``f`` of the service ``svc``."""
    return slot_or_attr(svc, _s_at[f] if type(svc) is _SVC else 0, <str>_SVC_FIELDS[f])


cdef inline int set_sfield(object svc, int f, object v) except -1:
    """Set field ``f`` of the service ``svc``."""
    return set_slot_or_attr(svc, _s_at[f] if type(svc) is _SVC else 0, <str>_SVC_FIELDS[f], v)


cdef bint direct(object svc, str name) except -1:
    """Whether ``svc.<name>`` (write_ck_now or write_ack_now) is this
    module's: a PopReviveService whose class still holds it and that has no
    attribute of that name of its own (a test's stand-in).  Read from the
    class's and the instance's dicts (what ``getattr`` would look in)."""
    cdef PyObject **own
    if _SVC is None or type(svc) is not _SVC:
        return False
    ours = _SVC_CK if PyUnicode_GET_LENGTH(name) == 12 and name == "write_ck_now" else _SVC_ACK
    if _PyType_Lookup(<type>_SVC, name) is not <PyObject *>ours:
        return False
    own = _PyObject_GetDictPtr(svc)
    return own is NULL or own[0] is NULL or PyDict_GetItemWithError(own[0], name) is NULL


cdef inline long long now_ms() noexcept nogil:
    """time.time_ns() // 1_000_000."""
    cdef timespec ts
    clock_gettime(CLOCK_REALTIME, &ts)
    return <long long>ts.tv_sec * 1000 + ts.tv_nsec // 1000000


cdef enum:
    MAX_STACK = 64  # offsets of a record taken on the stack; more in a block of their own


cdef enum:
    RUN = 0  # the offsets are start, start + 1, ...: an offset's entry is its distance
    SORTED = 1  # strictly ascending: found by bisection
    ANY = 2  # any order, repeats: every entry compared


cdef class Pending:
    """``_Pending``: an unsettled checkpoint; its offsets in one C array with
    an acked flag each and the count of entries not acked (a checkpoint's
    offsets may repeat: an offset acked flags all its entries, so none left
    is the twin's empty set)."""

    cdef object _ck  # the PopCheckPoint; None until asked for when filed from its fields
    cdef tuple _fields  # (topic, cid, queue_id, start_offset, pop_time, invisible, broker_name)
    cdef readonly object revive_qid
    cdef readonly object record_offset
    cdef readonly bint via_timer
    cdef int64_t *offs
    cdef unsigned char *acked
    cdef Py_ssize_t n
    cdef Py_ssize_t left_n
    cdef int shape
    cdef int64_t end  # one past the highest offset (n > 0)

    def __init__(self, ck, revive_qid, record_offset, bint via_timer=False):
        self._init(ck, revive_qid, record_offset, via_timer, ck.start_offset, ck.offset_diffs)

    def __dealloc__(self):
        PyMem_Free(self.offs)

    @property
    def ck(self):
        """The checkpoint (made from its fields the first time when it was
        filed without one: a pop's, of no bit map, revive offset or reput
        times)."""
        cdef Py_ssize_t i
        cdef int64_t so
        if self._ck is None:
            topic, cid, queue_id, start_offset, pop_time, invisible, bn = self._fields
            so = start_offset
            self._ck = _CK(topic, cid, queue_id, start_offset, pop_time, invisible,
                           [self.offs[i] - so for i in range(self.n)], bn)
        return self._ck

    cdef int _init(self, object ck, object revive_qid, object record_offset, bint via_timer,
                   object start_offset, object diffs) except -1:
        """The offsets ``start_offset`` + each of ``diffs``."""
        cdef Py_ssize_t n = len(diffs)
        cdef Py_ssize_t i
        cdef int64_t so, d
        try:
            so = start_offset
        except OverflowError:
            raise ValueError(f"checkpoint start offset {start_offset} out of range") from None
        self._alloc(n)
        i = 0
        for item in diffs:
            if i == n:
                raise RuntimeError("offset_diffs changed size")
            try:
                d = item
            except OverflowError:
                raise ValueError(f"checkpoint offset {start_offset + item} out of range") \
                    from None
            if (d > 0 and so > INT64_MAX - d) or (d < 0 and so < INT64_MIN - d):
                raise ValueError(f"checkpoint offset {start_offset + item} out of range")
            self.offs[i] = so + d
            i += 1
        if i != n:
            raise RuntimeError("offset_diffs changed size")
        return self._taken(n, ck, revive_qid, record_offset, via_timer)

    cdef int _init_arr(self, object revive_qid, object record_offset, const int64_t *src,
                       Py_ssize_t n) except -1:
        """``_init`` of the absolute offsets ``src[:n]`` (no checkpoint yet)."""
        self._alloc(n)
        if n:
            memcpy(self.offs, src, n * sizeof(int64_t))
        return self._taken(n, None, revive_qid, record_offset, False)

    cdef int _alloc(self, Py_ssize_t n) except -1:
        """Room for ``n`` offsets and their flags (any earlier ones freed)."""
        PyMem_Free(self.offs)
        self.offs = NULL
        self.n = self.left_n = 0
        if n:
            self.offs = <int64_t *>PyMem_Malloc(n * (sizeof(int64_t) + 1))
            if self.offs is NULL:
                raise MemoryError()
            self.acked = <unsigned char *>(self.offs + n)
        return 0

    cdef int _taken(self, Py_ssize_t n, object ck, object revive_qid, object record_offset,
                    bint via_timer) except -1:
        """The ``n`` offsets written to ``offs`` kept: none acked, their
        shape and end found; the entry's other fields."""
        cdef Py_ssize_t i = 1
        cdef int64_t o, top = 0
        cdef int shape = RUN
        if n:
            memset(self.acked, 0, n)
            top = self.offs[0]
            # a run (a pop's offsets mostly are) in one tight pass: its top the last
            while i < n and self.offs[i] == top + i:
                i += 1
            if i == n:
                top += n - 1
            else:
                shape = SORTED
                for i in range(n):
                    o = self.offs[i]
                    if shape == SORTED and i and o <= self.offs[i - 1]:
                        shape = ANY
                    if o > top:
                        top = o
        self.n = self.left_n = n
        self.shape = shape
        self.end = top + 1 if n else 0
        self._ck = ck
        self.revive_qid = revive_qid
        self.record_offset = record_offset
        self.via_timer = via_timer
        return 0

    cdef bint ack_arr(self, const int64_t *offs, Py_ssize_t n) noexcept:
        """``ack`` of the offsets ``offs[:n]`` (of a run: each one's entry
        found at its distance from the first, in one loop)."""
        cdef Py_ssize_t i
        cdef int64_t first, o
        if self.shape != RUN or not self.n:
            for i in range(n):
                self._cross(offs[i])
            return self.left_n == 0
        first = self.offs[0]
        if n == self.n:  # the whole run acked (a batch ack of a pop's): flagged at once
            i = 0
            while i < n and offs[i] == first + i:
                i += 1
            if i == n:
                memset(self.acked, 1, n)
                self.left_n = 0
                return True
        for i in range(n):
            o = offs[i]
            if o >= first and o - first < self.n:
                self._flag(<Py_ssize_t>(o - first))
        return self.left_n == 0

    @property
    def left(self):
        """The offsets not acked yet."""
        cdef Py_ssize_t i
        return {self.offs[i] for i in range(self.n) if not self.acked[i]}

    @cython.final
    cdef inline void _flag(self, Py_ssize_t i) noexcept:
        if not self.acked[i]:
            self.acked[i] = 1
            self.left_n -= 1

    @cython.final
    cdef inline void _cross(self, int64_t o) noexcept:
        """Flag the entries of offset ``o``."""
        cdef Py_ssize_t i, lo, hi, mid
        if self.shape == RUN:
            if self.n and o >= self.offs[0] and o - self.offs[0] < self.n:
                self._flag(<Py_ssize_t>(o - self.offs[0]))
        elif self.shape == SORTED:
            lo = 0
            hi = self.n
            while lo < hi:
                mid = (lo + hi) >> 1
                if self.offs[mid] < o:
                    lo = mid + 1
                else:
                    hi = mid
            if lo < self.n and self.offs[lo] == o:
                self._flag(lo)
        else:
            for i in range(self.n):
                if self.offs[i] == o:
                    self._flag(i)

    cpdef bint ack(self, object offsets) except -1:
        """Cross ``offsets`` off (any not among the checkpoint's: ignored);
        True once none of the checkpoint's is left."""
        cdef int64_t o
        cdef Py_ssize_t i
        for item in offsets:
            if type(item) is int:
                try:
                    o = item
                except OverflowError:
                    continue  # beyond every offset kept
                self._cross(o)
            else:  # a number of another type: equal as a set member would be
                for i in range(self.n):
                    if not self.acked[i] and item == self.offs[i]:
                        o = self.offs[i]
                        self._cross(o)
        return self.left_n == 0

    def unacked(self):
        """The offsets not acked, in the checkpoint's order."""
        cdef Py_ssize_t i
        return [self.offs[i] for i in range(self.n) if not self.acked[i]]



cpdef write_now(object svc, object qid, object record):
    """``PopReviveService.write_now``: True once stored and applied, None with
    nothing done when the general way must store the record."""
    if not _bound:
        raise RuntimeError("pop_revive.bind was not called")
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
    offset = put_record(svc, qid, body, tag, code)
    if offset is None:
        return None
    written(svc, qid, record, offset)
    return True


cpdef write_ck_now(object svc, object qid, str topic, str cid, object queue_id,
                   object start_offset, object pop_time, object invisible, list offsets,
                   object broker_name):
    """``PopReviveService.write_ck_now``: ``write_now`` of a pop's checkpoint
    of ``offsets`` made from its fields, without the PopCheckPoint (the
    pending entry makes it when asked for): the offsets taken into a C array
    here, then ``write_ck_arr``."""
    cdef int64_t room[MAX_STACK]
    cdef int64_t *offs = room
    cdef int64_t so
    cdef Py_ssize_t n = len(offsets)
    if not _bound:
        raise RuntimeError("pop_revive.bind was not called")
    try:
        so = start_offset
    except OverflowError:
        raise ValueError(f"checkpoint start offset {start_offset} out of range") from None
    if n > MAX_STACK:
        offs = <int64_t *>PyMem_Malloc(n * sizeof(int64_t))
        if offs is NULL:
            raise MemoryError()
    try:
        offsets_into(offsets, offs, n, so)
        return write_ck_arr(svc, qid, topic, cid, queue_id, start_offset, pop_time, invisible,
                            offs, n, broker_name, False)
    finally:
        if offs is not room:
            PyMem_Free(offs)


cdef int offsets_into(list offsets, int64_t *out, Py_ssize_t n, int64_t so) except -1:
    """The ``n`` items of ``offsets`` into ``out``: each an int whose
    difference from ``so`` stays within 64 bits (a checkpoint's diff), else
    ValueError."""
    cdef Py_ssize_t i
    cdef int64_t o
    if len(offsets) != n:
        raise RuntimeError("offsets changed size")
    for i in range(n):
        item = offsets[i]
        try:
            o = item
        except OverflowError:
            raise ValueError(f"checkpoint offset {item} out of range") from None
        if (so > 0 and o < INT64_MIN + so) or (so < 0 and o > INT64_MAX + so):
            raise ValueError(f"checkpoint offset {item} out of range")
        out[i] = o
    return 0


cdef object write_ck_arr(object svc, object qid, str topic, str cid, object queue_id,
                         object start_offset, object pop_time, object invisible,
                         const int64_t *offs, Py_ssize_t n, object broker_name,
                         bint commits):
    """``write_ck_now`` of the offsets ``offs[:n]``, each of a difference
    from ``start_offset`` within 64 bits (the caller's word): the record
    stored and its pending entry filed.  ``commits``: the caller moves the
    group's offset past these offsets (and on) itself right after, so the
    filing leaves it (a compiled pop's queue: the same offset in the end)."""
    if not _bound:
        raise RuntimeError("pop_revive.bind was not called")
    body = ck_body_arr(broker_name, cid, offs, n, invisible, pop_time, queue_id, start_offset,
                       topic)
    tag, code = _TAGS[0]
    offset = put_record(svc, qid, body, tag, code)
    if offset is None:
        return None
    if not mark_read(svc, qid, offset):
        return True
    key = merge_key(topic, cid, queue_id, start_offset, pop_time, broker_name)
    pending = sfield(svc, S_PENDING)
    due = pop_time + invisible
    cdef Pending entry
    if key not in pending:
        entry = Pending.__new__(Pending)
        entry._init_arr(qid, offset, offs, n)
        entry._fields = (topic, cid, queue_id, start_offset, pop_time, invisible, broker_name)
        file_ck(svc, pending, entry, key, cid, topic, queue_id, due, not commits)
    if due < sfield(svc, S_NEXT_WAKE):
        sfield(svc, S_WAKE).set()
    return True


cpdef write_ack_now(object svc, object qid, str topic, str group, object queue_id,
                    object start_offset, object pop_time, object broker_name, list offsets):
    """``PopReviveService.write_ack_now``: ``write_now`` of the ack record
    AckMsg(topic, group, queue_id, start_offset, pop_time, broker_name,
    offsets), without the AckMsg: its body written from the list (its
    numbers as a client sent them), then ``ack_written`` of the offsets in a
    C array (one that no checkpoint can hold, beyond 64 bits, left out)."""
    cdef int64_t room[MAX_STACK]
    cdef int64_t *offs = room
    cdef Py_ssize_t i, n = len(offsets), kept = 0
    cdef int64_t o
    if not _bound:
        raise RuntimeError("pop_revive.bind was not called")
    body = ack_body(offsets, broker_name, group, pop_time, queue_id, start_offset, topic)
    if n > MAX_STACK:
        offs = <int64_t *>PyMem_Malloc(n * sizeof(int64_t))
        if offs is NULL:
            raise MemoryError()
    try:
        for i in range(min(n, len(offsets))):
            item = offsets[i]
            if type(item) is not int:  # a number of another type: compared as a set would
                return ack_written(svc, qid, body, n, topic, group, queue_id, start_offset,
                                   pop_time, broker_name, offsets, NULL, 0)
            try:
                o = item
            except OverflowError:
                continue  # beyond every offset kept
            offs[kept] = o
            kept += 1
        return ack_written(svc, qid, body, n, topic, group, queue_id, start_offset, pop_time,
                           broker_name, None, offs, kept)
    finally:
        if offs is not room:
            PyMem_Free(offs)


cdef object write_ack_arr(object svc, object qid, str topic, str group, object queue_id,
                          object start_offset, object pop_time, object broker_name,
                          const int64_t *offs, Py_ssize_t n):
    """``write_ack_now`` of the offsets ``offs[:n]``, without their list."""
    if not _bound:
        raise RuntimeError("pop_revive.bind was not called")
    body = ack_body_arr(offs, n, broker_name, group, pop_time, queue_id, start_offset, topic)
    return ack_written(svc, qid, body, n, topic, group, queue_id, start_offset, pop_time,
                       broker_name, None, offs, n)


cdef object ack_written(object svc, object qid, bytes body, Py_ssize_t count, str topic,
                        str group, object queue_id, object start_offset, object pop_time,
                        object broker_name, list offsets, const int64_t *offs, Py_ssize_t n):
    """An ack record of ``body`` (of ``count`` offsets) stored and its
    offsets -- ``offs[:n]``, or ``offsets`` when not None -- crossed off its
    pending checkpoint."""
    cdef Py_ssize_t i
    tag, code = _TAGS[1] if count == 1 else _TAGS[2]
    offset = put_record(svc, qid, body, tag, code)
    if offset is None:
        return None
    if not mark_read(svc, qid, offset):
        return True
    key = merge_key(topic, group, queue_id, start_offset, pop_time, broker_name)
    if offsets is not None:
        cross_off(svc, key, offsets)
        return True
    cdef dict pending = sfield(svc, S_PENDING)
    entry = pending.get(key)
    if entry is None:
        return True
    if type(entry) is Pending:
        if (<Pending>entry).ack_arr(offs, n):
            settle(svc, pending, key)
    elif entry.ack([offs[i] for i in range(n)]):
        settle(svc, pending, key)
    return True


# The store config's fields ``put_record`` reads each record (they change at
# runtime: updateBrokerConfig) at their slots, for the last config class met
cdef ClassOffsets _CFG = ClassOffsets(("flushDiskType", "brokerRole", "timerWheelEnable"))


cdef object put_record(object svc, object qid, bytes body, str tag, object code):
    """``put_at_once`` of a record's body: its queue offset, None with
    nothing done (under SYNC_FLUSH too: the general way waits for the
    group commit).  Its callers checked ``bind``."""
    store = sfield(svc, S_STORE)
    cfg = config_of(store)
    # (the offsets in locals: an attribute read may run code that walks other classes)
    cdef Py_ssize_t at[3]
    _CFG.copy(cfg, at)
    if slot_or_attr(cfg, at[0], "flushDiskType") is _SYNC_FLUSH:
        return None
    cdef long long now = now_ms()
    topic = sfield(svc, S_TOPIC)
    if slot_or_attr(cfg, at[1], "brokerRole") is _SYNC_MASTER or \
            not slot_or_attr(cfg, at[2], "timerWheelEnable") or \
            not PyUnicode_IS_ASCII(<str>topic):
        return None
    global _TOPIC, _TOPIC_B
    if topic is not _TOPIC:  # the revive topic: encoded once
        _TOPIC_B = (<str>topic).encode()
        _TOPIC = topic
    cdef int64_t phy
    cdef Py_ssize_t size
    cdef long long qoff = put_one(store, topic, _TOPIC_B, qid, 0, body, None, None,
                                  record_props(now, tag), code, 0, now, None, 0, &phy, &size)
    if qoff < 0:
        return None
    return qoff


cdef str record_props(long long now, str tag):
    """A record's properties, ``f"{_PROPS_HEAD}{now}{_TAGS_KEY}{tag}"``,
    written straight into one string (the f-string formats ``now`` into a
    string of its own first, then joins): ``bind`` checked that the keys and
    the tags (``tag`` is one) are ASCII."""
    cdef char digits[24]
    cdef Py_ssize_t hl = PyUnicode_GET_LENGTH(_PROPS_HEAD)
    cdef Py_ssize_t kl = PyUnicode_GET_LENGTH(_TAGS_KEY)
    cdef Py_ssize_t tl = PyUnicode_GET_LENGTH(tag)
    cdef Py_ssize_t dl = <char *>json_write_int(<uint8_t *>digits, now) - digits
    if not PyUnicode_IS_ASCII(tag):
        raise ValueError("a revive record's tag must be ASCII")
    props = PyUnicode_New(hl + dl + kl + tl, 127)
    cdef char *o = <char *>PyUnicode_DATA(props)
    memcpy(o, PyUnicode_DATA(_PROPS_HEAD), hl)
    memcpy(o + hl, digits, dl)
    memcpy(o + hl + dl, PyUnicode_DATA(_TAGS_KEY), kl)
    memcpy(o + hl + dl + kl, PyUnicode_DATA(tag), tl)
    return props


cdef inline bint long_of(object v, long long *out) except -1:
    """An exact int that fits a long long into ``out``: True; else False."""
    cdef int ovf = 0
    if type(v) is not int:
        return False
    out[0] = PyLong_AsLongLongAndOverflow(v, &ovf)
    return not ovf


# The last key ``merge_key`` wrote and what it wrote it of: a pop's checkpoint
# and the ack that follows it name the same one, which the ack then takes
# (its hash computed already, at the checkpoint's filing) instead of writing
# and hashing a new string of some sixty characters.
cdef str _mk_key = None
cdef str _mk_topic = None
cdef str _mk_group = None
cdef object _mk_broker = None
cdef long long _mk_q, _mk_so, _mk_pt


cdef inline bint ascii_same(str a, str b) noexcept:
    """Two ASCII strings of the same text."""
    cdef Py_ssize_t n = PyUnicode_GET_LENGTH(a)
    return a is b or (n == PyUnicode_GET_LENGTH(b) and
                      memcmp(PyUnicode_DATA(a), PyUnicode_DATA(b), n) == 0)


cdef str merge_key(object topic, object group, object queue_id, object start_offset,
                   object pop_time, object broker_name):
    """``pop_records.merge_key``: ASCII names and numbers of a long written
    straight into the key's text (or the last key when of the same names and
    numbers); anything else by the f-string."""
    global _mk_key, _mk_topic, _mk_group, _mk_broker, _mk_q, _mk_so, _mk_pt
    cdef long long q, so, pt
    cdef char digits[60]
    cdef Py_ssize_t dl, tl, gl, bl, n
    cdef char *o
    if type(topic) is str and type(group) is str and PyUnicode_IS_ASCII(topic) and \
            PyUnicode_IS_ASCII(group) and (broker_name is None or (
                type(broker_name) is str and PyUnicode_IS_ASCII(broker_name))) and \
            long_of(queue_id, &q) and long_of(start_offset, &so) and long_of(pop_time, &pt):
        if _mk_key is not None and q == _mk_q and so == _mk_so and pt == _mk_pt and \
                ascii_same(topic, _mk_topic) and ascii_same(group, _mk_group) and (
                    broker_name is _mk_broker or (broker_name is not None and
                                                  _mk_broker is not None and
                                                  ascii_same(broker_name, _mk_broker))):
            return _mk_key
        o = <char *>json_write_int(<uint8_t *>digits, q)
        o = <char *>json_write_int(<uint8_t *>o, so)
        dl = <char *>json_write_int(<uint8_t *>o, pt) - digits
        tl = PyUnicode_GET_LENGTH(topic)
        gl = PyUnicode_GET_LENGTH(group)
        bl = 4 if broker_name is None else PyUnicode_GET_LENGTH(broker_name)
        key = PyUnicode_New(tl + gl + dl + bl, 127)
        o = <char *>PyUnicode_DATA(key)
        memcpy(o, PyUnicode_DATA(topic), tl)
        n = tl
        memcpy(o + n, PyUnicode_DATA(group), gl)
        n += gl
        memcpy(o + n, digits, dl)
        n += dl
        if broker_name is None:
            memcpy(o + n, b"None", 4)
        else:
            memcpy(o + n, PyUnicode_DATA(broker_name), bl)
        _mk_key, _mk_topic, _mk_group, _mk_broker = key, topic, group, broker_name
        _mk_q, _mk_so, _mk_pt = q, so, pt
        return key
    return f"{topic}{group}{queue_id}{start_offset}{pop_time}{broker_name}"


cpdef written(object svc, object qid, object record, object offset):
    """Apply a record this broker stored at ``offset`` of revive queue ``qid``."""
    if not _bound:
        raise RuntimeError("pop_revive.bind was not called")
    if not mark_read(svc, qid, offset):
        return
    if isinstance(record, _CK):
        add_ck(svc, record, qid, offset)
        if record.pop_time + record.invisible_time < sfield(svc, S_NEXT_WAKE):
            sfield(svc, S_WAKE).set()
    else:
        apply_ack(svc, record)


cdef bint mark_read(object svc, object qid, object offset) except -1:
    """``_written``'s read offset: False when the record at ``offset`` was
    read back (and applied) already; else it is marked read or applied."""
    cdef dict read_offsets = sfield(svc, S_READ)
    read = read_offsets.get(qid, 0)
    if offset < read:
        return False
    if offset == read and sfield(svc, S_LOADED):
        read_offsets[qid] = offset + 1
    else:
        (<dict?>sfield(svc, S_APPLIED)).setdefault(qid, set()).add(offset)
    return True


cpdef add_ck(object svc, object ck, object qid, object record_offset, bint via_timer=False):
    """A checkpoint pending, and the group's offset past its messages."""
    topic = ck.topic
    cid = ck.cid
    queue_id = ck.queue_id
    so = ck.start_offset
    pop_time = ck.pop_time
    key = merge_key(topic, cid, queue_id, so, pop_time, ck.broker_name)
    pending = sfield(svc, S_PENDING)
    if key in pending:
        return
    cdef Pending entry = Pending.__new__(Pending)
    entry._init(ck, qid, record_offset, via_timer, so, ck.offset_diffs)
    due = pop_time + ck.invisible_time
    if via_timer:
        due = due + _GRACE
    file_ck(svc, pending, entry, key, cid, topic, queue_id, due)


cdef inline int set_item(object mapping, object key, object value) except -1:
    """``mapping[key] = value`` (a dict's without the mapping protocol)."""
    if type(mapping) is dict:
        return PyDict_SetItem(mapping, key, value)
    mapping[key] = value
    return 0


cdef file_ck(object svc, object pending, Pending entry, str key, object cid, object topic,
             object queue_id, object due, bint commit=True):
    """``entry`` in ``pending`` (the service's map), its queue's map and on
    the heap at ``due``; with ``commit``, the group's offset past its
    messages."""
    set_item(pending, key, entry)
    by_queue = sfield(svc, S_BY_QUEUE)
    queue = (<dict>by_queue).get(entry.revive_qid) if type(by_queue) is dict else \
        by_queue.get(entry.revive_qid)
    if queue is None:  # (setdefault would make a map for every checkpoint)
        queue = {}
        set_item(by_queue, entry.revive_qid, queue)
    set_item(queue, key, entry)
    seq = sfield(svc, S_SEQ) + 1
    set_sfield(svc, S_SEQ, seq)
    heappush(sfield(svc, S_HEAP), (due, seq, key))
    if not entry.n or not commit:
        return
    com = sfield(svc, S_C).consumer_offset_manager
    last = entry.end
    queues = offsets_of(com, cid, topic)  # (found once for the query and the commit)
    if offset_in(com, queues, cid, topic, queue_id) < last:
        commit_in(com, queues, "PopReviveService", cid, topic, queue_id, last)


cpdef apply_ack(object svc, object ack):
    """The ack's offsets off its pending checkpoint, settled once none is left."""
    cross_off(svc, merge_key(ack.topic, ack.group, ack.queue_id, ack.start_offset,
                             ack.pop_time, ack.broker_name), ack.offsets)


cdef cross_off(object svc, str key, object offsets):
    """``offsets`` off the pending checkpoint of ``key``, settled once none is left."""
    cdef dict pending = sfield(svc, S_PENDING)
    entry = pending.get(key)
    if entry is None:
        return
    if (<Pending>entry).ack(offsets) if type(entry) is Pending else entry.ack(offsets):
        settle(svc, pending, key)


cdef settle(object svc, dict pending, str key):
    """``PopReviveService._settle`` (``pending``: its map)."""
    entry = pending.pop(key, None)
    if entry is None:
        return
    qid = (<Pending>entry).revive_qid if type(entry) is Pending else entry.revive_qid
    queue = (<dict?>sfield(svc, S_BY_QUEUE)).get(qid)
    if queue is not None:
        (<dict?>queue).pop(key, None)
    for cb in sfield(svc, S_ON_SETTLED):
        cb(entry.ck)
