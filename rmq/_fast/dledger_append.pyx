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
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.long cimport PyLong_AsLongLongAndOverflow, PyLong_CheckExact
from libc.stdint cimport int32_t, int64_t, uint8_t
from libc.string cimport memcpy

from rmq._fast.byteorder cimport put32, put64
from rmq._fast.dledger_wire cimport wire_of
from rmq._fast.record cimport c_record_size, c_write_record

from dataclasses import fields

# the fields of ``rmq.dledger.entry.Entry``, set below in place of its
# ``__init__``; a ``make_entry`` of any other layout is called instead
cdef tuple ENTRY_FIELDS = ("index", "term", "body", "pos", "magic", "channel", "chain_crc",
                           "body_crc", "size", "wire")
cdef object in_place_class = None  # the last class found to have them


cdef bint made_in_place(cls):
    """Whether ``cls`` is a dataclass of exactly ``ENTRY_FIELDS``."""
    global in_place_class
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
    ``data[at:at + room]`` (``pos``: where ``at`` lies in the data files) and
    their index units at ``index[index_at:index_at + index_room]``; each send
    is (topic bytes, queue id, flag, queue offset, sysFlag, born timestamp,
    reconsume times, body bytes, stored properties bytes, record size).
    With ``wire`` (a leader with followers) each entry's push JSON
    (``Entry.json_bytes``) is made here too, from the record just written.
    Returns (the entries made by ``make_entry`` -- the leading sends that fit
    --, data bytes written, index bytes written)."""
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
            if in_place:  # its fields set here: no Python __init__ per send
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
    return entries, used, iused


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


def plain_runs(list sends not None, int32_t host_bits, dict table not None,
               Py_ssize_t max_body, Py_ssize_t limit):
    """A DLedger leader's plain sends of one read (``plain_single``'s
    readings) made into the rows ``write_entries`` writes, each with its
    queue offset (the next of ``table``, the (topic, queue id) -> next
    offset map, counting the sends before it): stops before the first send
    too big for ``max_body`` or for a data file (``limit``).  Returns (the
    rows, (topic, queue id, first queue offset, sends) per queue, each
    row's index keys, their sum).  The twin of
    ``rmq.dledger.commit_log._plain_runs``."""
    cdef dict offsets = {}
    cdef list runs = []
    cdef list keys_of = []
    cdef list queues = []
    cdef tuple s
    cdef bytes topic_b
    cdef int32_t sys_flag
    cdef Py_ssize_t body_len, size, total = 0
    for s in sends:
        topic_b = s[5].encode()
        sys_flag = <int32_t>s[7] | host_bits
        body = s[11]
        props = s[12]
        body_len = len(body)
        size = c_record_size(sys_flag, body_len, PyBytes_GET_SIZE(topic_b), len(props))
        if body_len > max_body or size > max_body + 65536 or size > limit:
            break
        key = (s[5], s[6])
        queue_offset = offsets.get(key)
        if queue_offset is None:
            queue_offset = table.get(key, 0)
        offsets[key] = queue_offset + 1
        runs.append((topic_b, s[6], s[9], queue_offset, sys_flag, s[8], s[10], body, props, size))
        keys_of.append(s[13])
        total += s[13]
    for key, end in offsets.items():
        start = table.get(key, 0)
        queues.append((key[0], key[1], start, end - start))
    return runs, queues, keys_of, total


def plain_stored(list entries not None, list sends not None, list runs not None,
                 dict table not None, int64_t body_offset):
    """The leading ``entries`` written for ``runs`` (``plain_runs``' rows of
    ``sends``): each send's queue offset taken in ``table``; returns (entry,
    the record's physical offset, queue offset, record size) per entry.
    The twin of ``rmq.dledger.commit_log._plain_stored``."""
    cdef Py_ssize_t i, n = min(len(entries), len(sends), len(runs))
    cdef list out = []
    cdef tuple s, run
    for i in range(n):
        entry = entries[i]
        s = sends[i]
        run = runs[i]
        table[(s[5], s[6])] = run[3] + 1
        out.append((entry, entry.pos + body_offset, run[3], run[9]))
    return out


def tally(list sends not None, list stored not None, dict sizes not None, dict counts not None,
          int oneway_bit):
    """Count the stored sends (``stored``: what ``plain_stored`` returned
    for the leading ``sends``): [messages, bytes] per topic in ``sizes``,
    sends per (request code, oneway) in ``counts``.  The twin of
    ``rmq.broker.dledger_lane._tally``."""
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
