# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""A DLedger leader's plain sends of one read stored in one call
(``c_append_plain``, the compiled ``DLedgerCommitLog.append_plain``, for
the send lane's ``store_read``), and a follower's pushed entries written
in one call (``write_rows``).

Each send's record and queue are kept in C arrays (no Python row per
send), its queue offset counted there, and its entry -- the 48-byte entry
header, then the commit-log record with its physical offset (where the
record lies in the data files) -- written straight from the send's bytes
into the mapped data file, its 32-byte index unit into the mapped index
file; an ``Entry`` is made per send for the leader's pushes (its slots
filled in place, without the dataclass's ``__init__``).  Without it each
send paid a dozen Python calls (the room check, the header, the record, the
index unit, the ledger's end).  A run stops before the first entry that
would not leave a blank's room in the data file, or whose index unit would
not fit: that one is appended the usual way (a blank, the next file) and
the run goes on.
"""

from cpython.buffer cimport PyBUF_SIMPLE, PyBUF_WRITABLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.object cimport PyObject
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.long cimport PyLong_AsLongLongAndOverflow, PyLong_CheckExact
from cpython.mem cimport PyMem_Free, PyMem_Malloc
from libc.stdint cimport int32_t, int64_t, uint8_t
from libc.string cimport memcpy

from rmq._fast.byteorder cimport get32, get64, put32, put64
from cpython.ref cimport Py_INCREF
from rmq._fast.dledger_wire cimport new_instance, take_ref, wire_of
from rmq._fast.dledger_push cimport keep_entries
from rmq._fast.slots cimport set_slot_or_attr, slot_offset, slot_or_attr
from rmq._fast.store_put cimport ClassOffsets
from rmq._fast.record cimport c_record_size, c_write_record
from rmq._fast.index_slot cimport index_count

import logging
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


cdef struct Rec:
    # a send's record as ``c_write_entries`` writes it (the bytes borrowed
    # from the send's ``Plain``: held by the lane's read)
    PyObject* topic_b
    const uint8_t* topic
    Py_ssize_t topic_len
    const uint8_t* body
    Py_ssize_t body_len
    const uint8_t* props
    Py_ssize_t props_len
    int32_t qid, flag, sys_flag, reconsume
    int64_t qoff, born_ts
    Py_ssize_t size
    Py_ssize_t key  # its queue's place in the read's QKeys


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


cdef list c_write_entries(data, Py_ssize_t at, int64_t pos, Py_ssize_t room, index,
                          Py_ssize_t index_at, Py_ssize_t index_room, int64_t first_index,
                          int64_t term, bytes born, bytes store_host, int64_t now,
                          const Rec* recs, Py_ssize_t n, make_entry, bint wire,
                          Py_ssize_t* used_out, Py_ssize_t* iused_out):
    """Write the records of ``recs[:n]`` as entries ``first_index``, ... of
    ``term`` at ``data[at:at + room]`` (``pos``: where ``at`` lies in the
    data files) and their index units at ``index[index_at:index_at +
    index_room]``, each record straight from its send's bytes (the one copy
    of its body).  With ``wire`` (a leader with followers) each entry's push
    JSON (``Entry.json_bytes``) is made here too, from the record just
    written.  An ``Entry`` (a slots dataclass of ``ENTRY_FIELDS``) is made
    by its type's allocator, its slots filled directly; any other
    ``make_entry`` is called.  Returns the entries made -- the leading
    records that fit --, the data and index bytes written in ``used_out``
    and ``iused_out``.  The twin of ``rmq.dledger.mmap_store._write_entries``
    (whose rows are ``Rec``'s fields as a tuple)."""
    cdef Files f
    cdef Py_ssize_t used = 0, iused = 0, size, rsize, i
    cdef int64_t idx = first_index, phy
    cdef const Rec* r
    cdef uint8_t* d
    cdef bint slotted = made_in_place(make_entry) and slots_known
    entries = []
    try:
        hold(&f, data, at, room, index, index_at, index_room)
        for i in range(n):
            r = &recs[i]
            rsize = c_record_size(r.sys_flag, r.body_len, r.topic_len, r.props_len)
            if rsize != r.size or r.topic_len > MAX_TOPIC or r.props_len > MAX_PROPS or \
                    PyBytes_GET_SIZE(born) != (20 if r.sys_flag & 0x10 else 8) or \
                    PyBytes_GET_SIZE(store_host) != (20 if r.sys_flag & 0x20 else 8):
                raise ValueError("a send's sizes do not add up")
            size = rsize + BODY_OFFSET
            if used + size + MIN_BLANK > room or iused + UNIT > index_room:
                break
            phy = pos + used
            d = <uint8_t*>f.data.buf + at + used
            put_head(d, <uint8_t*>f.index.buf + index_at + iused, MAGIC, <int32_t>size, idx, term,
                     phy, 0, 0, 0, <int32_t>rsize)  # channel, chain and body CRC 0
            c_write_record(d + BODY_OFFSET, r.qid, r.flag, r.qoff, phy + BODY_OFFSET, r.sys_flag,
                           r.born_ts, <const uint8_t*>PyBytes_AS_STRING(born),
                           PyBytes_GET_SIZE(born), now,
                           <const uint8_t*>PyBytes_AS_STRING(store_host),
                           PyBytes_GET_SIZE(store_host), r.reconsume, 0, r.body, r.body_len,
                           r.topic, r.topic_len, r.props, r.props_len)
            body = PyBytes_FromStringAndSize(<const char*>d + BODY_OFFSET, rsize)
            w = wire_of(d + BODY_OFFSET, rsize, 0, 0, 0, idx, MAGIC, phy, size, term) \
                if wire else None
            if slotted:  # its slots filled here: no __new__, no setattr, no __init__
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


# The leader's append of a read's sends in one call (``c_append_run``): the
# fields of the store, its member state and its two tail files read and set
# at their slots (~140 instructions each through the attribute protocol; a
# read's append reads about twenty and sets ten, besides the three Python
# frames of the twin's method, its leader checks and ``is_leader``) for the
# last classes met, through the attributes for any other object and for an
# unset slot.  ``bind_store`` hands over what the store module owns.
cdef object _entry_class = None  # rmq.dledger.entry.Entry
cdef object _leader = None       # Role.LEADER
cdef int64_t _recent_bytes_max = 0  # mmap_store.RECENT_BYTES
cdef int64_t _zero_ahead = 0  # mapped_file.ZERO_AHEAD


def bind_store(entry_class, leader, int64_t recent_bytes, int64_t zero_ahead):
    """``Entry``, ``Role.LEADER`` and ``RECENT_BYTES`` of rmq.dledger, which
    ``c_append_run`` makes entries of, compares the role with and keeps up
    to, and ``ZERO_AHEAD`` of rmq.store.mapped_file, the zeros a data file
    keeps written ahead of its appends (``zeros_ahead``)."""
    global _entry_class, _leader, _recent_bytes_max, _zero_ahead
    _entry_class = entry_class
    _leader = leader
    _recent_bytes_max = recent_bytes
    _zero_ahead = zero_ahead


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
    MF_BUFFER = 5
    MF_ZEROED = 6
    MF_RESERVED = 7
    MF_N = 8

cdef tuple STORE_FIELDS = ("member_state", "data", "index", "ledger_begin_index",
                           "ledger_end_index", "ledger_end_term", "_recent", "_recent_first",
                           "_recent_bytes")
cdef tuple MS_FIELDS = ("role", "transferee", "curr_term", "peer_map", "ledger_end_index",
                        "ledger_end_term")
cdef tuple MF_FIELDS = ("file_from_offset", "wrote_position", "committed_position", "file_size",
                        "view", "write_buffer", "zeroed_to", "reserved_to")


cdef ClassOffsets _ST = ClassOffsets(STORE_FIELDS, True)
cdef ClassOffsets _MS = ClassOffsets(MS_FIELDS, True)
cdef ClassOffsets _MFO = ClassOffsets(MF_FIELDS, True)


cdef inline object field(object o, Py_ssize_t* at, int i, tuple names):
    return slot_or_attr(o, at[i], <str>names[i])


cdef inline int set_field(object o, Py_ssize_t* at, int i, tuple names, object v) except -1:
    return set_slot_or_attr(o, at[i], <str>names[i], v)


cdef int zeros_ahead(data, mf, Py_ssize_t* m, Py_ssize_t at) except -1:
    """``mf.zero_ahead()`` before an append at ``at`` when the data files
    keep zeros ahead and ``mf`` has fewer than ``ZERO_AHEAD`` of them left:
    its own check read at the slots here, no Python frame per append while
    the zeros last."""
    if data.zero_ahead and <int64_t>field(mf, m, MF_ZEROED, MF_FIELDS) - at < _zero_ahead:
        mf.zero_ahead()
    return 0


cdef object last_file(object queue):
    """The queue's last mapped file, None when it has none."""
    files = queue.mapped_files
    return files[len(files) - 1] if files else None


cdef bint tail_room(store, Py_ssize_t* st, mf, Py_ssize_t* m, imf, Py_ssize_t* im,
                    int64_t* first, Py_ssize_t* at, Py_ssize_t* iat) except -1:
    """Whether the data file ``mf`` and the index file ``imf`` (their
    queues' last) take the store's next entry: neither full, the index
    file ending at its unit.  Its index in ``first``, where the files'
    written bytes end in ``at`` and ``iat``; the files' field offsets in
    ``m`` and ``im``."""
    _MFO.copy(mf, m)
    _MFO.copy(imf, im)
    first[0] = <int64_t>field(store, st, ST_END, STORE_FIELDS) + 1
    at[0] = field(mf, m, MF_WROTE, MF_FIELDS)
    iat[0] = field(imf, im, MF_WROTE, MF_FIELDS)
    return at[0] != <Py_ssize_t>field(mf, m, MF_SIZE, MF_FIELDS) and \
        iat[0] != <Py_ssize_t>field(imf, im, MF_SIZE, MF_FIELDS) and \
        <int64_t>field(imf, im, MF_FROM, MF_FIELDS) + iat[0] == first[0] * UNIT


cdef int tail_written(store, Py_ssize_t* st, ms, Py_ssize_t* ma, mf, Py_ssize_t* m,
                      Py_ssize_t wrote, imf, Py_ssize_t* im, Py_ssize_t iwrote, int64_t first,
                      end, end_term) except -1:
    """Entries ``first`` to ``end`` (of ``end_term``) written into ``mf`` up
    to ``wrote`` and their units into ``imf`` up to ``iwrote``: the files'
    positions, the store's and its member state's ends, the store's begin
    when it had none."""
    set_field(mf, m, MF_WROTE, MF_FIELDS, wrote)
    set_field(mf, m, MF_COMMITTED, MF_FIELDS, wrote)
    set_field(imf, im, MF_WROTE, MF_FIELDS, iwrote)
    set_field(imf, im, MF_COMMITTED, MF_FIELDS, iwrote)
    set_field(store, st, ST_END, STORE_FIELDS, end)
    set_field(ms, ma, MS_END, MS_FIELDS, end)
    set_field(store, st, ST_END_TERM, STORE_FIELDS, end_term)
    set_field(ms, ma, MS_END_TERM, MS_FIELDS, end_term)
    if field(store, st, ST_BEGIN, STORE_FIELDS) == -1:
        set_field(store, st, ST_BEGIN, STORE_FIELDS, first)
    return 0


cdef list c_append_run(store, const Rec* recs, Py_ssize_t n, bytes born, bytes store_host,
                       int64_t now):
    """``append_in_place`` of ``recs[:n]``' records as consecutive entries of
    the leader ``store`` in one call: the leading ones that fit the current
    data and index files (none when a file must be made or closed first).
    Refused as its ``_leader_checks`` refuses.  The twin of
    ``rmq.dledger.mmap_store._append_run``."""
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
    if mf is None or imf is None or not tail_room(store, st, mf, m, imf, im, &first, &at, &iat):
        return []
    zeros_ahead(data, mf, m, at)
    pos = <int64_t>field(mf, m, MF_FROM, MF_FIELDS) + at
    entries = c_write_entries(field(mf, m, MF_VIEW, MF_FIELDS), at, pos,
                              <Py_ssize_t>data.mapped_file_size - at,
                              field(imf, im, MF_VIEW, MF_FIELDS), iat,
                              <Py_ssize_t>index.mapped_file_size - iat, first,
                              field(ms, ma, MS_TERM, MS_FIELDS), born, store_host, now, recs, n,
                              _entry_class, len(field(ms, ma, MS_PEERS, MS_FIELDS)) > 1, &used,
                              &iused)
    if not entries:
        return entries
    last = entries[len(entries) - 1]
    cdef bint slotted = slots_known and type(last) is in_place_class
    tail_written(store, st, ms, ma, mf, m, at + used, imf, im, iat + iused, first,
                 slot_or_attr(last, slot_at[0] if slotted else -1, "index"),
                 slot_or_attr(last, slot_at[1] if slotted else -1, "term"))
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
    """Compiled twin of ``_write_rows`` in rmq/dledger/mmap_store.py
    (``c_write_rows``)."""
    cdef Py_ssize_t used = 0, iused = 0
    cdef Py_ssize_t n = c_write_rows(data, at, pos, room, index, index_at, index_room,
                                     first_index, rows, &used, &iused)
    return n, used, iused


cdef Py_ssize_t c_write_rows(data, Py_ssize_t at, int64_t pos, Py_ssize_t room, index,
                             Py_ssize_t index_at, Py_ssize_t index_room, int64_t first_index,
                             list rows, Py_ssize_t* used_out, Py_ssize_t* iused_out) except -1:
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
    Returns the rows written; the data and index bytes written in
    ``used_out`` and ``iused_out``."""
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
    used_out[0] = used
    iused_out[0] = iused
    return n


# A follower's append of a push's rows in one call (``append_rows``): the
# store's, its member state's and its two tail files' fields read and set at
# their slots, without the twin's dozen Python frames a push (the follower
# checks, the two tail files and their room, ``_advance`` of each, the
# ledger's end and the member state's).  ``bind_follower`` hands over what
# the store module owns.
cdef object _follower = None     # Role.FOLLOWER
cdef object _rows_twin = None    # mmap_store's ``append_rows_as_follower``
cdef object _end_twin = None     # and its ``_end_of``


def bind_follower(follower, rows_twin, end_twin):
    """``Role.FOLLOWER`` and the twins ``append_rows_as_follower`` and
    ``_end_of`` (what ``append_rows`` and ``end_of`` hand any case but the
    common one)."""
    global _follower, _rows_twin, _end_twin
    _follower = follower
    _rows_twin = rows_twin
    _end_twin = end_twin


cdef object holding(queue, int64_t offset, int64_t need, Py_ssize_t* start):
    """The mapped file of ``queue`` (no write buffer) whose written bytes
    hold ``need`` bytes at ``offset``, found by its number as
    ``find_mapped_file_by_offset`` finds it, its place in ``start``; None
    for any other case (the twin decides it)."""
    cdef Py_ssize_t m[MF_N]
    cdef int64_t size, at
    files = queue.mapped_files
    if not files:
        return None
    size = queue.mapped_file_size
    first = files[0]
    _MFO.copy(first, m)
    at = offset // size - <int64_t>field(first, m, MF_FROM, MF_FIELDS) // size
    if at < 0 or at >= len(files):
        return None
    mf = files[at]
    _MFO.copy(mf, m)
    at = offset - <int64_t>field(mf, m, MF_FROM, MF_FIELDS)
    if at < 0 or need < 0 or at + need > <int64_t>field(mf, m, MF_WROTE, MF_FIELDS) or \
            field(mf, m, MF_BUFFER, MF_FIELDS) is not None:
        return None
    start[0] = at
    return mf


cdef inline int read_at(mf, Py_ssize_t at, Py_ssize_t n, uint8_t* out) except -1:
    """``n`` bytes of ``mf``'s mapping at ``at`` (inside its written bytes) into ``out``."""
    cdef Py_buffer b
    PyObject_GetBuffer(mf.view, &b, PyBUF_SIMPLE)
    try:
        if at + n > b.len:
            raise ValueError("a place outside its file")
        memcpy(out, <uint8_t*>b.buf + at, n)
    finally:
        PyBuffer_Release(&b)
    return 0


def end_of(store, int64_t index):
    """The compiled ``DLedgerMmapFileStore._end_of`` (twin: the method in
    rmq/dledger/mmap_store.py): where entry ``index`` of a follower (no kept
    entries) ends in the data files, from its index unit and its record's
    header read in the mapped files, the store's fields at their slots;
    any other case, and a unit or header that does not agree, through the
    twin (which reads it from the kept entry, or raises why not)."""
    cdef Py_ssize_t st[ST_N]
    cdef Py_ssize_t at = 0
    cdef uint8_t unit[UNIT]
    cdef uint8_t head[BODY_OFFSET]
    cdef int64_t pos, size
    _ST.copy(store, st)
    begin = field(store, st, ST_BEGIN, STORE_FIELDS)
    if begin == -1 or index < begin or index > field(store, st, ST_END, STORE_FIELDS) or \
            field(store, st, ST_RECENT, STORE_FIELDS):
        return _end_twin(store, index)
    mf = holding(field(store, st, ST_INDEX, STORE_FIELDS), index * UNIT, UNIT, &at)
    if mf is None:
        return _end_twin(store, index)
    read_at(mf, at, UNIT, unit)
    pos = get64(unit + 4)
    size = get32(unit + 12)
    mf = holding(field(store, st, ST_DATA, STORE_FIELDS), pos, size, &at) \
        if size >= BODY_OFFSET else None
    if mf is None:
        return _end_twin(store, index)
    read_at(mf, at, BODY_OFFSET, head)
    if get64(head + 24) != pos or get32(head + 4) != size or get32(head + 44) + BODY_OFFSET != size:
        return _end_twin(store, index)
    return pos + size


def append_rows(store, list rows not None, leader_term, leader_id):
    """The compiled ``DLedgerMmapFileStore.append_rows_as_follower`` (twin:
    the method in rmq/dledger/mmap_store.py).  The common case -- a follower
    of ``leader_id`` in ``leader_term`` with no kept entries, whose current
    data and index files take the leading rows (``c_write_rows``) -- is
    written here, the positions and ends set at their slots; any other
    case, and the rows left after that write, go to the twin, which
    refuses, closes a file or writes them as it would have."""
    cdef Py_ssize_t st[ST_N]
    cdef Py_ssize_t ma[MS_N]
    cdef Py_ssize_t m[MF_N]
    cdef Py_ssize_t im[MF_N]
    cdef Py_ssize_t at, iat, n, used = 0, iused = 0
    cdef int64_t first
    # (the offsets copied: an attribute read may run code that meets other classes)
    _ST.copy(store, st)
    ms = field(store, st, ST_MS, STORE_FIELDS)
    _MS.copy(ms, ma)
    data = field(store, st, ST_DATA, STORE_FIELDS)
    index = field(store, st, ST_INDEX, STORE_FIELDS)
    mf = last_file(data)
    imf = last_file(index)
    if _follower is None or not rows or mf is None or imf is None or \
            field(ms, ma, MS_ROLE, MS_FIELDS) is not _follower or \
            leader_term != field(ms, ma, MS_TERM, MS_FIELDS) or leader_id != ms.leader_id or \
            field(store, st, ST_RECENT, STORE_FIELDS) or \
            not tail_room(store, st, mf, m, imf, im, &first, &at, &iat):
        return _rows_twin(store, rows, leader_term, leader_id)
    zeros_ahead(data, mf, m, at)
    n = c_write_rows(field(mf, m, MF_VIEW, MF_FIELDS), at,
                     <int64_t>field(mf, m, MF_FROM, MF_FIELDS) + at,
                     <Py_ssize_t>data.mapped_file_size - at, field(imf, im, MF_VIEW, MF_FIELDS),
                     iat, <Py_ssize_t>index.mapped_file_size - iat, first, rows, &used, &iused)
    if n:
        last = <tuple>rows[n - 1]
        tail_written(store, st, ms, ma, mf, m, at + used, imf, im, iat + iused, first, last[0],
                     last[1])
    if n < len(rows):
        return _rows_twin(store, rows[n:] if n else rows, leader_term, leader_id)


# A DLedger leader's plain sends of one read stored in one call
# (``c_append_plain``, for the send lane's ``store_read``): each send's record
# in a ``Rec`` and its queue's next offset in a ``QKey`` -- C arrays, no
# Python row per send --, the records written from the sends' own bytes.
# ``bind_commit_log`` hands over what rmq.dledger.commit_log owns.
cdef object _record_writer = None  # commit_log._RecordWriter


class _Unbound(Exception):
    """(what ``_dledger_error`` is until ``bind_commit_log``: never raised)"""


cdef object _dledger_error = _Unbound  # rmq.dledger.protocol.DLedgerError
_log = logging.getLogger("store")  # (the commit log's logger)


def bind_commit_log(record_writer, dledger_error):
    """``_RecordWriter`` and ``DLedgerError`` of rmq.dledger: the writer of a
    record appended where a file ends, and the refusal an append may raise."""
    global _record_writer, _dledger_error
    _record_writer = record_writer
    _dledger_error = dledger_error


cdef enum:
    MAX_KEYS = 64  # distinct queues a read's sends are looked for in C; a dict beyond


cdef struct QKey:
    # a (topic, queue id) of a read's sends (the objects borrowed from the
    # send that met it first)
    PyObject* topic
    PyObject* qid_obj
    int32_t qid
    int64_t next       # its next queue offset
    Py_ssize_t first   # the first send of it


cdef inline bint same_obj(PyObject* a, object b) except -1:
    """``a == b`` as a dict key compares them (by identity first)."""
    if a == <PyObject*>b:
        return True
    return (<object>a) == b


cdef Py_ssize_t new_key(QKey* keys, Py_ssize_t k, dict table, object topic, object qid_obj,
                        int32_t qid, Py_ssize_t row) except -1:
    """``keys[k]``: (``topic``, ``qid``) met first at send ``row``, its next
    offset from ``table``."""
    keys[k].topic = <PyObject*>topic
    keys[k].qid_obj = <PyObject*>qid_obj
    keys[k].qid = qid
    keys[k].next = table.get((topic, qid_obj), 0)
    keys[k].first = row
    return k


cdef Py_ssize_t plain_rows(const Plain* sends, Py_ssize_t n, int32_t host_bits, dict table,
                           Py_ssize_t max_body, Py_ssize_t limit, Rec* recs, QKey* keys,
                           Py_ssize_t* nk, list qids, int64_t* total_keys) except -1:
    """``recs`` of the leading ``sends`` (the lane's readings), each with
    its queue offset (its queue's next in ``table``, counting the sends
    before it): stops before the first send too big for ``max_body`` or for
    a data file (``limit``).  The queue ids met are made numbers once per
    queue (kept in ``qids``).  Returns how many; their index keys summed in
    ``total_keys``."""
    cdef Py_ssize_t i, j, k, size
    cdef int32_t qid, sys_flag
    cdef dict index = None
    cdef const Plain* s
    cdef Rec* r
    # (an object, declared: left untyped, Cython would infer a C int from its
    # assignment and make a new int object at each use, so that the keys
    # would borrow one freed at once -- for queue ids past CPython's cached
    # small ints, a table key of whatever int took its place)
    cdef object qid_obj
    for i in range(n):
        s = &sends[i]
        topic = <object>s.topic
        sys_flag = s.sys_flag | host_bits
        size = c_record_size(sys_flag, s.body_len, PyBytes_GET_SIZE(<object>s.topic_b),
                             s.props_len)
        if s.body_len > max_body or size > max_body + 65536 or size > limit:
            return i
        qid = s.qid
        k = -1
        if index is None:  # (a read meets a few queues: looked for in the array)
            for j in range(nk[0]):
                if keys[j].qid == qid and same_obj(keys[j].topic, topic):
                    k = j
                    break
        else:
            got = index.get((topic, qid))
            if got is not None:
                k = got
        if k < 0:
            qid_obj = qid
            qids.append(qid_obj)
            k = new_key(keys, nk[0], table, topic, qid_obj, qid, i)
            nk[0] += 1
            if index is not None:
                index[(topic, qid_obj)] = k
            elif nk[0] > MAX_KEYS:  # many queues: looked for in a dict from now on
                index = {}
                for j in range(nk[0]):
                    index[(<object>keys[j].topic, <object>keys[j].qid_obj)] = j
        r = &recs[i]
        r.topic_b = s.topic_b
        r.topic = <const uint8_t*>PyBytes_AS_STRING(<object>s.topic_b)
        r.topic_len = PyBytes_GET_SIZE(<object>s.topic_b)
        r.body = s.body
        r.body_len = s.body_len
        r.props = s.props
        r.props_len = s.props_len
        r.qid = qid
        r.flag = s.mflag
        r.sys_flag = sys_flag
        r.reconsume = s.reconsume
        r.born_ts = s.born_ts
        r.size = size
        r.key = k
        r.qoff = keys[k].next
        keys[k].next += 1
        total_keys[0] += s.nkeys
    return n


# the fields of a consume queue (and of its file queue) the room check reads
cdef tuple CQ_FIELDS = ("mfq",)
cdef tuple MFQ_FIELDS = ("mapped_files",)
cdef ClassOffsets _CQ = ClassOffsets(CQ_FIELDS, True)
cdef ClassOffsets _MFQ = ClassOffsets(MFQ_FIELDS, True)

cdef enum:
    CQ_UNIT = 20  # consume_queue.CQ_STORE_UNIT_SIZE


cdef bint room_covered(room, const QKey* keys, Py_ssize_t nk, int64_t total_keys) except -1:
    """``DispatchRoom.reserve_covered`` of the read's queues ``keys[:nk]``
    (each up to its ``next`` offset) and ``total_keys`` index entries, its
    twin: True, with the keys promised to the index where dispatch comes
    later (``keys_covered``), when each queue's last file already holds its
    entries' places in its reserved blocks and the index file has room for
    the keys; False, with nothing reserved, when a file would have to be
    made or grown.  The queues' fields are read at their slots (~140
    instructions each through the attributes; a read of 8 queues took ~20k
    through the twin)."""
    cdef Py_ssize_t c[1]
    cdef Py_ssize_t q[1]
    cdef Py_ssize_t m[MF_N]
    cdef Py_ssize_t k
    store = room.store
    cdef dict table = store.consume_queue_table
    for k in range(nk):
        qs = table.get(<object>keys[k].topic)
        cq = (<dict?>qs).get(<object>keys[k].qid_obj) if qs is not None else None
        if cq is None:
            return False
        _CQ.copy(cq, c)
        mfq = field(cq, c, 0, CQ_FIELDS)
        _MFQ.copy(mfq, q)
        files = field(mfq, q, 0, MFQ_FIELDS)
        if not files:
            return False
        mf = files[len(files) - 1]
        _MFO.copy(mf, m)
        if <int64_t>field(mf, m, MF_FROM, MF_FIELDS) + <int64_t>field(mf, m, MF_RESERVED, MF_FIELDS) < \
                keys[k].next * CQ_UNIT:
            return False
    return keys_covered(room, store, total_keys)


# the fields of the message store, its config, its index service and an index
# file the room check's index part reads (``keys_covered``), in these orders
cdef enum:
    MST_CONFIG = 0, MST_INDEX, MST_COMMIT, MST_LOG
    IX_FILES = 0, IX_SPARE, IX_PROMISED, IX_MAX
cdef tuple MSTORE_FIELDS = ("config", "index_service", "commit_service", "commit_log")
cdef tuple IX_FIELDS = ("files", "_spare", "promised", "max_index")
cdef tuple CFG_FIELDS = ("messageIndexEnable",)
cdef tuple IXF_FIELDS = ("mf",)
cdef ClassOffsets _MST = ClassOffsets(MSTORE_FIELDS, True)
cdef ClassOffsets _IX = ClassOffsets(IX_FIELDS, True)
cdef ClassOffsets _CFG = ClassOffsets(CFG_FIELDS, True)
cdef ClassOffsets _IXF = ClassOffsets(IXF_FIELDS, True)


cdef bint keys_covered(room, store, int64_t keys) except -1:
    """``DispatchRoom.keys_covered`` of ``room`` (of ``store``), its twin,
    with ``IndexService.keys_fit`` inlined: True, with ``keys`` promised to
    the index where dispatch comes later, when the current index file has
    room for them besides those promised; False, with nothing promised,
    when a file would have to be made.  The fields are read at their slots
    and the file's entry count in its mapped header (two Python calls and a
    ``struct`` unpack per read were ~2 % of a DLedger leader's loop); an
    index service not of ``IndexService``'s slots, or whose last file is
    the one made ahead, is asked in full (the twin)."""
    cdef Py_ssize_t s[4]
    cdef Py_ssize_t i[4]
    cdef Py_ssize_t c[1]
    cdef Py_ssize_t f[1]
    cdef Py_ssize_t m[MF_N]
    cdef int64_t promised
    if not keys:
        return True
    _MST.copy(store, s)
    cfg = field(store, s, MST_CONFIG, MSTORE_FIELDS)
    _CFG.copy(cfg, c)
    if not field(cfg, c, 0, CFG_FIELDS):
        return True
    ix = field(store, s, MST_INDEX, MSTORE_FIELDS)
    _IX.copy(ix, i)
    if i[IX_FILES] <= 0 or i[IX_SPARE] <= 0 or i[IX_PROMISED] <= 0 or i[IX_MAX] <= 0:
        return room.keys_covered(keys)
    files = field(ix, i, IX_FILES, IX_FIELDS)
    if not files:
        return False
    last = files[len(files) - 1]
    if last is field(ix, i, IX_SPARE, IX_FIELDS):
        return room.keys_covered(keys)
    _IXF.copy(last, f)
    mf = field(last, f, 0, IXF_FIELDS)
    _MFO.copy(mf, m)
    promised = field(ix, i, IX_PROMISED, IX_FIELDS)
    if index_count(field(mf, m, MF_VIEW, MF_FIELDS)) + keys + promised > \
            <int64_t>field(ix, i, IX_MAX, IX_FIELDS):
        return False
    if field(store, s, MST_COMMIT, MSTORE_FIELDS) is not None or \
            field(store, s, MST_LOG, MSTORE_FIELDS).dispatch_on_commit:
        set_field(ix, i, IX_PROMISED, IX_FIELDS, promised + keys)
    return True


def room_keys_covered(room, int64_t keys):
    """``keys_covered`` of ``room`` (the index part of the room check a
    read's compiled append makes), for the tests that hold it to its twin
    ``DispatchRoom.keys_covered``."""
    return keys_covered(room, room.store, keys)


cdef inline tuple row_of(const Rec* r):
    """The record ``r`` as ``_write_entries``' tuple (one written where a
    file ends)."""
    return (<object>r.topic_b, r.qid, r.flag, r.qoff, r.sys_flag, r.born_ts, r.reconsume,
            PyBytes_FromStringAndSize(<const char*>r.body, r.body_len),
            PyBytes_FromStringAndSize(<const char*>r.props, r.props_len), r.size)


cdef inline object pos_of(entry):
    """``entry.pos``, from its slot when it is of the class ``c_write_entries`` fills."""
    return slot_or_attr(entry, slot_at[3] if slots_known and type(entry) is in_place_class
                        else -1, "pos")


cdef list c_append_plain(cl, const Plain* sends, Py_ssize_t n, int32_t host_bits, bytes born,
                         int64_t now, Put* puts):
    """The compiled ``DLedgerCommitLog.append_plain``: the leading ``sends``
    appended as ``put_message`` appends each, for the leader's send lane.
    Returns the entries made for the leading ones stored, and each one's
    (record's physical offset, queue offset, record size) in ``puts``: the
    sends' records and queues in C arrays, the dispatch room taken once per
    queue when no file has to be made for it (``room_covered``; else send by
    send), the
    entries written together (``c_append_run``; one by one only where a
    file ends), each stored queue's next offset set in the topic queue
    table once (in the order first met, as its twin's per-send writes leave
    it)."""
    cdef Py_ssize_t nr, nk = 0, done = 0, i, k, ns
    cdef int64_t total_keys = 0
    cdef list qids = [], entries = [], part
    cdef dict table = cl.topic_queue_table
    cdef Rec* recs = <Rec*>PyMem_Malloc((n if n else 1) * sizeof(Rec))
    cdef QKey* keys = <QKey*>PyMem_Malloc((n if n else 1) * sizeof(QKey))
    try:
        if recs == NULL or keys == NULL:
            raise MemoryError()
        nr = plain_rows(sends, n, host_bits, table, cl.config.maxMessageSize,
                        cl.file_size - 8 - BODY_OFFSET, recs, keys, &nk, qids, &total_keys)
        # the dispatch room: once per queue when nothing has to be made, else send by send
        room = cl.store.dispatch_room
        if not room_covered(room, keys, nk, total_keys):
            for i in range(nr):
                if not room.reserve(<object>sends[i].topic, recs[i].qid, recs[i].qoff, 1,
                                    sends[i].nkeys):
                    nr = i
                    break
        store_host = cl.store_host_field
        dledger = cl.dledger
        try:
            while done < nr:
                part = c_append_run(dledger, recs + done, nr - done, born, store_host, now)
                if not part:  # a file to close or make first: this one the usual way
                    part = [dledger.append_in_place(
                        recs[done].size, _record_writer(row_of(&recs[done]), born, now,
                                                        store_host))]
                entries.extend(part)
                done += len(part)
        except _dledger_error as exc:
            _log.warning("DLedger append refused: %s", exc)
        except ValueError as exc:  # a send the writer refuses: nothing of it is in the files
            _log.error("[BUG] DLedger lane append: %s", exc)
        ns = len(entries)
        for i in range(ns):
            puts[i].phy = <int64_t>pos_of(entries[i]) + BODY_OFFSET
            puts[i].qoff = recs[i].qoff
            puts[i].size = recs[i].size
            keys[recs[i].key].next = recs[i].qoff + 1
        for k in range(nk):
            if keys[k].first < ns:
                table[(<object>keys[k].topic, <object>keys[k].qid_obj)] = keys[k].next
        return entries
    finally:
        PyMem_Free(recs)
        PyMem_Free(keys)
