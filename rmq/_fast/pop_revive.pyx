# cython: language_level=3
"""Compiled twins of ``_Pending``, ``_write_now``, ``_written``, ``_add_ck``
and ``_apply_ack`` in rmq/broker/pop_revive.py: each revive record a pop or
an ack writes -- its body, its append through the store's one-record session
and its bookkeeping (the service's maps, its heap, the read offset and the
group's offset, the pending checkpoint's offsets in a C array) -- step for
step, without the interpreter's frames.  The classes, enum members and names
of the layers above are handed over by ``bind``.
"""

from heapq import heappush

from cpython.mem cimport PyMem_Free, PyMem_Malloc
from libc.stdint cimport INT64_MAX, INT64_MIN, int64_t

from posix.time cimport CLOCK_REALTIME, clock_gettime, timespec

from rmq._fast.offset_table cimport commit_offset, query_offset
from rmq._fast.pop_records import ack_body, ck_body
from rmq._fast.store_put import put_single

cdef object _CK = None
cdef object _GRACE = 0
cdef object _SYNC_FLUSH = None
cdef object _SYNC_MASTER = None
cdef tuple _TAGS = None  # (tag, tagsCode) of a checkpoint, an ack, a batch ack
cdef str _PROPS_HEAD = None  # TIMER_DELIVER_MS's key and separator
cdef str _TAGS_KEY = None  # the separator and TAGS's key
cdef bint _bound = False


def bind(ck_type: type, grace_ms: int, sync_flush: object, sync_master: object,
         tags: tuple, timer_deliver_key: str, tags_key: str) -> None:
    """PopCheckPoint, the grace of a checkpoint the timer wrote,
    FlushDiskType.SYNC_FLUSH, BrokerRole.SYNC_MASTER, ((tag, tagsCode) of a
    checkpoint, an ack, a batch ack) and the two property keys of a record."""
    global _CK, _GRACE, _SYNC_FLUSH, _SYNC_MASTER, _TAGS, _PROPS_HEAD, _TAGS_KEY
    global _bound
    _CK = ck_type
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


cdef enum:
    RUN = 0  # the offsets are start, start + 1, ...: an offset's entry is its distance
    SORTED = 1  # strictly ascending: found by bisection
    ANY = 2  # any order, repeats: every entry compared


cdef class Pending:
    """``_Pending``: an unsettled checkpoint; its offsets in one C array with
    an acked flag each and the count of entries not acked (a checkpoint's
    offsets may repeat: an offset acked flags all its entries, so none left
    is the twin's empty set)."""

    cdef readonly object ck
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

    cdef int _init(self, object ck, object revive_qid, object record_offset, bint via_timer,
                   object start_offset, object diffs) except -1:
        cdef Py_ssize_t n = len(diffs)
        cdef Py_ssize_t i
        cdef int64_t so, d, o, top = 0
        cdef int shape = RUN
        try:
            so = start_offset
        except OverflowError:
            raise ValueError(f"checkpoint start offset {start_offset} out of range") from None
        PyMem_Free(self.offs)
        self.offs = NULL
        self.n = self.left_n = 0
        if n:
            self.offs = <int64_t *>PyMem_Malloc(n * (sizeof(int64_t) + 1))
            if self.offs is NULL:
                raise MemoryError()
            self.acked = <unsigned char *>(self.offs + n)
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
            o = so + d
            if shape == RUN and o != so + i:
                shape = SORTED
            if shape == SORTED and i and o <= self.offs[i - 1]:
                shape = ANY
            if i == 0 or o > top:
                top = o
            self.offs[i] = o
            self.acked[i] = 0
            i += 1
        if i != n:
            raise RuntimeError("offset_diffs changed size")
        self.n = self.left_n = n
        self.shape = shape
        self.end = top + 1 if n else 0
        self.ck = ck
        self.revive_qid = revive_qid
        self.record_offset = record_offset
        self.via_timer = via_timer
        return 0

    @property
    def left(self):
        """The offsets not acked yet."""
        cdef Py_ssize_t i
        return {self.offs[i] for i in range(self.n) if not self.acked[i]}

    cdef inline void _flag(self, Py_ssize_t i) noexcept:
        if not self.acked[i]:
            self.acked[i] = 1
            self.left_n -= 1

    cdef void _cross(self, int64_t o) noexcept:
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
    cdef Pending entry = Pending.__new__(Pending)
    entry._init(ck, qid, record_offset, via_timer, so, ck.offset_diffs)
    pending[key] = entry
    svc.by_queue.setdefault(qid, {})[key] = entry
    seq = svc._seq + 1
    svc._seq = seq
    due = pop_time + ck.invisible_time
    if via_timer:
        due = due + _GRACE
    heappush(svc.heap, (due, seq, key))
    if not entry.n:
        return
    com = svc.c.consumer_offset_manager
    last = entry.end
    if query_offset(com, cid, topic, queue_id) < last:
        commit_offset(com, "PopReviveService", cid, topic, queue_id, last)


cpdef apply_ack(object svc, object ack):
    """The ack's offsets off its pending checkpoint, settled once none is left."""
    key = merge_key(ack.topic, ack.group, ack.queue_id, ack.start_offset, ack.pop_time,
                    ack.broker_name)
    entry = svc.pending.get(key)
    if entry is None:
        return
    if (<Pending>entry).ack(ack.offsets) if type(entry) is Pending else entry.ack(ack.offsets):
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
