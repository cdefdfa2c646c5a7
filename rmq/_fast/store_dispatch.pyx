# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Compiled twin of ``rmq.store.dispatch._dispatch_run`` and ``_dispatch_walk``
(and of ``rmq.store.reput._reput_walk``, a reput's walk with its store work):
dispatch consecutive commit log records straight into the consume queue
files and the index file, with no Python object per message --
``dispatch_run`` a run of one topic/queue, ``dispatch_walk`` records of any
queues (each queue's file asked for once per walk).

A run or walk stops (and Python's per-record path takes over) at the first
record that is not a plain message (of the same topic/queue for a run),
carries DELAY, is not the next entry of its consume queue file, is already
dispatched, has a non-ASCII key or topic, or does not fit into the consume
queue / index file.

With ``entry_header`` (DLedger's 48 bytes) every record lies in an entry of
its own, behind that header: the entry's size word (at 4) must be the
record's size plus the header, and a blank (magic -1) ends the run, as
``DLedgerCommitLog.dispatch_entries`` walks them.
"""

from cpython.buffer cimport PyBUF_SIMPLE, PyBUF_WRITABLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytes cimport PyBytes_FromStringAndSize
from cpython.pythread cimport PyThread_get_thread_ident
from cpython.ref cimport PyObject, Py_INCREF, Py_XDECREF
from cpython.unicode cimport PyUnicode_DATA, PyUnicode_DecodeASCII, PyUnicode_GET_LENGTH
from libc.stdint cimport int16_t, int32_t, int64_t, uint8_t, uint32_t
from libc.string cimport memcmp, memset
from rmq._fast.byteorder cimport put32, put64, get32, get64, get16
from rmq._fast.index_slot cimport index_count
from rmq._fast.record cimport Props, ascii_hash, find_props, index_prop_keys, is_ascii, prop_keys
from rmq._fast.slots cimport set_slot_or_attr, slot_offset, slot_or_attr
from rmq._fast.store_put cimport ClassOffsets, give_rlock, raw_rlock, take_rlock

import logging
from types import MemberDescriptorType


cdef enum:
    MESSAGE_MAGIC = -626843481
    MAX_WALK_QUEUES = 64


cdef struct Step:
    # what one record's dispatch wrote (``step``)
    int64_t qoff, store_ts, size
    int32_t tags_code


cdef inline bint head(const uint8_t* b, Py_ssize_t pos, Py_ssize_t limit, Py_ssize_t entry_header,
                      int32_t* qid, const uint8_t** tp, Py_ssize_t* tlen) noexcept nogil:
    """The topic and queue of the plain message at ``pos`` (behind its entry
    header), or False when there is none to dispatch in bulk."""
    cdef const uint8_t* e = b + pos
    cdef const uint8_t* r = e + entry_header
    cdef const uint8_t* p
    cdef int64_t size, body_len
    cdef int32_t sys_flag
    if pos + entry_header + 91 > limit:
        return False
    size = get32(r)
    if get32(r + 4) != MESSAGE_MAGIC or size < 91 or pos + entry_header + size > limit:
        return False
    if entry_header and (get32(e) == -1 or get32(e + 4) != size + entry_header):
        return False
    sys_flag = get32(r + 36)
    p = r + 48 + (20 if sys_flag & 0x10 else 8) + 8 + (20 if sys_flag & 0x20 else 8)
    body_len = get32(p + 12)
    if body_len < 0 or body_len > size - 91:
        return False
    p += 16 + body_len
    qid[0] = get32(r + 12)
    tp[0] = p + 1
    tlen[0] = p[0]
    return p + 1 + p[0] + 2 <= r + size


cdef inline Py_ssize_t step(const uint8_t* b, Py_ssize_t pos, Py_ssize_t limit,
                            Py_ssize_t entry_header, const uint8_t* t, Py_ssize_t tlen,
                            int32_t topic_hash, int queue_id, uint8_t* c, Py_ssize_t* cq_pos,
                            Py_ssize_t cq_len, int64_t cq_base, int64_t* max_physic_offset,
                            uint8_t* ix, int64_t max_slots, int64_t max_index,
                            Step* out) noexcept nogil:
    """Dispatch the record at ``pos`` (behind its entry header) into its
    consume queue file ``c`` and the index ``ix``: the position after it, or
    -1 (nothing written) when it must go the per-record way."""
    cdef const uint8_t* e = b + pos
    cdef const uint8_t* r = e + entry_header
    cdef const uint8_t* p
    cdef const uint8_t* props
    cdef Py_ssize_t size, body_len, topic_len, props_len
    cdef int32_t sys_flag, tx, qid, tags_code
    cdef int64_t qoff, phy, store_ts
    cdef Props pr
    if pos + entry_header + 91 > limit or cq_pos[0] + 20 > cq_len:
        return -1
    size = get32(r)
    if get32(r + 4) != MESSAGE_MAGIC or size < 91 or pos + entry_header + size > limit:
        return -1
    if entry_header and (get32(e) == -1 or get32(e + 4) != size + entry_header):
        return -1
    qid = get32(r + 12)
    qoff = get64(r + 20)
    phy = get64(r + 28)
    sys_flag = get32(r + 36)
    tx = sys_flag & 0xC
    if qid != queue_id or (tx != 0 and tx != 8) or cq_base + cq_pos[0] != qoff * 20:
        return -1
    if phy + size <= max_physic_offset[0]:
        return -1
    p = r + 48 + (20 if sys_flag & 0x10 else 8)
    store_ts = get64(p)
    p += 8 + (20 if sys_flag & 0x20 else 8)
    body_len = get32(p + 12)
    p += 16
    if body_len < 0 or body_len > size - 91:
        return -1
    p += body_len
    topic_len = p[0]
    if topic_len != tlen or memcmp(p + 1, t, tlen) != 0:
        return -1
    p += 1 + topic_len
    props_len = get16(p)
    props = p + 2
    if props_len < 0 or props + props_len != r + size:
        return -1
    find_props(props, props_len, &pr)
    if pr.delay or pr.non_ascii:
        return -1
    if ix != NULL and (pr.keys_at >= 0 or pr.uniq_at >= 0):
        if phy >= get64(ix + 24):  # not indexed yet (endPhyOffset rule)
            if max(1, get32(ix + 36)) + prop_keys(props, &pr) > max_index:
                return -1
            index_prop_keys(ix, max_slots, max_index, topic_hash, props, &pr, phy, store_ts)
    if pr.tags_at >= 0:
        tags_code = ascii_hash(0, props + pr.tags_at, pr.tags_len)
    else:
        tags_code = 0
    put64(c + cq_pos[0], phy)
    put32(c + cq_pos[0] + 8, <int32_t>size)
    put64(c + cq_pos[0] + 12, <int64_t>tags_code)
    cq_pos[0] += 20
    max_physic_offset[0] = phy + size
    out.qoff = qoff
    out.store_ts = store_ts
    out.size = size
    out.tags_code = tags_code
    return pos + entry_header + size


cdef uint8_t* index_of(index, Py_buffer* iv, long long max_slots, long long max_index) except? NULL:
    """The writable index buffer (held in ``iv``), NULL with indexing off."""
    if index is None:
        return NULL
    if max_slots <= 0 or max_index <= 0:
        raise ValueError("index buffer smaller than its layout")
    PyObject_GetBuffer(index, iv, PyBUF_WRITABLE)
    if iv.len < 40 + max_slots * 4 + max_index * 20:
        PyBuffer_Release(iv)
        raise ValueError("index buffer smaller than its layout")
    return <uint8_t*>iv.buf


def dispatch_run(const uint8_t[::1] buf, Py_ssize_t pos, Py_ssize_t limit, const uint8_t[::1] topic,
                 int queue_id, uint8_t[::1] cq, Py_ssize_t cq_pos, long long cq_base,
                 long long max_physic_offset, index, long long max_slots, long long max_index,
                 Py_ssize_t entry_header=0):
    """Returns ``(pos, cq_pos, count, max_physic_offset, last)`` where ``last``
    is ``None`` or ``(queue_offset, tags_code, store_ts)``
    of the last record dispatched.  ``index`` is the writable buffer of the
    current index file or None when indexing is off."""
    if pos < 0 or limit > buf.shape[0] or cq_pos < 0 or cq_pos > cq.shape[0] or cq_pos % 20 \
            or entry_header < 0:
        raise ValueError("bad dispatch range")
    cdef Py_buffer iv
    cdef uint8_t *ix = index_of(index, &iv, max_slots, max_index)
    cdef const uint8_t *b = &buf[0] if buf.shape[0] else NULL
    cdef const uint8_t *t = &topic[0] if topic.shape[0] else NULL
    cdef Py_ssize_t tlen = topic.shape[0]
    cdef uint8_t *c = &cq[0] if cq.shape[0] else NULL
    cdef Py_ssize_t cq_len = cq.shape[0]
    cdef int32_t topic_hash = ascii_hash(0, t, tlen)
    cdef Py_ssize_t count = 0, nxt
    cdef int64_t maxphy = max_physic_offset
    cdef Step s
    try:
        for k in range(tlen):
            if t[k] >= 0x80:
                return pos, cq_pos, 0, max_physic_offset, None
        with nogil:
            while True:
                nxt = step(b, pos, limit, entry_header, t, tlen, topic_hash, queue_id, c, &cq_pos,
                           cq_len, cq_base, &maxphy, ix, max_slots, max_index, &s)
                if nxt < 0:
                    break
                pos = nxt
                count += 1
    finally:
        if ix != NULL:
            PyBuffer_Release(&iv)
    if count == 0:
        return pos, cq_pos, 0, maxphy, None
    return pos, cq_pos, count, maxphy, (s.qoff, s.tags_code, s.store_ts)


cdef struct WQ:
    # a queue of a walk: its topic and id, its consume queue file, what the walk wrote;
    # for the store's table (``reput_walk``) also its ConsumeQueue, tail MappedFile
    # and topic str, owned references dropped by ``_release``
    const uint8_t* tp        # the topic's bytes (in ``name`` or, for the table, the walked buffer)
    Py_ssize_t tlen
    int32_t qid, topic_hash
    Py_buffer cq
    bint held
    Py_ssize_t cq_pos
    int64_t cq_base, max_phy, count, size
    Step last
    PyObject* cq_obj
    PyObject* mf_obj
    PyObject* topic_obj


def dispatch_walk(const uint8_t[::1] buf, Py_ssize_t pos, Py_ssize_t limit, queue_of, index,
                  long long max_slots, long long max_index, Py_ssize_t entry_header=0):
    """Dispatch the records from ``pos`` whatever their queue, each queue's
    file asked for once: ``queue_of(topic bytes, queue id)`` gives (a token,
    the consume queue file's writable buffer, its write position, its file's
    first offset, the queue's max physical offset), or None for a queue the
    walk stops at.  Returns ``(pos, queues)``: the position reached and, per
    queue written, ``(token, cq_pos, count, max_physic_offset, (queue_offset,
    tags_code, store_ts) of its last record, bytes of its records)``."""
    if pos < 0 or limit > buf.shape[0] or entry_header < 0:
        raise ValueError("bad dispatch range")
    cdef Py_buffer iv
    cdef uint8_t *ix = index_of(index, &iv, max_slots, max_index)
    cdef WQ qs[MAX_WALK_QUEUES]
    cdef WQ* q
    cdef int nq = 0, i
    tokens = []
    try:
        pos = _walk(&buf[0] if buf.shape[0] else NULL, buf.shape[0], pos, limit, queue_of, None,
                    ix, max_slots, max_index, entry_header, qs, &nq, tokens)
        out = []
        for i in range(nq):
            q = &qs[i]
            if q.count:
                out.append((tokens[i][0], q.cq_pos, q.count, q.max_phy,
                            (q.last.qoff, q.last.tags_code, q.last.store_ts), q.size))
        return pos, out
    finally:
        _release(qs, nq)
        if ix != NULL:
            PyBuffer_Release(&iv)


cdef void _release(WQ* qs, int nq) noexcept:
    """Drop what a walk's queues hold: their files' buffers and objects."""
    cdef int i
    for i in range(nq):
        if qs[i].held:
            PyBuffer_Release(&qs[i].cq)
            qs[i].held = False
        Py_XDECREF(qs[i].cq_obj)
        Py_XDECREF(qs[i].mf_obj)
        Py_XDECREF(qs[i].topic_obj)
        qs[i].cq_obj = qs[i].mf_obj = qs[i].topic_obj = NULL


# The fields of a walk's ConsumeQueue and tail MappedFile read and set at their
# slots (~140 instructions each through the attribute protocol; a walk reads
# six and sets three a queue), for the last classes met when they are plain
# slots classes; any other object, and an unset slot, through its attributes.
cdef object cq_class = None, mf_class = None
cdef Py_ssize_t at_tail_file = -1, at_file_size = -1, at_max_phy = -1
cdef Py_ssize_t at_wrote = -1, at_committed = -1, at_from = -1, at_view = -1


cdef int know_classes(cq, mf) except -1:
    """The slot offsets of ``cq``'s and ``mf``'s fields, for their classes."""
    global cq_class, mf_class, at_tail_file, at_file_size, at_max_phy
    global at_wrote, at_committed, at_from, at_view
    if cq is not None and type(cq) is not cq_class:
        cls = type(cq)
        at_tail_file = slot_offset(cls, "tail_file", MemberDescriptorType)
        at_file_size = slot_offset(cls, "file_size", MemberDescriptorType)
        at_max_phy = slot_offset(cls, "max_physic_offset", MemberDescriptorType)
        cq_class = cls
    if mf is not None and type(mf) is not mf_class:
        cls = type(mf)
        at_wrote = slot_offset(cls, "wrote_position", MemberDescriptorType)
        at_committed = slot_offset(cls, "committed_position", MemberDescriptorType)
        at_from = slot_offset(cls, "file_from_offset", MemberDescriptorType)
        at_view = slot_offset(cls, "view", MemberDescriptorType)
        mf_class = cls
    return 0


# The topics the walks met last, by their hash: a walk's queue takes its
# topic's str from here when it met the same name before (no str made and
# hashed again for the table look-ups: a leader's reput meets the same few
# topics each round); strs are immutable, so a kept one is always right.
cdef enum:
    TOPICS_KEPT = 64
cdef PyObject* _topics[TOPICS_KEPT]


cdef object ascii_topic(const uint8_t* tp, Py_ssize_t tlen):
    """The str of the ASCII topic ``tp[:tlen]``: the one kept for its hash
    when equal, else a new one, then kept."""
    cdef Py_ssize_t at = <uint32_t>ascii_hash(0, tp, tlen) % TOPICS_KEPT
    cdef PyObject* kept = _topics[at]
    cdef PyObject* old
    if kept != NULL and PyUnicode_GET_LENGTH(<object>kept) == tlen and \
            memcmp(PyUnicode_DATA(<object>kept), tp, tlen) == 0:
        return <object>kept
    topic = PyUnicode_DecodeASCII(<const char*>tp, tlen, NULL)
    Py_INCREF(topic)
    old = _topics[at]
    _topics[at] = <PyObject*>topic
    Py_XDECREF(old)
    return topic


cdef bint _store_queue(table, const uint8_t* tp, Py_ssize_t tlen, int32_t qid, WQ* q) except -1:
    """``ReputMixin._walk_queue`` without its Python frame or tuples: the
    queue's consume-queue file from the store's table put into ``q`` (its
    buffer held, the queue, file and topic referenced), False when its entry
    must go the per-record way."""
    topic = ascii_topic(tp, tlen)
    # the store's tables are plain dicts: read them without a method call
    # (``.get`` through the method protocol costs ~450 instructions a look-up)
    qs = (<dict>table).get(topic) if type(table) is dict else table.get(topic)
    if qs is None:
        return False
    cq = (<dict>qs).get(qid) if type(qs) is dict else qs.get(qid)
    if cq is None:
        return False
    know_classes(cq, None)
    mf = slot_or_attr(cq, at_tail_file, "tail_file")
    if mf is None:
        return False
    know_classes(cq, mf)
    # (the offsets in locals: an attribute read may run code that walks other classes)
    cdef Py_ssize_t file_size = at_file_size, max_phy = at_max_phy
    cdef Py_ssize_t wrote_at = at_wrote, from_at = at_from, view_at = at_view
    wrote = slot_or_attr(mf, wrote_at, "wrote_position")
    if wrote >= slot_or_attr(cq, file_size, "file_size"):
        return False
    q.cq_pos = wrote
    q.cq_base = slot_or_attr(mf, from_at, "file_from_offset")
    q.max_phy = slot_or_attr(cq, max_phy, "max_physic_offset")
    PyObject_GetBuffer(slot_or_attr(mf, view_at, "view"), &q.cq, PyBUF_WRITABLE)
    q.held = True
    Py_INCREF(cq)
    q.cq_obj = <PyObject*>cq
    Py_INCREF(mf)
    q.mf_obj = <PyObject*>mf
    Py_INCREF(topic)
    q.topic_obj = <PyObject*>topic
    return True


cdef Py_ssize_t _walk(const uint8_t* b, Py_ssize_t n, Py_ssize_t pos, Py_ssize_t limit,
                      queue_of, table, uint8_t* ix, long long max_slots, long long max_index,
                      Py_ssize_t entry_header, WQ* qs, int* nq_out, list tokens) except -1:
    """The walk of ``dispatch_walk`` and ``reput_walk`` over the ``n`` bytes
    at ``b`` into ``qs`` (``*nq_out`` queues, to be ``_release``d by the
    caller): with ``queue_of`` each queue is asked for through it (its token
    and name kept in ``tokens``), with ``queue_of`` None it is looked up in
    the store's consume-queue ``table`` (``_store_queue``).  Returns the
    position reached."""
    if pos < 0 or limit > n or entry_header < 0:
        raise ValueError("bad dispatch range")
    cdef WQ* q
    cdef int i
    cdef int32_t qid
    cdef const uint8_t* tp
    cdef Py_ssize_t tlen, nxt
    cdef Step s
    while head(b, pos, limit, entry_header, &qid, &tp, &tlen):
        q = NULL
        for i in range(nq_out[0]):
            if qs[i].qid == qid and qs[i].tlen == tlen and memcmp(qs[i].tp, tp, tlen) == 0:
                q = &qs[i]
                break
        if q == NULL:
            if nq_out[0] == MAX_WALK_QUEUES:
                break
            if not is_ascii(tp, tlen):
                break
            q = &qs[nq_out[0]]
            memset(q, 0, sizeof(WQ))  # (only the queues met: a walk meets a few)
            nq_out[0] += 1
            if queue_of is None:
                if not _store_queue(table, tp, tlen, qid, q):
                    break
                q.tp = tp  # (the walked buffer outlives the walk)
            else:
                name = PyBytes_FromStringAndSize(<const char*>tp, tlen)
                found = queue_of(name, qid)
                if found is None:
                    break
                PyObject_GetBuffer(found[1], &q.cq, PyBUF_WRITABLE)
                q.held = True
                tokens.append((found[0], name))
                q.tp = <const uint8_t*><char*>name
                q.cq_pos = found[2]
                q.cq_base = found[3]
                q.max_phy = found[4]
            q.tlen = tlen
            q.qid = qid
            q.topic_hash = ascii_hash(0, tp, tlen)
            if q.cq_pos < 0 or q.cq_pos > q.cq.len or q.cq_pos % 20:
                raise ValueError("bad dispatch range")
        nxt = step(b, pos, limit, entry_header, q.tp, q.tlen, q.topic_hash, q.qid,
                   <uint8_t*>q.cq.buf, &q.cq_pos, q.cq.len, q.cq_base, &q.max_phy, ix,
                   max_slots, max_index, &s)
        if nxt < 0:
            break
        pos = nxt
        q.count += 1
        q.size += s.size
        q.last = s
    return pos


cdef object _log = logging.getLogger("store")


def reput_walk(store, const uint8_t[::1] buf, Py_ssize_t pos, Py_ssize_t limit, bint notify):
    """``rmq.store.reput._reput_walk`` in one call: a reput's records from
    ``pos`` dispatched by one walk over the store's consume queues (looked
    up here, not by a Python callback per queue, and kept in C structs for
    the walk: no tuple per queue), the queues' files and maximum offsets
    moved, the index room kept for the keys used, the checkpoint's logics
    timestamp set and the arrival listener told (the store's runs listener
    in one call on the loop's thread, else ``store._notify_runs``).  Returns
    where the per-record path resumes."""
    return _reput(store, &buf[0] if buf.shape[0] else NULL, buf.shape[0], pos, limit, notify)


cdef struct StoreAt:
    # where the store's fields a reput reads lie (``slot_offset``; -1: an
    # attribute), as ``_STORE.copy`` writes them (its names' order)
    Py_ssize_t config, index_service, table, commit_log, checkpoint, runs_listener, loop
    Py_ssize_t loop_thread

cdef ClassOffsets _STORE = ClassOffsets(
    ("config", "index_service", "consume_queue_table", "commit_log", "checkpoint",
     "message_runs_listener", "_loop", "_loop_thread"), True)
cdef ClassOffsets _CHECKPOINT = ClassOffsets(("logics_msg_timestamp",), True)


cdef inline object field(object o, Py_ssize_t* at, int i, tuple names):
    return slot_or_attr(o, at[i], <str>names[i])


# an IndexService's fields (``_INDEX``), an IndexFile's (``_INDEX_FILE``)
cdef enum:
    I_FILES = 0
    I_SPARE = 1
    I_PROMISED = 2
    I_N = 3
cdef tuple INDEX_FIELDS = ("files", "_spare", "promised")
cdef ClassOffsets _INDEX = ClassOffsets(INDEX_FIELDS, True)
cdef ClassOffsets _INDEX_FILE = ClassOffsets(("mf", "max_index"), True)
cdef ClassOffsets _VIEW = ClassOffsets(("view",), True)


cdef object index_view(ix):
    """``IndexService.writable_file().mf.view``: the current index file's
    buffer when it has room, else None -- the service's, file's and mapped
    file's fields read at their slots (the method call and its two
    attribute reads a file were ~2,600 instructions a reput); the file made
    ahead (a change of files) is left to the method."""
    cdef Py_ssize_t i[I_N]
    cdef Py_ssize_t f[2]  # mf, max_index
    cdef Py_ssize_t v[1]
    _INDEX.copy(ix, i)
    files = field(ix, i, I_FILES, INDEX_FIELDS)
    if not files:
        return None
    last = files[len(files) - 1]
    if last is field(ix, i, I_SPARE, INDEX_FIELDS):
        last = ix.writable_file()
        return None if last is None else last.mf.view
    _INDEX_FILE.copy(last, f)
    mf = slot_or_attr(last, f[0], "mf")
    _VIEW.copy(mf, v)
    view = slot_or_attr(mf, v[0], "view")
    if index_count(view) >= <int64_t>slot_or_attr(last, f[1], "max_index"):
        return None
    return view


cdef Py_ssize_t _reput(store, const uint8_t* b, Py_ssize_t n, Py_ssize_t pos, Py_ssize_t limit,
                       bint notify) except -1:
    """``reput_walk`` over the ``n`` bytes at ``b``; the store's fields read
    at their slots."""
    if pos < 0 or limit > n:
        raise ValueError("bad dispatch range")
    cdef Py_ssize_t used = 0, new_pos
    cdef Py_buffer iv
    cdef uint8_t *ix = NULL
    cdef WQ qs[MAX_WALK_QUEUES]
    cdef WQ* q
    cdef int nq = 0, i
    cdef int64_t latest = 0, max_slots, max_index
    cdef Py_ssize_t wrote_at, committed_at, max_phy_at
    cdef StoreAt st
    cdef Py_ssize_t ixf[I_N]
    cdef Py_ssize_t ck[1]
    _STORE.copy(store, <Py_ssize_t*>&st)
    cfg = slot_or_attr(store, st.config, "config")
    ix_service = slot_or_attr(store, st.index_service, "index_service")
    index = None
    if cfg.messageIndexEnable:
        index = index_view(ix_service)
        if index is None:
            return pos
    max_slots = cfg.maxHashSlotNum
    max_index = cfg.maxIndexNum
    ix = index_of(index, &iv, max_slots, max_index)
    if ix != NULL:
        used = <int32_t>get32(ix + 36)
    runs = None
    try:
        new_pos = _walk(b, n, pos, limit, None, slot_or_attr(store, st.table, "consume_queue_table"), ix,
                        max_slots, max_index,
                        slot_or_attr(store, st.commit_log, "commit_log").entry_header,
                        qs, &nq, None)
        if ix != NULL:
            used = <int32_t>get32(ix + 36) - used  # (the keys the walk added)
        for i in range(nq):
            q = &qs[i]
            if not q.count:
                continue
            if runs is None:
                runs = []
            cq = <object>q.cq_obj
            mf = <object>q.mf_obj
            know_classes(cq, mf)
            wrote_at, committed_at, max_phy_at = at_wrote, at_committed, at_max_phy
            cq_pos = <object>q.cq_pos  # (one int for both positions)
            set_slot_or_attr(mf, wrote_at, "wrote_position", cq_pos)
            set_slot_or_attr(mf, committed_at, "committed_position", cq_pos)
            set_slot_or_attr(cq, max_phy_at, "max_physic_offset", q.max_phy)
            if q.last.store_ts > latest:
                latest = q.last.store_ts
            runs.append((<object>q.topic_obj, q.qid, q.last.qoff + 1, q.last.tags_code,
                         q.last.store_ts, q.count, q.size, 1, None))
    finally:
        _release(qs, nq)
        if ix != NULL:
            PyBuffer_Release(&iv)
    if runs is None:
        return new_pos
    if index is not None:
        _INDEX.copy(ix_service, ixf)
        promised = field(ix_service, ixf, I_PROMISED, INDEX_FIELDS)
        if promised:
            set_slot_or_attr(ix_service, ixf[I_PROMISED], "promised", max(0, promised - used))
    checkpoint = slot_or_attr(store, st.checkpoint, "checkpoint")
    _CHECKPOINT.copy(checkpoint, ck)
    set_slot_or_attr(checkpoint, ck[0], "logics_msg_timestamp", latest)
    if notify:
        listener = slot_or_attr(store, st.runs_listener, "message_runs_listener")
        if listener is None or (slot_or_attr(store, st.loop, "_loop") is not None and
                                PyThread_get_thread_ident() !=
                                slot_or_attr(store, st.loop_thread, "_loop_thread")):
            store._notify_runs(runs)
        else:
            try:
                listener(runs)
            except Exception:  # a listener bug must not stop dispatch
                _log.exception("message arriving listener failed")
    return new_pos


# ``DLedgerCommitLog.reput_committed`` (its twin ``rmq.dledger.commit_log._reput_committed``):
# the group's commit listener, called on the leader once per round with the
# followers' answers -- in C, without its Python frame: the reput lock taken
# at its OS lock (``store_put.take_rlock``), the data file's fields read at
# their slots, its bytes walked in place (no memoryview slice).
# ``bind_reput`` hands over ``BrokerRole.SLAVE`` (rmq.store is a layer above).
cdef object _slave = None


def bind_reput(slave) -> None:
    """``BrokerRole.SLAVE``: a slave's reput goes through ``do_reput``."""
    global _slave
    _slave = slave


cdef enum:
    # a data file's fields, in ``_DATA_FILE``'s order
    D_FROM = 0
    D_WRITE_BUFFER = 1
    D_WROTE = 2
    D_VIEW = 3
    D_N = 4
    # the store's, in ``_REPUT_STORE``'s
    R_REPUT = 0
    R_N = 1

cdef tuple DATA_FILE_FIELDS = ("file_from_offset", "write_buffer", "wrote_position", "view")
cdef ClassOffsets _DATA_FILE = ClassOffsets(DATA_FILE_FIELDS)
cdef ClassOffsets _REPUT_STORE = ClassOffsets(("reput_from_offset",), True)


def reput_committed(cl, _index) -> None:
    """The group's commit listener: the store's reput of what is now
    committed.  The usual case -- the committed entries after
    ``reput_from_offset`` lie in one data file, bulk dispatch on -- is one
    walk of them (``reput_walk``'s; a slave's, a follower's, tells no
    arrival listener, as ``do_reput``'s); anything else, or a walk that
    stops before the committed end, goes on through ``do_reput``."""
    cdef Py_ssize_t d[D_N]
    cdef Py_ssize_t r[R_N]
    cdef int64_t limit, start, first, base, end, file_size, pos
    cdef Py_ssize_t i
    cdef Py_buffer pb
    cdef bint raw
    if _slave is None:
        raise RuntimeError("store_dispatch.bind_reput was not called")
    store = cl.store
    limit = cl.dledger.committed_pos
    files = cl.mfq.mapped_files
    if limit <= 0 or not files or not store._bulk_dispatch:
        store.do_reput()
        return
    lock = store._reput_lock
    raw = raw_rlock(lock)
    take_rlock(lock, raw)
    try:
        _REPUT_STORE.copy(store, r)
        start = slot_or_attr(store, r[R_REPUT], "reput_from_offset")
        if start >= limit:
            return
        mf = files[0]
        _DATA_FILE.copy(mf, d)
        first = slot_or_attr(mf, d[D_FROM], "file_from_offset")
        if start < first:
            store.do_reput()
            return
        file_size = cl.file_size
        i = start // file_size - first // file_size
        if i >= len(files):
            store.do_reput()
            return
        mf = files[i]
        _DATA_FILE.copy(mf, d)
        if slot_or_attr(mf, d[D_WRITE_BUFFER], "write_buffer") is not None:
            store.do_reput()
            return
        base = slot_or_attr(mf, d[D_FROM], "file_from_offset")
        end = min(<int64_t>slot_or_attr(mf, d[D_WROTE], "wrote_position"), limit - base)
        if start - base >= end:
            store.do_reput()
            return
        view = slot_or_attr(mf, d[D_VIEW], "view")
        try:
            PyObject_GetBuffer(view, &pb, PyBUF_SIMPLE)
        except ValueError:  # (unmapped: as get_data, nothing to read)
            return
        try:  # (the bytes from ``start`` to ``end``, or to the view's end: the twin's slice)
            pos = _reput(store, <const uint8_t*>pb.buf + (start - base),
                         min(end, <int64_t>pb.len) - start + base, 0, end - start + base,
                         store.message_arriving_listener is not None and
                         store.config.brokerRole is not _slave)
        finally:
            PyBuffer_Release(&pb)
        set_slot_or_attr(store, r[R_REPUT], "reput_from_offset", start + pos)
        if start + pos < limit:
            store.do_reput()
    finally:
        give_rlock(lock, raw)
