# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Compiled twin of ``_write_entries`` in rmq/dledger/mmap_store.py: a DLedger
leader's plain sends of one read written as consecutive entries in one call.

Each send's entry -- the 48-byte entry header, then the commit-log record
with its physical offset (where the record lies in the data files) -- is
written straight into the mapped data file, and its 32-byte index unit into
the mapped index file; an ``Entry`` is made per send for the leader's pushes
(its fields set in place, without the dataclass's ``__init__``).
Without it each send paid a dozen Python calls (the room check, the header,
the record, the index unit, the ledger's end).  It stops before the first
entry that would not leave a blank's room in the data file, or whose index
unit would not fit: the caller appends that one the usual way (a blank, the
next file) and calls again.
"""

from cpython.buffer cimport PyBUF_WRITABLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.object cimport PyObject
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.long cimport PyLong_AsLongLongAndOverflow, PyLong_CheckExact
from libc.stdint cimport int32_t, int64_t, uint8_t
from libc.string cimport memcpy

from rmq._fast.byteorder cimport put32, put64
from cpython.ref cimport Py_INCREF
from rmq._fast.dledger_wire cimport new_instance, take_ref, wire_of
from rmq._fast.dledger_push cimport keep_entries
from rmq._fast.slots cimport set_slot_or_attr, slot_offset, slot_or_attr
from rmq._fast.store_put cimport ClassOffsets
from rmq._fast.record cimport c_record_size, c_write_record

from dataclasses import fields


cdef extern from "Python.h":
    void PyObject_GC_UnTrack(object)

from types import MemberDescriptorType

# the fields of ``rmq.dledger.entry.Entry``, set below in place of its
# ``__init__``; a ``make_entry`` of any other layout is called instead
cdef tuple ENTRY_FIELDS = ("index", "term", "body", "pos", "magic", "channel", "chain_crc",
                           "body_crc", "size", "wire")
cdef object in_place_class = None  # the last class found to have them
# where each of ENTRY_FIELDS lies in an instance of ``in_place_class``, when
# it is a plain slots class (each field a writable object slot): an entry is
# then made by the type's allocator and its slots filled directly, not by
# ``__new__`` and ten ``setattr`` (~30k instructions a 16-send read)
cdef Py_ssize_t slot_at[10]
cdef bint slots_known = False


cdef bint find_slots(cls):
    """Whether every field of ``cls`` is a writable object slot (its place
    then in ``slot_at``) and ``cls`` has no ``__new__`` of its own."""
    cdef int i
    if cls.__new__ is not object.__new__:
        return False
    for i, name in enumerate(ENTRY_FIELDS):
        slot_at[i] = slot_offset(cls, name, MemberDescriptorType)
        if slot_at[i] < 0:
            return False
    return True


cdef inline void set_slot(object e, int i, object v) noexcept:
    """Slot ``i`` (of ``ENTRY_FIELDS``) of a fresh entry (unset before) set to ``v``."""
    Py_INCREF(v)
    (<PyObject**>(<char*><PyObject*>e + slot_at[i]))[0] = <PyObject*>v


cdef bint made_in_place(cls):
    """Whether ``cls`` is a dataclass of exactly ``ENTRY_FIELDS``."""
    global in_place_class, slots_known
    if cls is in_place_class:
        return True
    if not isinstance(cls, type):
        return False
    try:
        names = tuple([f.name for f in fields(cls)])
    except TypeError:
        return False
    if names != ENTRY_FIELDS:
        return False
    in_place_class = cls
    slots_known = find_slots(cls)
    return True

cdef enum:
    MAGIC = 1          # entry.MAGIC
    BODY_OFFSET = 48   # entry.BODY_OFFSET: the record behind the entry header
    UNIT = 32          # entry.INDEX_UNIT_SIZE
    MIN_BLANK = 8      # entry.MIN_BLANK_LEN: what must stay free for a blank
    MAX_TOPIC = 127    # message_codec.MAX_TOPIC_LENGTH
    MAX_PROPS = 32767  # message_codec.MAX_PROPERTIES_LENGTH


cdef struct Files:
    Py_buffer data   # the mapped data file's
    Py_buffer index  # the mapped index file's
    bint data_held
    bint index_held


cdef inline int hold(Files* f, data, Py_ssize_t at, Py_ssize_t room, index, Py_ssize_t index_at,
                     Py_ssize_t index_room) except -1:
    """Hold the writable buffers of ``data`` and ``index`` in ``f`` and check
    ``data[at:at + room]`` and ``index[index_at:index_at + index_room]`` lie
    inside them; ``release`` lets go of what it held, raised or not."""
    f.data_held = f.index_held = False
    PyObject_GetBuffer(data, &f.data, PyBUF_WRITABLE)
    f.data_held = True
    PyObject_GetBuffer(index, &f.index, PyBUF_WRITABLE)
    f.index_held = True
    if at < 0 or room < 0 or at + room > f.data.len or index_at < 0 or index_room < 0 or \
            index_at + index_room > f.index.len:
        raise ValueError("a place outside its file")
    return 0


cdef inline void release(Files* f) noexcept:
    if f.index_held:
        PyBuffer_Release(&f.index)
    if f.data_held:
        PyBuffer_Release(&f.data)


cdef inline void put_head(uint8_t* d, uint8_t* u, int32_t magic, int32_t size, int64_t index,
                          int64_t term, int64_t pos, int32_t channel, int32_t chain_crc,
                          int32_t body_crc, int32_t body_size) noexcept nogil:
    """An entry's 48-byte header at ``d`` (its body follows) and its 32-byte
    index unit at ``u``."""
    put32(d, magic)
    put32(d + 4, size)
    put64(d + 8, index)
    put64(d + 16, term)
    put64(d + 24, pos)
    put32(d + 32, channel)
    put32(d + 36, chain_crc)
    put32(d + 40, body_crc)
    put32(d + 44, body_size)
    put32(u, magic)
    put64(u + 4, pos)
    put32(u + 12, size)
    put64(u + 16, index)
    put64(u + 24, term)


def write_entries(data, Py_ssize_t at, int64_t pos, Py_ssize_t room, index,
                  Py_ssize_t index_at, Py_ssize_t index_room, int64_t first_index, int64_t term,
                  bytes born not None, bytes store_host not None, int64_t now,
                  list sends not None, make_entry, bint wire=False):
    """Write ``sends`` as entries ``first_index``, ... of ``term`` at
    ``data[at:at + room]`` (``c_write_entries``, whose used data and index
    bytes it returns after the entries)."""
    cdef Py_ssize_t used = 0, iused = 0
    entries = c_write_entries(data, at, pos, room, index, index_at, index_room, first_index,
                              term, born, store_host, now, sends, make_entry, wire, &used,
                              &iused)
    return entries, used, iused


cdef list c_write_entries(data, Py_ssize_t at, int64_t pos, Py_ssize_t room, index,
                          Py_ssize_t index_at, Py_ssize_t index_room, int64_t first_index,
                          int64_t term, bytes born, bytes store_host, int64_t now, list sends,
                          make_entry, bint wire, Py_ssize_t* used_out, Py_ssize_t* iused_out):
    """Write ``sends`` as entries ``first_index``, ... of ``term`` at
    ``data[at:at + room]`` (``pos``: where ``at`` lies in the data files) and
    their index units at ``index[index_at:index_at + index_room]``; each send
    is (topic bytes, queue id, flag, queue offset, sysFlag, born timestamp,
    reconsume times, body bytes, stored properties bytes, record size).
    With ``wire`` (a leader with followers) each entry's push JSON
    (``Entry.json_bytes``) is made here too, from the record just written.
    Returns the entries made by ``make_entry`` -- the leading sends that fit
    --, the data and index bytes written in ``used_out`` and ``iused_out``."""
    cdef Files f
    cdef Py_ssize_t used = 0, iused = 0, size, rsize
    cdef int64_t idx = first_index, phy
    cdef tuple s
    cdef bytes topic, body, props
    cdef uint8_t* d
    cdef int32_t sys_flag
    cdef bint in_place = made_in_place(make_entry)
    entries = []
    try:
        hold(&f, data, at, room, index, index_at, index_room)
        for s in sends:
            topic, body, props = s[0], s[7], s[8]
            if topic is None or body is None or props is None:
                raise TypeError("a send's topic, body and properties are bytes")
            sys_flag = s[4]
            rsize = c_record_size(sys_flag, PyBytes_GET_SIZE(body), PyBytes_GET_SIZE(topic),
                                  PyBytes_GET_SIZE(props))
            if rsize != s[9] or PyBytes_GET_SIZE(topic) > MAX_TOPIC or \
                    PyBytes_GET_SIZE(props) > MAX_PROPS or \
                    PyBytes_GET_SIZE(born) != (20 if sys_flag & 0x10 else 8) or \
                    PyBytes_GET_SIZE(store_host) != (20 if sys_flag & 0x20 else 8):
                raise ValueError("a send's sizes do not add up")
            size = rsize + BODY_OFFSET
            if used + size + MIN_BLANK > room or iused + UNIT > index_room:
                break
            phy = pos + used
            d = <uint8_t*>f.data.buf + at + used
            put_head(d, <uint8_t*>f.index.buf + index_at + iused, MAGIC, <int32_t>size, idx, term,
                     phy, 0, 0, 0, <int32_t>rsize)  # channel, chain and body CRC 0
            c_write_record(d + BODY_OFFSET, <int32_t>s[1], <int32_t>s[2], <int64_t>s[3],
                           phy + BODY_OFFSET, sys_flag, <int64_t>s[5],
                           <const uint8_t*>PyBytes_AS_STRING(born), PyBytes_GET_SIZE(born), now,
                           <const uint8_t*>PyBytes_AS_STRING(store_host),
                           PyBytes_GET_SIZE(store_host), <int32_t>s[6], 0,
                           <const uint8_t*>PyBytes_AS_STRING(body), PyBytes_GET_SIZE(body),
                           <const uint8_t*>PyBytes_AS_STRING(topic), PyBytes_GET_SIZE(topic),
                           <const uint8_t*>PyBytes_AS_STRING(props), PyBytes_GET_SIZE(props))
            body = PyBytes_FromStringAndSize(<const char*>d + BODY_OFFSET, rsize)
            w = wire_of(d + BODY_OFFSET, rsize, 0, 0, 0, idx, MAGIC, phy, size, term) \
                if wire else None
            if in_place and slots_known:  # its slots filled here: no __new__, no setattr
                e = new_instance(make_entry)
                set_slot(e, 0, idx)
                set_slot(e, 1, term)
                set_slot(e, 2, body)
                set_slot(e, 3, phy)
                set_slot(e, 4, MAGIC)
                set_slot(e, 5, 0)
                set_slot(e, 6, 0)
                set_slot(e, 7, 0)
                set_slot(e, 8, size)
                set_slot(e, 9, w)
                PyObject_GC_UnTrack(e)  # (as below)
                entries.append(e)
            elif in_place:  # its fields set here: no Python __init__ per send
                e = make_entry.__new__(make_entry)
                e.index = idx
                e.term = term
                e.body = body
                e.pos = phy
                e.magic = MAGIC
                e.channel = 0
                e.chain_crc = 0
                e.body_crc = 0
                e.size = size
                e.wire = w
                # its fields are ints and bytes: it can be in no reference cycle, so
                # the collector need not walk it -- a leader keeps ~8 MiB of them
                # (``RECENT_BYTES``), which every older-generation collection
                # walked again
                PyObject_GC_UnTrack(e)
                entries.append(e)
            else:
                e = make_entry(idx, term, body, phy, MAGIC, 0, 0, 0, size)
                if wire:
                    e.wire = w
                entries.append(e)
            used += size
            iused += UNIT
            idx += 1
    finally:
        release(&f)
    used_out[0] = used
    iused_out[0] = iused
    return entries


# The leader's append of a read's sends in one call (``append_run``): the
# fields of the store, its member state and its two tail files read and set
# at their slots (~140 instructions each through the attribute protocol; a
# read's append reads about twenty and sets ten, besides the three Python
# frames of the twin's method, its leader checks and ``is_leader``) for the
# last classes met, through the attributes for any other object and for an
# unset slot.  ``bind_store`` hands over what the store module owns.
cdef object _entry_class = None  # rmq.dledger.entry.Entry
cdef object _leader = None       # Role.LEADER
cdef int64_t _recent_bytes_max = 0  # mmap_store.RECENT_BYTES


def bind_store(entry_class, leader, int64_t recent_bytes):
    """``Entry``, ``Role.LEADER`` and ``RECENT_BYTES`` of rmq.dledger, which
    ``append_run`` makes entries of, compares the role with and keeps up to."""
    global _entry_class, _leader, _recent_bytes_max
    _entry_class = entry_class
    _leader = leader
    _recent_bytes_max = recent_bytes


cdef enum:
    # a DLedgerMmapFileStore's fields, in ``STORE_FIELDS``' order
    ST_MS = 0
    ST_DATA = 1
    ST_INDEX = 2
    ST_BEGIN = 3
    ST_END = 4
    ST_END_TERM = 5
    ST_RECENT = 6
    ST_RECENT_FIRST = 7
    ST_RECENT_BYTES = 8
    ST_N = 9
    # a MemberState's, in ``MS_FIELDS``'
    MS_ROLE = 0
    MS_TRANSFEREE = 1
    MS_TERM = 2
    MS_PEERS = 3
    MS_END = 4
    MS_END_TERM = 5
    MS_N = 6
    # a MappedFile's, in ``MF_FIELDS``'
    MF_FROM = 0
    MF_WROTE = 1
    MF_COMMITTED = 2
    MF_SIZE = 3
    MF_VIEW = 4
    MF_N = 5

cdef tuple STORE_FIELDS = ("member_state", "data", "index", "ledger_begin_index",
                           "ledger_end_index", "ledger_end_term", "_recent", "_recent_first",
                           "_recent_bytes")
cdef tuple MS_FIELDS = ("role", "transferee", "curr_term", "peer_map", "ledger_end_index",
                        "ledger_end_term")
cdef tuple MF_FIELDS = ("file_from_offset", "wrote_position", "committed_position", "file_size",
                        "view")


cdef ClassOffsets _ST = ClassOffsets(STORE_FIELDS, True)
cdef ClassOffsets _MS = ClassOffsets(MS_FIELDS, True)
cdef ClassOffsets _MFO = ClassOffsets(MF_FIELDS, True)


cdef inline object field(object o, Py_ssize_t* at, int i, tuple names):
    return slot_or_attr(o, at[i], <str>names[i])


cdef inline int set_field(object o, Py_ssize_t* at, int i, tuple names, object v) except -1:
    return set_slot_or_attr(o, at[i], <str>names[i], v)


cdef object last_file(object queue):
    """The queue's last mapped file, None when it has none."""
    files = queue.mapped_files
    return files[len(files) - 1] if files else None


def append_run(store, list sends not None, bytes born not None, bytes store_host not None,
               int64_t now):
    """``append_in_place`` of the records of ``sends`` (``write_entries``'
    tuples) as consecutive entries of the leader ``store`` in one call: the
    leading ones that fit the current data and index files (none when a
    file must be made or closed first).  Refused as its ``_leader_checks``
    refuses.  The twin of ``rmq.dledger.mmap_store._append_run``."""
    cdef Py_ssize_t st[ST_N]
    cdef Py_ssize_t ma[MS_N]
    cdef Py_ssize_t m[MF_N]
    cdef Py_ssize_t im[MF_N]
    cdef Py_ssize_t at, iat, used = 0, iused = 0
    cdef int64_t first, pos
    # (the offsets copied: an attribute read may run code that meets other classes)
    _ST.copy(store, st)
    ms = field(store, st, ST_MS, STORE_FIELDS)
    _MS.copy(ms, ma)
    data = field(store, st, ST_DATA, STORE_FIELDS)
    index = field(store, st, ST_INDEX, STORE_FIELDS)
    if _leader is None or field(ms, ma, MS_ROLE, MS_FIELDS) is not _leader or \
            field(ms, ma, MS_TRANSFEREE, MS_FIELDS) is not None or data.no_space:
        store._leader_checks()  # (raises why not)
    mf = last_file(data)
    imf = last_file(index)
    if mf is None or imf is None:
        return []
    _MFO.copy(mf, m)
    _MFO.copy(imf, im)
    first = <int64_t>field(store, st, ST_END, STORE_FIELDS) + 1
    at = field(mf, m, MF_WROTE, MF_FIELDS)
    iat = field(imf, im, MF_WROTE, MF_FIELDS)
    if at == <Py_ssize_t>field(mf, m, MF_SIZE, MF_FIELDS) or \
            iat == <Py_ssize_t>field(imf, im, MF_SIZE, MF_FIELDS) or \
            <int64_t>field(imf, im, MF_FROM, MF_FIELDS) + iat != first * UNIT:
        return []
    pos = <int64_t>field(mf, m, MF_FROM, MF_FIELDS) + at
    entries = c_write_entries(field(mf, m, MF_VIEW, MF_FIELDS), at, pos,
                              <Py_ssize_t>data.mapped_file_size - at,
                              field(imf, im, MF_VIEW, MF_FIELDS), iat,
                              <Py_ssize_t>index.mapped_file_size - iat, first,
                              field(ms, ma, MS_TERM, MS_FIELDS), born, store_host, now, sends,
                              _entry_class, len(field(ms, ma, MS_PEERS, MS_FIELDS)) > 1, &used,
                              &iused)
    if not entries:
        return entries
    wrote = at + used
    set_field(mf, m, MF_WROTE, MF_FIELDS, wrote)
    set_field(mf, m, MF_COMMITTED, MF_FIELDS, wrote)
    wrote = iat + iused
    set_field(imf, im, MF_WROTE, MF_FIELDS, wrote)
    set_field(imf, im, MF_COMMITTED, MF_FIELDS, wrote)
    last = entries[len(entries) - 1]
    cdef bint slotted = slots_known and type(last) is in_place_class
    end = slot_or_attr(last, slot_at[0] if slotted else -1, "index")
    set_field(store, st, ST_END, STORE_FIELDS, end)
    set_field(ms, ma, MS_END, MS_FIELDS, end)
    end = slot_or_attr(last, slot_at[1] if slotted else -1, "term")
    set_field(store, st, ST_END_TERM, STORE_FIELDS, end)
    set_field(ms, ma, MS_END_TERM, MS_FIELDS, end)
    if field(store, st, ST_BEGIN, STORE_FIELDS) == -1:
        set_field(store, st, ST_BEGIN, STORE_FIELDS, first)
    kept = keep_entries(field(store, st, ST_RECENT, STORE_FIELDS), entries,
                        field(store, st, ST_RECENT_FIRST, STORE_FIELDS),
                        field(store, st, ST_RECENT_BYTES, STORE_FIELDS), _recent_bytes_max)
    set_field(store, st, ST_RECENT_FIRST, STORE_FIELDS, kept[0])
    set_field(store, st, ST_RECENT_BYTES, STORE_FIELDS, kept[1])
    return entries


cdef inline bint int32_ok(object v):
    """``-2**31 <= v < 2**31``, read in C for an int (every field of the rows
    ``decode_push`` makes): the comparisons of Python objects took about
    five hundred instructions a row."""
    cdef int overflow = 0
    cdef long long x
    if PyLong_CheckExact(v):
        x = PyLong_AsLongLongAndOverflow(v, &overflow)
        return overflow == 0 and -2147483648 <= x <= 2147483647
    return -2147483648 <= v <= 2147483647


cdef inline bint int64_is(object v, int64_t want):
    """``v == want``, read in C for an int (as ``int32_ok``)."""
    cdef int overflow = 0
    cdef long long x
    if PyLong_CheckExact(v):
        x = PyLong_AsLongLongAndOverflow(v, &overflow)
        return overflow == 0 and x == want
    return v == want


def write_rows(data, Py_ssize_t at, int64_t pos, Py_ssize_t room, index,
               Py_ssize_t index_at, Py_ssize_t index_room, int64_t first_index,
               list rows not None):
    """Compiled twin of ``_write_rows`` in rmq/dledger/mmap_store.py: a
    follower's pushed entries written as consecutive entries in one call.

    ``rows`` are the entries of a push as ``decode_push`` reads them
    (index, term, body, pos, magic, channel, chainCrc, bodyCrc, size); each
    is written as ``DLedgerMmapFileStore._place`` and the body copy write it
    -- the 48-byte header, the body -- at ``data[at + used:]`` and its index
    unit at ``index[index_at + iused:]``.  It stops before the first row not
    in order (its index not ``first_index`` + the rows before it, its pos
    not where the data's end lies: ``pos`` + bytes written), not leaving a
    blank's room in the data file, whose index unit would not fit, or with a
    field out of the record's range: the general append decides that one.
    Returns (rows written, data bytes written, index bytes written)."""
    cdef Files f
    cdef Py_ssize_t used = 0, iused = 0, size, blen, n = 0
    cdef int64_t idx = first_index, phy, term
    cdef int32_t magic
    cdef tuple r
    cdef bytes body
    cdef uint8_t* d
    try:
        hold(&f, data, at, room, index, index_at, index_room)
        for r in rows:
            body = r[2]
            if body is None or not int64_is(r[0], idx) or not int64_is(r[3], pos + used) or \
                    not int32_ok(r[4]) or not int32_ok(r[5]) or not int32_ok(r[6]) or \
                    not int32_ok(r[7]):
                break
            blen = PyBytes_GET_SIZE(body)
            size = blen + BODY_OFFSET
            if size > 2147483647 or used + size + MIN_BLANK > room or iused + UNIT > index_room:
                break
            phy = pos + used
            term = r[1]
            magic = r[4]
            d = <uint8_t*>f.data.buf + at + used
            put_head(d, <uint8_t*>f.index.buf + index_at + iused, magic, <int32_t>size, idx, term,
                     phy, <int32_t>r[5], <int32_t>r[6], <int32_t>r[7], <int32_t>blen)
            memcpy(d + BODY_OFFSET, PyBytes_AS_STRING(body), blen)
            used += size
            iused += UNIT
            idx += 1
            n += 1
    finally:
        release(&f)
    return n, used, iused


cdef enum:
    MAX_KEYS = 64  # distinct queues (or topics, codes) a read's sends are counted by in C


cdef struct Key:
    # a (topic, queue id) of a read's sends (``topic`` borrowed from a send)
    PyObject* topic
    int32_t qid
    PyObject* qid_obj  # (borrowed: the queue id object of the send that met it first)
    int64_t start, next, count


cdef inline bint same_obj(PyObject* a, object b) except -1:
    """``a == b`` as a dict key compares them (by identity first)."""
    if a == <PyObject*>b:
        return True
    return (<object>a) == b


cdef inline int find_key(Key* keys, int n, object topic, int32_t qid) except -2:
    """The place of (``topic``, ``qid``) in ``keys[:n]``, -1 if not there."""
    cdef int i
    for i in range(n):
        if keys[i].qid == qid and same_obj(keys[i].topic, topic):
            return i
    return -1


cdef inline Py_ssize_t row_size(tuple s, bytes topic_b, int32_t sys_flag, Py_ssize_t max_body,
                                Py_ssize_t limit) except -2:
    """The record size of send ``s`` (its topic encoded, its sysFlag with
    the host bits), or -1 when it is too big for ``max_body`` or a data file
    (``limit``): the run stops before it."""
    cdef Py_ssize_t body_len = len(s[11])
    cdef Py_ssize_t size = c_record_size(sys_flag, body_len, PyBytes_GET_SIZE(topic_b),
                                         len(s[12]))
    if body_len > max_body or size > max_body + 65536 or size > limit:
        return -1
    return size


def plain_runs(list sends not None, int32_t host_bits, dict table not None,
               Py_ssize_t max_body, Py_ssize_t limit):
    """A DLedger leader's plain sends of one read (``plain_sends``'
    readings) made into the rows ``write_entries`` writes, each with its
    queue offset (the next of ``table``, the (topic, queue id) -> next
    offset map, counting the sends before it): stops before the first send
    too big for ``max_body`` or for a data file (``limit``).  Returns (the
    rows, (topic, queue id, first queue offset, sends) per queue, each
    row's index keys, their sum).  The twin of
    ``rmq.dledger.commit_log._plain_runs``.

    The queues met are kept in a C array (a read meets a few): ``table`` is
    read once per queue and each topic encoded once per run of sends of the
    same topic, without a key tuple or dict update per send; more than
    ``MAX_KEYS`` queues go through ``_plain_runs_dict``."""
    cdef Key keys[MAX_KEYS]
    cdef int nk = 0, k
    cdef list runs = []
    cdef list keys_of = []
    cdef list queues = []
    cdef tuple s
    cdef bytes topic_b = None
    cdef object last_topic = None
    cdef int32_t sys_flag, qid
    cdef Py_ssize_t size, total = 0
    cdef int64_t queue_offset
    for s in sends:
        topic = s[5]
        if last_topic is None or not same_obj(<PyObject*>last_topic, topic):
            topic_b = topic.encode()
            last_topic = topic
        sys_flag = <int32_t>s[7] | host_bits
        size = row_size(s, topic_b, sys_flag, max_body, limit)
        if size < 0:
            break
        qid_obj = s[6]
        qid = qid_obj
        k = find_key(keys, nk, topic, qid)
        if k < 0:
            if nk == MAX_KEYS:
                return _plain_runs_dict(sends, host_bits, table, max_body, limit)
            k = nk
            nk += 1
            keys[k].topic = <PyObject*>topic
            keys[k].qid = qid
            keys[k].qid_obj = <PyObject*>qid_obj
            keys[k].start = keys[k].next = table.get((topic, qid_obj), 0)
        queue_offset = keys[k].next
        keys[k].next += 1
        runs.append((topic_b, qid_obj, s[9], queue_offset, sys_flag, s[8], s[10], s[11], s[12],
                     size))
        keys_of.append(s[13])
        total += s[13]
    for k in range(nk):
        queues.append((<object>keys[k].topic, <object>keys[k].qid_obj, keys[k].start,
                       keys[k].next - keys[k].start))
    return runs, queues, keys_of, total


def _plain_runs_dict(list sends not None, int32_t host_bits, dict table not None,
                     Py_ssize_t max_body, Py_ssize_t limit):
    """``plain_runs`` of a read of more than ``MAX_KEYS`` queues, its
    queues counted in a dict."""
    cdef dict offsets = {}
    cdef list runs = []
    cdef list keys_of = []
    cdef list queues = []
    cdef tuple s
    cdef bytes topic_b
    cdef int32_t sys_flag
    cdef Py_ssize_t size, total = 0
    for s in sends:
        topic_b = s[5].encode()
        sys_flag = <int32_t>s[7] | host_bits
        size = row_size(s, topic_b, sys_flag, max_body, limit)
        if size < 0:
            break
        key = (s[5], s[6])
        queue_offset = offsets.get(key)
        if queue_offset is None:
            queue_offset = table.get(key, 0)
        offsets[key] = queue_offset + 1
        runs.append((topic_b, s[6], s[9], queue_offset, sys_flag, s[8], s[10], s[11], s[12],
                     size))
        keys_of.append(s[13])
        total += s[13]
    for key, end in offsets.items():
        start = table.get(key, 0)
        queues.append((key[0], key[1], start, end - start))
    return runs, queues, keys_of, total


cdef inline object pos_of(entry):
    """``entry.pos``, from its slot when it is of the class ``write_entries`` fills."""
    return slot_or_attr(entry, slot_at[3] if slots_known and type(entry) is in_place_class
                        else -1, "pos")


def plain_stored(list entries not None, list sends not None, list runs not None,
                 dict table not None, int64_t body_offset):
    """The leading ``entries`` written for ``runs`` (``plain_runs``' rows of
    ``sends``): each send's queue offset taken in ``table``; returns (entry,
    the record's physical offset, queue offset, record size) per entry.
    The twin of ``rmq.dledger.commit_log._plain_stored``: ``table`` is set
    once per queue (to its last send's, in the order the queues are first
    met, as the twin's per-send writes leave it)."""
    cdef Py_ssize_t i, n = min(len(entries), len(sends), len(runs))
    cdef list out = []
    cdef tuple s, run
    cdef Key keys[MAX_KEYS]
    cdef int nk = 0, k
    cdef bint many = False
    cdef int32_t qid
    for i in range(n):
        entry = entries[i]
        s = sends[i]
        run = runs[i]
        if many:
            table[(s[5], s[6])] = run[3] + 1
        else:
            qid = s[6]
            k = find_key(keys, nk, s[5], qid)
            if k < 0:
                if nk == MAX_KEYS:  # the queues so far, then per send
                    for k in range(nk):
                        table[(<object>keys[k].topic, <object>keys[k].qid_obj)] = keys[k].next
                    many = True
                    table[(s[5], s[6])] = run[3] + 1
                    out.append((entry, pos_of(entry) + body_offset, run[3], run[9]))
                    continue
                k = nk
                nk += 1
                keys[k].topic = <PyObject*>s[5]
                keys[k].qid = qid
                keys[k].qid_obj = <PyObject*>s[6]
            keys[k].next = run[3] + 1
        out.append((entry, pos_of(entry) + body_offset, run[3], run[9]))
    if not many:
        for k in range(nk):
            table[(<object>keys[k].topic, <object>keys[k].qid_obj)] = keys[k].next
    return out


def tally(list sends not None, list stored not None, dict sizes not None, dict counts not None,
          int oneway_bit):
    """Count the stored sends (``stored``: what ``plain_stored`` returned
    for the leading ``sends``): [messages, bytes] per topic in ``sizes``,
    sends per (request code, oneway) in ``counts``.  The twin of
    ``rmq.broker.dledger_lane._tally``: the topics and (code, oneway) pairs
    are counted in C arrays first, then each added to its dict once (in the
    order first met, as the twin's per-send updates leave them); more than
    ``MAX_KEYS`` of either go the twin's way."""
    cdef Py_ssize_t i, n = min(len(sends), len(stored))
    cdef tuple s
    cdef list t
    cdef Key topics[MAX_KEYS]  # (topic, count, bytes in start)
    cdef Key codes[MAX_KEYS]   # (code object, oneway in qid, count)
    cdef int nt = 0, nc = 0, k
    cdef int32_t oneway
    cdef int64_t size
    for i in range(n):
        s = sends[i]
        size = (<tuple>stored[i])[3]
        k = find_key(topics, nt, s[5], 0)
        if k < 0:
            if nt == MAX_KEYS:
                return _tally_each(sends, stored, sizes, counts, oneway_bit)
            k = nt
            nt += 1
            topics[k].topic = <PyObject*>s[5]
            topics[k].qid = 0
            topics[k].count = 0
            topics[k].start = 0
        topics[k].count += 1
        topics[k].start += size
        oneway = 1 if s[2] & oneway_bit else 0
        for k in range(nc):
            if codes[k].qid == oneway and same_obj(codes[k].topic, s[1]):
                break
        else:
            if nc == MAX_KEYS:
                return _tally_each(sends, stored, sizes, counts, oneway_bit)
            k = nc
            nc += 1
            codes[k].topic = <PyObject*>s[1]
            codes[k].qid = oneway
            codes[k].count = 0
        codes[k].count += 1
    for k in range(nt):
        topic = <object>topics[k].topic
        t = sizes.get(topic)
        if t is None:
            sizes[topic] = [topics[k].count, topics[k].start]
        else:
            t[0] += topics[k].count
            t[1] += topics[k].start
    for k in range(nc):
        key = (<object>codes[k].topic, codes[k].qid == 1)
        counts[key] = counts.get(key, 0) + codes[k].count
    return None


def _tally_each(list sends not None, list stored not None, dict sizes not None,
                dict counts not None, int oneway_bit):
    """``tally`` send by send (a read of more than ``MAX_KEYS`` topics or
    (code, oneway) pairs)."""
    cdef Py_ssize_t i, n = min(len(sends), len(stored))
    cdef tuple s
    cdef list t
    for i in range(n):
        s = sends[i]
        size = (<tuple>stored[i])[3]
        t = sizes.get(s[5])
        if t is None:
            sizes[s[5]] = [1, size]
        else:
            t[0] += 1
            t[1] += size
        key = (s[1], bool(s[2] & oneway_bit))
        counts[key] = counts.get(key, 0) + 1
