# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Compiled twins of ``append_single`` and ``put_single`` in rmq/store/single_put.py.

``append_single``: one call writes a single send's commit-log record
(STORE_FORMAT.md 2), its consume-queue entry (STORE_FORMAT.md 5) and returns
the offset message id: the three steps the general put makes through three
Python-level calls and two result objects.  Every size is checked against the
limits and both buffers before the first byte is written; ``None`` means
"nothing written, take the general path".

``put_single``: the whole one-record append session (the checks and locks of
``CommitLog.open_run``, the queue's tail, the append, the published
positions, statistics, arrival notice and flush wake-up) in one call, with
no session or queue objects: a pop's checkpoint and an ack's record (and the
timer's delivery) each take one.  The store's enum members it compares with
are handed over by ``bind`` (rmq.store is a layer above this package).
"""

import _thread
import logging
from types import MemberDescriptorType, MethodType

from cpython.buffer cimport PyBUF_SIMPLE, PyBUF_WRITABLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.dict cimport PyDict_DelItem, PyDict_GetItemWithError
from cpython.pythread cimport PY_LOCK_ACQUIRED, PyThread_acquire_lock, PyThread_release_lock
from cpython.pythread cimport PyThread_type_lock
from cpython.object cimport PyObject
from cpython.tuple cimport PyTuple_GET_ITEM
from cpython.weakref cimport PyWeakref_GetObject, PyWeakref_NewRef
from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t, uint64_t
from rmq._fast.arrival cimport arrive
from rmq._fast.byteorder cimport put32, put64
from rmq._fast.known_hash cimport dict_get_known, dict_set_known
from rmq._fast.record cimport c_write_record, direct_tail_of
from rmq._fast.slots cimport set_slot_or_attr, slot_offset, slot_offsets, slot_or_attr
from rmq._fast.store_stats cimport PutCounters, counters_of
from libc.string cimport memcpy
from posix.time cimport CLOCK_REALTIME, clock_gettime, timespec

from rmq._fast.arrival import on_message_arriving
from rmq.common.topics import SCHEDULE_TOPIC as _SCHEDULE_TOPIC

cdef str SCHEDULE_TOPIC = _SCHEDULE_TOPIC  # (not a module lookup a put)


cdef extern from "Python.h":
    object PyUnicode_New(Py_ssize_t size, Py_UCS4 maxchar)
    void *PyUnicode_DATA(object o)
    int PyUnicode_IS_ASCII(object o)
    Py_ssize_t PyUnicode_GET_LENGTH(object o)

cdef const char *HEX = b"0123456789ABCDEF"


cdef str msg_id(str host_hex, int64_t phy):
    """host hex + the offset as 16 upper-case hex digits (two's complement)."""
    cdef Py_ssize_t hl = PyUnicode_GET_LENGTH(host_hex)
    out = PyUnicode_New(hl + 16, 127)
    cdef char *o = <char *>PyUnicode_DATA(out)
    memcpy(o, PyUnicode_DATA(host_hex), hl)
    cdef uint64_t u = <uint64_t>phy
    cdef int i
    for i in range(16):
        o[hl + 15 - i] = HEX[u & 0xF]
        u >>= 4
    return out


cdef Py_ssize_t write_single(object buf, Py_ssize_t pos, Py_ssize_t limit,
                              Py_ssize_t max_body, int queue_id, int flag,
                              long long queue_offset, long long phy, int sys_flag,
                              long long born_ts, bytes born_host, long long store_ts,
                              bytes store_host, int reconsume, object body, bytes topic,
                              str props, object cq_buf, Py_ssize_t cq_pos,
                              long long tags_code) except -2:
    """The record's size, or -1 when the record is too big, does not end by
    ``limit`` or a field is too long (nothing written)."""
    cdef bytes props_b = None
    cdef const uint8_t *pp
    cdef Py_ssize_t plen
    if PyUnicode_IS_ASCII(props):
        pp = <const uint8_t *>PyUnicode_DATA(props)
        plen = PyUnicode_GET_LENGTH(props)
    else:
        props_b = props.encode("utf-8")
        pp = <const uint8_t *>PyBytes_AS_STRING(props_b)
        plen = PyBytes_GET_SIZE(props_b)
    cdef Py_ssize_t tlen = PyBytes_GET_SIZE(topic)
    cdef Py_ssize_t blen = PyBytes_GET_SIZE(born_host)
    cdef Py_ssize_t slen = PyBytes_GET_SIZE(store_host)
    if blen != (20 if sys_flag & 0x10 else 8) or slen != (20 if sys_flag & 0x20 else 8):
        raise ValueError("host field length does not match the sysFlag")
    if tlen > 127 or plen > 32767:
        return -1
    cdef Py_buffer bv, ov, cv
    cdef const uint8_t *bp
    cdef const uint8_t *sp
    cdef const uint8_t *tp
    PyObject_GetBuffer(body, &bv, PyBUF_SIMPLE)
    cdef Py_ssize_t size = (4 + 4 + 4 + 4 + 4 + 8 + 8 + 4 + 8 + blen + 8 + slen + 4 + 8 + 4
                            + bv.len + 1 + tlen + 2 + plen)
    try:
        if bv.len > max_body or size > max_body + 65536 or pos < 0 or pos + size > limit:
            return -1
        PyObject_GetBuffer(buf, &ov, PyBUF_WRITABLE)
        try:
            PyObject_GetBuffer(cq_buf, &cv, PyBUF_WRITABLE)
            try:
                if pos + size > ov.len or cq_pos < 0 or cq_pos + 20 > cv.len:
                    raise ValueError("record or consume queue entry out of range")
                bp = <const uint8_t *>PyBytes_AS_STRING(born_host)
                sp = <const uint8_t *>PyBytes_AS_STRING(store_host)
                tp = <const uint8_t *>PyBytes_AS_STRING(topic)
                # (with the GIL: releasing it costs more than writing a record)
                c_write_record(<uint8_t *>ov.buf + pos, queue_id, flag, queue_offset, phy,
                               sys_flag, born_ts, bp, blen, store_ts, sp, slen, reconsume,
                               0, <const uint8_t *>bv.buf, bv.len, tp, tlen, pp, plen)
                put64(<uint8_t *>cv.buf + cq_pos, phy)
                put32(<uint8_t *>cv.buf + cq_pos + 8, <int32_t>size)
                put64(<uint8_t *>cv.buf + cq_pos + 12, tags_code)
            finally:
                PyBuffer_Release(&cv)
        finally:
            PyBuffer_Release(&ov)
    finally:
        PyBuffer_Release(&bv)
    return size


cdef object c_append_single(object buf, Py_ssize_t pos, Py_ssize_t limit, Py_ssize_t max_body,
                            int queue_id, int flag, long long queue_offset, long long phy,
                            int sys_flag, long long born_ts, bytes born_host, long long store_ts,
                            bytes store_host, int reconsume, object body, bytes topic, str props,
                            object cq_buf, Py_ssize_t cq_pos, long long tags_code, str host_hex):
    """(record size, offset message id), or None when the record is too big,
    does not end by ``limit`` or a field is too long (nothing written)."""
    if not PyUnicode_IS_ASCII(host_hex):
        raise ValueError("host hex must be ASCII")
    cdef Py_ssize_t size = write_single(buf, pos, limit, max_body, queue_id, flag, queue_offset,
                                        phy, sys_flag, born_ts, born_host, store_ts, store_host,
                                        reconsume, body, topic, props, cq_buf, cq_pos, tags_code)
    if size < 0:
        return None
    return size, msg_id(host_hex, phy)


def append_single(object buf, Py_ssize_t pos, Py_ssize_t limit, Py_ssize_t max_body,
                  int queue_id, int flag, long long queue_offset, long long phy, int sys_flag,
                  long long born_ts, bytes born_host, long long store_ts, bytes store_host,
                  int reconsume, object body, bytes topic, str props, object cq_buf,
                  Py_ssize_t cq_pos, long long tags_code, str host_hex):
    """(record size, offset message id), or None when the record is too big,
    does not end by ``limit`` or a field is too long (nothing written)."""
    return c_append_single(buf, pos, limit, max_body, queue_id, flag, queue_offset, phy,
                           sys_flag, born_ts, born_host, store_ts, store_host, reconsume, body,
                           topic, props, cq_buf, cq_pos, tags_code, host_hex)


log = logging.getLogger("store")
cdef object _SLAVE = None
cdef object _ASYNC_FLUSH = None
cdef long _NOT_WRITEABLE = -1  # RunningFlags' bits that refuse a write (-1: not known)
cdef long long _ZERO_AHEAD = -1  # CommitLog.zero_ahead's reach (-1: not known)
cdef bint _bound = False


def bind(slave: object, async_flush: object, not_writeable: int | None = None,
         zero_ahead: int | None = None) -> None:
    """The store's BrokerRole.SLAVE and FlushDiskType.ASYNC_FLUSH, which
    ``put_single`` compares with, and (when given) RunningFlags' mask of the
    bits that refuse writes and mapped_file.ZERO_AHEAD, with which it reads
    ``is_writeable`` and the zeros ahead of the append without a call
    (``rmq.store.single_put`` hands them over; left as they were when not
    given)."""
    global _SLAVE, _ASYNC_FLUSH, _NOT_WRITEABLE, _ZERO_AHEAD, _bound
    _SLAVE = slave
    _ASYNC_FLUSH = async_flush
    if not_writeable is not None:
        _NOT_WRITEABLE = not_writeable
    if zero_ahead is not None:
        _ZERO_AHEAD = zero_ahead
    _bound = True


cdef inline int64_t now_ms() noexcept nogil:
    """time.time_ns() // 1_000_000: the store time of a record appended now."""
    cdef timespec ts
    clock_gettime(CLOCK_REALTIME, &ts)
    return <int64_t>ts.tv_sec * 1000 + ts.tv_nsec // 1000000


cdef inline object dict_get(object d, object key, object default):
    """``d.get(key, default)``, without the method call for a plain dict
    (nor PyDict_GetItem's saving and restoring of the error state)."""
    cdef PyObject *found = NULL
    if type(d) is not dict:
        return d.get(key, default)
    found = PyDict_GetItemWithError(d, key)  # (NULL with an error set: raised)
    return default if found == NULL else <object>found


# The fields of a put's MappedFiles (the commit log's tail and the consume
# queue's), ConsumeQueue and StoreCheckpoint read and set at their slots (~140
# instructions each through the attribute protocol; a put reads ten and sets
# seven, and as many of the store, its commit log and config, whose offsets
# ``_Fixed`` keeps), for the last classes met when they are plain slots
# classes; any other object, and an unset slot, through its attributes
# (``slot_or_attr``).
cdef enum:
    KEYS_N = 32  # queue ids whose keys a store keeps (``queue_key``)
    # a MappedFile's fields, in ``_MF``'s order
    MF_FROM = 0
    MF_WROTE = 1
    MF_COMMITTED = 2
    MF_ZEROED = 3
    MF_VIEW = 4
    MF_STAMP = 5
    MF_N = 6
    # a ConsumeQueue's, in ``_CQ``'s
    CQ_EXT = 0
    CQ_TAIL = 1
    CQ_SIZE = 2
    CQ_MAX_PHY = 3
    CQ_N = 4


cdef class ClassOffsets:
    """The slot offsets of some fields (``names``) of the last class met
    (-1: through the attribute); with ``with_dict``, those of a class whose
    instances may also keep a ``__dict__`` too (the slots of its hot
    fields): the store's put, the revive writer and the DLedger leader share
    it.  The offsets of each class met are kept (a few classes): where two
    classes take turns (a DLedger leader's server connections and its
    client connections to the followers, read by the same code) each turn
    copies them rather than looking each field up again."""

    def __cinit__(self, tuple names, bint with_dict=False):
        if len(names) > OFFSETS_MAX:
            raise ValueError("too many fields")
        self.names = names
        self.n = len(names)
        self.with_dict = with_dict
        self.met = {}

    cdef int find(self, object o) except -1:
        """The offsets of the fields of ``o``'s class (``copy`` for a class
        not met last): kept ones, or looked up and kept."""
        cls = type(o)
        cdef object kept = self.met.get(cls)
        cdef Py_ssize_t size = self.n * sizeof(Py_ssize_t)
        if kept is None:
            slot_offsets(cls, self.names, self.at, MemberDescriptorType, self.with_dict)
            if len(self.met) >= CLASSES_KEPT:
                self.met.clear()
            self.met[cls] = PyBytes_FromStringAndSize(<char*>self.at, size)
        else:
            memcpy(self.at, PyBytes_AS_STRING(kept), size)
        self.cls = cls
        return 0


cdef ClassOffsets _MF = ClassOffsets(("file_from_offset", "wrote_position", "committed_position",
                              "zeroed_to", "view", "store_timestamp"))
cdef ClassOffsets _CQ = ClassOffsets(("ext", "tail_file", "file_size", "max_physic_offset"))
cdef ClassOffsets _CK = ClassOffsets(("logics_msg_timestamp",))


# The put and reput locks taken without a Python call (~460 instructions an
# acquire through the method, its arguments parsed): a plain ``_thread.lock``
# and ``_thread.RLock`` whose layout is CPython's (Modules/_threadmodule.c,
# checked by the type's size) are tried at their OS lock as their methods'
# non-blocking first step does, and their bookkeeping fields set as the
# methods set them; when the try fails (another thread holds the lock), for
# another lock and on any error the lock's own method runs.
cdef extern from "pythread.h":
    unsigned long thread_ident "PyThread_get_thread_ident" ()

cdef extern from *:
    """
    typedef struct {
        PyObject_HEAD
        PyThread_type_lock lock_lock;
        PyObject *in_weakreflist;
        char locked;
    } rmq_lock_object;
    typedef struct {
        PyObject_HEAD
        PyThread_type_lock rlock_lock;
        unsigned long rlock_owner;
        unsigned long rlock_count;
        PyObject *in_weakreflist;
    } rmq_rlock_object;
    /* the layouts above are _threadmodule.c's of CPython 3.11 and 3.12 only
       (3.13 on rebuilt the locks; an RLock there may have the same size) */
    #define RMQ_LOCK_LAYOUT_KNOWN (PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030D0000)
    """
    bint RMQ_LOCK_LAYOUT_KNOWN
    ctypedef struct rmq_lock_object:
        PyThread_type_lock lock_lock
        char locked
    ctypedef struct rmq_rlock_object:
        PyThread_type_lock rlock_lock
        unsigned long rlock_owner
        unsigned long rlock_count


cdef inline bint raw_lock(object lock):
    """``lock`` is a ``_thread.lock`` of the layout ``take_locks`` knows."""
    return RMQ_LOCK_LAYOUT_KNOWN and type(lock) is _thread.LockType and \
        type(lock).__basicsize__ == sizeof(rmq_lock_object)


cdef object _RLOCK = _thread.RLock
cdef bint _RLOCK_KNOWN = RMQ_LOCK_LAYOUT_KNOWN and \
    _thread.RLock.__basicsize__ == sizeof(rmq_rlock_object)


cdef bint raw_rlock(object lock) noexcept:
    """``lock`` is a ``_thread.RLock`` of the layout ``take_rlock`` knows."""
    return _RLOCK_KNOWN and type(lock) is _RLOCK


cdef int take_rlock(object lock, bint raw) except -1:
    """``lock.acquire()`` (``raw``: ``raw_rlock(lock)``): at its OS lock when
    free, or held by this thread already, with the fields the method sets;
    else through the method (which waits)."""
    cdef rmq_rlock_object *rk = <rmq_rlock_object *><PyObject *>lock
    cdef unsigned long tid
    if not raw:
        lock.acquire()
        return 0
    tid = thread_ident()
    if rk.rlock_count > 0 and rk.rlock_owner == tid:
        if rk.rlock_count + 1 > rk.rlock_count:
            rk.rlock_count += 1
        else:
            lock.acquire()  # its OverflowError
    elif PyThread_acquire_lock(rk.rlock_lock, 0) == PY_LOCK_ACQUIRED:
        rk.rlock_owner = tid
        rk.rlock_count = 1
    else:
        lock.acquire()
    return 0


cdef int give_rlock(object lock, bint raw) except -1:
    """``lock.release()``, as ``take_rlock`` took it (a lock not held: its
    method raises)."""
    cdef rmq_rlock_object *rk = <rmq_rlock_object *><PyObject *>lock
    if raw and rk.rlock_count > 0 and rk.rlock_owner == thread_ident():
        rk.rlock_count -= 1
        if rk.rlock_count == 0:
            rk.rlock_owner = 0
            PyThread_release_lock(rk.rlock_lock)
    else:
        lock.release()
    return 0


cdef class _Fixed:
    """What ``put_single`` reads of a store that stays for the store's life
    (set when the store and its commit log are made): read once per store,
    not per put."""
    cdef object store_ref  # a weak reference: the store is not kept alive here
    cdef object cfg, cl, ccfg, flags, host_field, id_prefix, listener, flush_service
    cdef object mfq  # the commit log's files (its MappedFileQueue, made with it)
    # the put and reput locks (``take_locks``); the stats' on_put_one, a bound
    # method (no lookup a put; ``counters`` when the stats are the compiled
    # counters: counted without a Python call)
    cdef PutLocks locks
    cdef object on_put_one
    cdef PutCounters counters
    # the listener's controller's stats and listener forms when the listener
    # is the compiled ``on_message_arriving`` bound to it (``arrive`` is then
    # called straight), else None
    cdef object arrival_stats
    cdef list arrival_forms
    # the slot offsets of the config fields read each put (their values change
    # at runtime: updateBrokerConfig), of cfg's and ccfg's classes, of the
    # running flags' bits and of the store's and commit log's hot fields
    cdef Py_ssize_t at_index, at_flush, at_timed, at_role, at_max, at_bits
    cdef Py_ssize_t at_shutdown, at_reput, at_cqt, at_ckpt, at_begin, at_zero, at_tqt
    cdef Py_ssize_t file_size
    cdef bint host_v6
    cdef bint pooled  # a transient store pool's commit service (set when the store is made)
    # the (topic, queue id) key last put to of each queue id below KEYS_N, and
    # its hash (``queue_key``): a revive queue's records reuse theirs; and the
    # topic_queue_table that holds that very key object (``put_one`` puts it
    # there in place of an equal key: the table's lookups of it then match by
    # identity, without comparing the tuples)
    cdef list keys
    cdef list key_tables
    cdef Py_hash_t key_hash[KEYS_N]


cdef _Fixed _fixed = None  # the last store's


cdef tuple queue_key(_Fixed fx, str topic, object qid, int queue_id, Py_hash_t *hash_out):
    """The key (topic, ``qid``) of the commit log's and the stats' queue
    tables and its hash (in ``hash_out``): for a queue id below KEYS_N the
    key this store last put to with it when of the same topic object (the
    tuple made and hashed once, not at each of its table lookups), else a
    new one, then kept."""
    cdef tuple key
    if 0 <= queue_id < KEYS_N:
        key = <tuple>fx.keys[queue_id]
        if key is not None and <object>PyTuple_GET_ITEM(key, 0) is topic:
            hash_out[0] = fx.key_hash[queue_id]
            return key
    key = (topic, qid)
    hash_out[0] = hash(key)
    if 0 <= queue_id < KEYS_N:
        fx.keys[queue_id] = key
        fx.key_hash[queue_id] = hash_out[0]
        fx.key_tables[queue_id] = None
    return key


cdef _Fixed fixed_of(object store):
    """The store's ``_Fixed`` (made anew when another store puts)."""
    global _fixed
    cdef _Fixed f = _fixed
    if f is not None and PyWeakref_GetObject(f.store_ref) == <PyObject *>store:
        return f
    f = _Fixed.__new__(_Fixed)
    f.keys = [None] * KEYS_N
    f.key_tables = [None] * KEYS_N
    f.cfg = cfg = store.config
    f.cl = cl = store.commit_log
    f.ccfg = ccfg = cl.config
    f.mfq = cl.mfq
    f.flags = flags = store.running_flags
    f.at_index = slot_offset(type(cfg), "messageIndexEnable", MemberDescriptorType)
    f.at_flush = slot_offset(type(cfg), "flushDiskType", MemberDescriptorType)
    f.at_timed = slot_offset(type(cfg), "flushCommitLogTimed", MemberDescriptorType)
    f.at_role = slot_offset(type(ccfg), "brokerRole", MemberDescriptorType)
    f.at_max = slot_offset(type(ccfg), "maxMessageSize", MemberDescriptorType)
    f.at_bits = slot_offset(type(flags), "flag_bits", MemberDescriptorType)
    f.at_shutdown = slot_offset(type(store), "_shutdown", MemberDescriptorType, True)
    f.at_reput = slot_offset(type(store), "reput_from_offset", MemberDescriptorType, True)
    f.at_cqt = slot_offset(type(store), "consume_queue_table", MemberDescriptorType, True)
    f.at_ckpt = slot_offset(type(store), "checkpoint", MemberDescriptorType, True)
    f.at_begin = slot_offset(type(cl), "begin_time_in_lock", MemberDescriptorType, True)
    f.at_zero = slot_offset(type(cl), "zero_ahead_enabled", MemberDescriptorType, True)
    f.at_tqt = slot_offset(type(cl), "topic_queue_table", MemberDescriptorType, True)
    f.locks = PutLocks(cl.put_lock, store._reput_lock)
    stats = store.stats
    f.on_put_one = stats.on_put_one
    f.counters = counters_of(stats)
    f.pooled = store.commit_service is not None
    f.listener = listener = store.message_arriving_listener
    if type(listener) is MethodType and listener.__func__ is on_message_arriving:
        f.arrival_stats = listener.__self__.stats
        f.arrival_forms = listener.__self__._runs_forms
    f.flush_service = store.flush_service
    f.host_field = cl.store_host_field
    f.id_prefix = cl.msg_id_prefix
    f.file_size = cl.file_size
    f.host_v6 = cl.store_host_v6
    f.store_ref = PyWeakref_NewRef(store, None)
    _fixed = f
    return f


cdef object config_of(object store):
    """``store.config`` as the store's ``_Fixed`` keeps it (without the
    attribute read a record's writer would make before its put)."""
    return fixed_of(store).cfg


cdef inline bint writeable(_Fixed fx) except -1:
    """``RunningFlags.is_writeable`` of the store's flags."""
    if _NOT_WRITEABLE < 0:
        return fx.flags.is_writeable()
    return not (<long>slot_or_attr(fx.flags, fx.at_bits, "flag_bits") & _NOT_WRITEABLE)


cdef Py_ssize_t key_bound(object keys, object uniq):
    """``_key_bound``: at least the index entries of a message."""
    return (1 if uniq else 0) + ((<str>keys).count(" ") + 1 if keys else 0)


def put_single(object store, str topic, bytes topic_b, int queue_id, int flag, object body,
               object keys, object uniq, str stored, long long tags_code, int sys_flag,
               long long born_ts, bytes born_host, int reconsume):
    """Store one ordinary message in one append session, or None (nothing
    done): ``put_single`` of rmq/store/single_put.py, step for step."""
    cdef int64_t phy = 0
    cdef Py_ssize_t size = 0
    host_hex = fixed_of(store).id_prefix
    if not PyUnicode_IS_ASCII(host_hex):
        raise ValueError("host hex must be ASCII")
    if born_host is None:
        raise TypeError("born_host must be bytes")
    cdef long long qoff = put_one(store, topic, topic_b, queue_id, flag, body, keys, uniq,
                                  stored, tags_code, sys_flag, born_ts, born_host, reconsume,
                                  &phy, &size)
    if qoff < 0:
        return None
    return qoff, msg_id(host_hex, phy), phy, size


cdef long long put_one(object store, str topic, bytes topic_b, int queue_id, int flag,
                       object body, object keys, object uniq, str stored, long long tags_code,
                       int sys_flag, long long born_ts, bytes born_host, int reconsume,
                       int64_t *phy_out, Py_ssize_t *size_out) except -2:
    """``put_single`` without its answer's objects, for compiled callers:
    the message's queue offset (its commit-log offset and record size in
    ``phy_out`` and ``size_out``), or -1 with nothing done; ``born_host``
    None is the store's own host field."""
    if not _bound:
        raise RuntimeError("store_put.bind was not called")
    cdef _Fixed fx = fixed_of(store)
    cfg = fx.cfg
    cl = fx.cl
    if born_host is None:
        born_host = fx.host_field
    if (keys or uniq) and slot_or_attr(cfg, fx.at_index, "messageIndexEnable") and \
            not store.index_service.keys_fit(key_bound(keys, uniq)):
        return -1
    # CommitLog.open_run(False)
    ccfg = fx.ccfg
    if slot_or_attr(store, fx.at_shutdown, "_shutdown") or \
            slot_or_attr(ccfg, fx.at_role, "brokerRole") is _SLAVE or \
            slot_or_attr(cl, fx.at_begin, "begin_time_in_lock") or fx.pooled or \
            not writeable(fx):
        return -1
    mf = direct_tail_of(fx.mfq)
    if mf is None:
        return -1
    # (the offsets copied: an attribute read may run code that walks other classes)
    cdef Py_ssize_t m[MF_N]
    cdef Py_ssize_t c[MF_N]
    cdef Py_ssize_t q[CQ_N]
    cdef Py_ssize_t at
    _MF.copy(mf, m)
    take_locks(fx.locks)
    cdef long long file_from, phy, qoff, now, end
    cdef Py_ssize_t wrote, cpos, size
    cdef object qid, next_obj, cend_obj, end_obj, wrote_obj, now_obj  # each made once
    cdef Py_hash_t khash
    cdef PyObject *found = NULL
    try:
        file_from = slot_or_attr(mf, m[MF_FROM], "file_from_offset")
        wrote = slot_or_attr(mf, m[MF_WROTE], "wrote_position")
        phy = file_from + wrote
        if <long long>slot_or_attr(store, fx.at_reput, "reput_from_offset") != phy:
            return -1
        # CommitLog.zero_ahead, called only when there is something to do
        if _ZERO_AHEAD < 0 or (slot_or_attr(cl, fx.at_zero, "zero_ahead_enabled") and
                               <long long>slot_or_attr(mf, m[MF_ZEROED], "zeroed_to") - wrote
                               < _ZERO_AHEAD):
            cl.zero_ahead(mf)
        # AppendRun.queue
        if PyUnicode_GET_LENGTH(topic) == PyUnicode_GET_LENGTH(SCHEDULE_TOPIC) and \
                topic == SCHEDULE_TOPIC:  # (a length first: this compare calls PyUnicode_Compare)
            return -1
        qs = dict_get(slot_or_attr(store, fx.at_cqt, "consume_queue_table"), topic, None)
        qid = queue_id
        cq = dict_get(qs, qid, None) if qs is not None else None
        if cq is None:
            return -1
        _CQ.copy(cq, q)
        if slot_or_attr(cq, q[CQ_EXT], "ext") is not None:
            return -1
        cmf = slot_or_attr(cq, q[CQ_TAIL], "tail_file")
        if cmf is None:
            return -1
        _MF.copy(cmf, c)
        key = queue_key(fx, topic, qid, queue_id, &khash)
        tqt = slot_or_attr(cl, fx.at_tqt, "topic_queue_table")
        if type(tqt) is dict:
            found = dict_get_known(tqt, key, khash)
            qoff = 0 if found == NULL else <object>found
        else:
            qoff = tqt.get(key, 0)
        cpos = slot_or_attr(cmf, c[MF_WROTE], "wrote_position")
        cview = slot_or_attr(cmf, c[MF_VIEW], "view")
        # RunQueue.slot_free(phy, 1)
        if not (cpos < <Py_ssize_t>slot_or_attr(cq, q[CQ_SIZE], "file_size") and
                cpos + 20 <= len(cview) and
                <long long>slot_or_attr(cmf, c[MF_FROM], "file_from_offset") + cpos == qoff * 20
                and phy >= <long long>slot_or_attr(cq, q[CQ_MAX_PHY], "max_physic_offset")):
            return -1
        # CommitLog.fast_sys_flag
        sys_flag &= ~(0x10 | 0x20)
        if len(born_host) == 20:
            sys_flag |= 0x10
        if fx.host_v6:
            sys_flag |= 0x20
        now = now_ms()
        size = write_single(slot_or_attr(mf, m[MF_VIEW], "view"), wrote, fx.file_size - 8,
                            slot_or_attr(ccfg, fx.at_max, "maxMessageSize"), queue_id,
                            flag, qoff, phy, sys_flag, born_ts, born_host, now,
                            fx.host_field, reconsume, body, topic_b, stored, cview, cpos,
                            tags_code)
        if size < 0:
            return -1
        wrote += size
        qoff += 1
        end = phy + size
        # AppendRun.publish_queue and publish (each new value made once)
        next_obj = qoff
        if type(tqt) is dict:
            if 0 <= queue_id < KEYS_N and fx.key_tables[queue_id] is not tqt:
                if found != NULL:  # an equal key of its own: this one in its place
                    PyDict_DelItem(tqt, key)
                fx.key_tables[queue_id] = tqt
            dict_set_known(tqt, key, next_obj, khash)
        else:
            tqt[key] = next_obj
        cend_obj = cpos + 20
        set_slot_or_attr(cmf, c[MF_WROTE], "wrote_position", cend_obj)
        set_slot_or_attr(cmf, c[MF_COMMITTED], "committed_position", cend_obj)
        end_obj = end
        set_slot_or_attr(cq, q[CQ_MAX_PHY], "max_physic_offset", end_obj)
        wrote_obj = wrote
        set_slot_or_attr(mf, m[MF_WROTE], "wrote_position", wrote_obj)
        set_slot_or_attr(mf, m[MF_COMMITTED], "committed_position", wrote_obj)
        now_obj = now
        set_slot_or_attr(mf, m[MF_STAMP], "store_timestamp", now_obj)
        ck = slot_or_attr(store, fx.at_ckpt, "checkpoint")
        _CK.copy(ck, &at)
        set_slot_or_attr(ck, at, "logics_msg_timestamp", now_obj)
        set_slot_or_attr(store, fx.at_reput, "reput_from_offset", end_obj)
        # _after_put
        if (keys or uniq) and slot_or_attr(cfg, fx.at_index, "messageIndexEnable"):
            if not store.index_service.build_index(topic, phy, now, keys, uniq):
                if store.index_service.no_space:
                    store.mark_no_space("index")
                    store.reput_from_offset = phy
                else:
                    store.running_flags.make_index_file_error()
        if fx.counters is not None:
            fx.counters.count_puts(topic, 1, size, 1)
        else:
            fx.on_put_one(topic, size)
        notify(fx, key, khash, next_obj, tags_code, now_obj, size)
        if slot_or_attr(cfg, fx.at_flush, "flushDiskType") is _ASYNC_FLUSH and \
                not slot_or_attr(cfg, fx.at_timed, "flushCommitLogTimed"):
            fx.flush_service.wake_for(end, now)
    finally:
        give_locks(fx.locks)
    phy_out[0] = phy
    size_out[0] = size
    return qoff - 1


cdef class PutLocks:
    """A commit log's put lock and its store's reput lock as ``take_locks``
    takes them: whether each is of the layout it knows (``raw_lock``,
    ``raw_rlock``), and the put lock's methods bound (no lookup a take),
    which it calls for a lock of another kind and when the lock is busy
    (the reput lock's: ``take_rlock``).  The single
    put and the send lane's reads take them so."""

    def __cinit__(self, put_lock, reput_lock):
        self.put_lock = put_lock
        self.reput_lock = reput_lock
        self.put_raw = raw_lock(put_lock)
        self.reput_raw = raw_rlock(reput_lock)
        self.put_acquire = put_lock.acquire
        self.put_release = put_lock.release


cdef int take_locks(PutLocks fx) except -1:
    """``put_lock.acquire()`` then ``_reput_lock.acquire()``: at their OS
    locks when raw (``raw_lock``, ``raw_rlock``) and free, or held by this
    thread already (the RLock), with the fields their methods set; else
    through the methods (which wait)."""
    cdef rmq_lock_object *lk = <rmq_lock_object *><PyObject *>fx.put_lock
    if fx.put_raw and PyThread_acquire_lock(lk.lock_lock, 0) == PY_LOCK_ACQUIRED:
        lk.locked = 1
    else:
        fx.put_acquire()
    return take_rlock(fx.reput_lock, fx.reput_raw)


cdef int give_locks(PutLocks fx) except -1:
    """``_reput_lock.release()`` then ``put_lock.release()``, as
    ``take_locks`` took them (a lock not held: its method raises)."""
    cdef rmq_lock_object *lk = <rmq_lock_object *><PyObject *>fx.put_lock
    give_rlock(fx.reput_lock, fx.reput_raw)
    if fx.put_raw and lk.locked:
        lk.locked = 0
        PyThread_release_lock(lk.lock_lock)
    else:
        fx.put_release()
    return 0


cdef int notify(_Fixed fx, tuple key, Py_hash_t key_hash, object next_offset,
                long long tags_code, object now, Py_ssize_t size) except -1:
    """The store's arrival listener told of the put to queue ``key`` (topic,
    queue id; of hash ``key_hash``) (``arrive`` straight for the controller's
    compiled one); its failure logged, not raised."""
    listener = fx.listener
    if listener is None:
        return 0
    try:
        if fx.arrival_forms is not None:
            arrive(fx.arrival_stats, fx.arrival_forms, key, key_hash, next_offset, tags_code,
                   now, 1, size, 1)
        else:
            listener(key[0], key[1], next_offset, tags_code, now, 1, size)
    except Exception:
        log.exception("message arriving listener failed")
    return 0
