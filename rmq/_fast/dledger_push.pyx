# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""A DLedger PUSH body written and read in one pass.

``encode_push`` is the compiled twin of ``messages._push_body``: an APPEND
push's bytes, each entry's JSON object (kept on the entry: the leader pushes
it to every follower) written with its body's base64 in place;
``encode_push_frame`` writes the same body as a whole remoting frame (the
twin: ``rpc.py_push_entries_frame``), so a leader's push to a follower is
one compiled call from its entries to the bytes it writes.

``decode_push`` is the compiled twin of
``PushEntryRequest.from_json(protocol.decode(body))`` for the bodies leaders
write (rmq's and 0.3.1.2's fastjson: no whitespace, no escapes, integers and
plain strings).  A follower reads one per push; through orjson it built a
dict per entry, then an ``Entry`` from it field by field and the body from
base64 by a call of its own.  Here the fields are read where they lie and
each body is decoded straight from the text (``b64._decode``).

Whatever this reader does not take for certain -- whitespace, escapes,
non-ASCII strings, floats, leading zeros, more than 18 digits, nulls inside
an entry, an unknown key, anything after the object -- it answers None for,
and the general reader (orjson, ``from_json``) reads the body, or refuses
it, as before.
"""

from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.list cimport PyList_GET_ITEM
from libc.stdint cimport int32_t, int64_t, uint8_t
from libc.string cimport memchr, memcmp, memcpy, strlen

from rmq._fast.b64 cimport _decode
from rmq._fast.byteorder cimport put32
from rmq._fast.dledger_wire cimport (PyObject, _PyBytes_Resize, new_bytes, new_instance, put,
                                     raw_bytes_at, take_ref, wire_of)
from rmq._fast.json_text cimport json_write_int
from rmq._fast.slots cimport set_slot_at_offset, set_slot_or_attr, slot_offset, slot_offsets, \
    slot_or_attr
from rmq._fast.store_put cimport ClassOffsets

import logging
from types import MemberDescriptorType


cdef enum:
    BODY_OFFSET = 48     # an entry's size: its 48-byte header and its body
    MAX_DIGITS = 18


cdef struct Cur:
    const uint8_t* p
    const uint8_t* end
    bint bad


cdef inline bint lit(Cur* c, const char* s, Py_ssize_t n) noexcept nogil:
    """Step over ``s`` when the text goes on with it."""
    if c.end - c.p >= n and memcmp(c.p, s, n) == 0:
        c.p += n
        return True
    return False


cdef inline int64_t number(Cur* c) noexcept nogil:
    """A JSON integer as fastjson writes one (``bad`` set otherwise)."""
    cdef bint neg = False
    cdef int64_t v = 0
    cdef const uint8_t* start
    if c.p < c.end and c.p[0] == b"-":
        neg = True
        c.p += 1
    start = c.p
    while c.p < c.end and 48 <= c.p[0] <= 57:
        v = v * 10 + (c.p[0] - 48)
        c.p += 1
    if c.p == start or c.p - start > MAX_DIGITS or (start[0] == b"0" and c.p - start > 1) or \
            (c.p < c.end and (c.p[0] == b"." or c.p[0] == b"e" or c.p[0] == b"E")):
        c.bad = True
        return 0
    return -v if neg else v


cdef inline Py_ssize_t string(Cur* c, const uint8_t** s) noexcept nogil:
    """A string of printable ASCII without escapes: its length, its text at
    ``s`` (``bad`` set otherwise)."""
    cdef const uint8_t* p = c.p
    cdef const uint8_t* end = c.end
    cdef uint8_t ch
    if p >= end or p[0] != b'"':
        c.bad = True
        return 0
    p += 1
    s[0] = p
    while p < end:
        ch = p[0]
        if ch == b'"':
            c.p = p + 1
            return p - s[0]
        if ch == b"\\" or ch < 0x20 or ch >= 0x80:
            break
        p += 1
    c.bad = True
    return 0


cdef inline Py_ssize_t base64_text(Cur* c, const uint8_t** s) noexcept nogil:
    """A string that should be base64: its raw text up to the next quote
    (``_decode`` refuses any byte outside the alphabet, a backslash or a
    control byte included, and the general reader then decides)."""
    cdef const uint8_t* q
    if c.p >= c.end or c.p[0] != b'"':
        c.bad = True
        return 0
    s[0] = c.p + 1
    q = <const uint8_t*>memchr(s[0], b'"', c.end - s[0])
    if q == NULL:
        c.bad = True
        return 0
    c.p = q + 1
    return q - s[0]


cdef inline Py_ssize_t key(Cur* c, const uint8_t** s) noexcept nogil:
    """A member's key and its colon: the key's length, its text at ``s``;
    -1 with ``bad`` set otherwise."""
    cdef Py_ssize_t n = string(c, s)
    if c.bad or not lit(c, b":", 1):
        c.bad = True
        return -1
    return n


# Every reader here walks an object's members the same way, ``first_key``
# and ``next_key`` stepping over the braces, commas and keys around the values:
#     n = first_key(c, &s)
#     while n >= 0:
#         ...read the value of the member named s[:n]...
#         n = next_key(c, &s)
#     if c.bad: ...refuse the text...

cdef inline Py_ssize_t first_key(Cur* c, const uint8_t** s) noexcept nogil:
    """Step over an object's ``{`` and its first member's key (``key``);
    -1 for an empty object, or with ``bad`` set for text that is none."""
    if not lit(c, b"{", 1):
        c.bad = True
        return -1
    if lit(c, b"}", 1):
        return -1
    return key(c, s)


cdef inline Py_ssize_t next_key(Cur* c, const uint8_t** s) noexcept nogil:
    """After a member's value: the next member's key (``key``); -1 at the
    object's ``}``, or with ``bad`` set (by the value or here).  The comma,
    the more common, is looked for first."""
    if c.bad:
        return -1
    if lit(c, b",", 1):
        return key(c, s)
    if not lit(c, b"}", 1):
        c.bad = True
    return -1


cdef inline Cur* text_of(Cur* c, const Py_buffer* pb) noexcept nogil:
    """``c`` at the start of the text held in ``pb``."""
    c.p = <const uint8_t*>pb.buf
    c.end = c.p + pb.len
    c.bad = False
    return c


cdef inline bint named(const uint8_t* s, Py_ssize_t n, const char* name,
                       Py_ssize_t m) noexcept nogil:
    return n == m and memcmp(s, name, m) == 0


# the names a field may have, NUL-separated, in the order of their slots
cdef const char* PUSH_TEXTS = b"group\0localId\0remoteId\0leaderId\0type\0"


cdef int name_at(const uint8_t* s, Py_ssize_t n, const char* names) noexcept nogil:
    """The slot of the name ``s[:n]`` in ``names``, -1 when it is none of them."""
    cdef int at = 0
    cdef Py_ssize_t m
    while names[0]:
        m = strlen(names)
        if named(s, n, names, m):
            return at
        names += m + 1
        at += 1
    return -1


cdef inline int entry_slot(const uint8_t* s, Py_ssize_t n) noexcept nogil:
    """The slot of an entry's number named ``s[:n]`` (index, term, pos,
    magic, channel, chainCrc, bodyCrc, size), -1 for any other name: told
    apart by the name's length first (``name_at`` would count the length of
    up to eight names for each of an entry's keys, and a push has a dozen
    entries or more)."""
    if n == 3:
        return 2 if named(s, n, b"pos", 3) else -1
    if n == 4:
        return 1 if named(s, n, b"term", 4) else 7 if named(s, n, b"size", 4) else -1
    if n == 5:
        return 0 if named(s, n, b"index", 5) else 3 if named(s, n, b"magic", 5) else -1
    if n == 7:
        return 4 if named(s, n, b"channel", 7) else 6 if named(s, n, b"bodyCrc", 7) else -1
    if n == 8:
        return 5 if named(s, n, b"chainCrc", 8) else -1
    return -1


cdef object entry(Cur* c):
    """An entry object: (index, term, body, pos, magic, channel, chainCrc,
    bodyCrc, size) as ``Entry`` takes them, or None (``bad`` set)."""
    cdef int64_t v[7]   # index, term, pos, magic, channel, chainCrc, bodyCrc
    cdef const uint8_t* s
    cdef const uint8_t* text = NULL
    cdef Py_ssize_t n, tn = 0
    cdef int at
    v[0] = v[1] = v[2] = -1
    v[3] = 1
    v[4] = v[5] = v[6] = 0
    n = first_key(c, &s)
    while n >= 0:
        if named(s, n, b"body", 4):
            if lit(c, b"null", 4):
                text = NULL
                tn = 0
            else:
                tn = base64_text(c, &text)
        else:
            at = entry_slot(s, n)
            if at < 0:
                c.bad = True
                return None
            if at == 7:
                at = -1  # size: a getter of the body's size, not read
            if at >= 0:
                v[at] = number(c)
            else:
                number(c)
        n = next_key(c, &s)
    if c.bad:
        return None
    body = b""
    if tn:
        body = _decode(text, tn)
        if body is None:  # not canonical base64: binascii decides, in the general reader
            c.bad = True
            return None
    if not (-2**31 <= v[3] < 2**31 and -2**31 <= v[4] < 2**31 and -2**31 <= v[5] < 2**31
            and -2**31 <= v[6] < 2**31):
        c.bad = True  # (from_json keeps any int; the general reader decides)
        return None
    return (v[0], v[1], body, v[2], v[3], v[4], v[5], v[6], BODY_OFFSET + len(body))


def decode_push(body):
    """(group, localId, remoteId, leaderId, term, code, type, commitIndex,
    the ``entry`` or None, the ``batchEntry`` list) of a PUSH body, each
    entry as (index, term, body, pos, magic, channel, chainCrc, bodyCrc,
    size); None for a body the general reader must read."""
    cdef Py_buffer pb
    cdef Cur c
    cdef const uint8_t* s
    cdef Py_ssize_t n
    cdef int64_t term = -1, code = 200, commit = -1
    cdef list texts = [None, None, None, None, None]  # group, localId, remoteId, leaderId, type
    cdef int at
    one = None
    batch = []
    PyObject_GetBuffer(body, &pb, PyBUF_SIMPLE)
    try:
        n = first_key(text_of(&c, &pb), &s)
        while n >= 0:
            if lit(&c, b"null", 4):
                pass  # a null is a missing field
            elif named(s, n, b"batchEntry", 10):
                batch = []
                if not lit(&c, b"[", 1):
                    return None
                if not lit(&c, b"]", 1):
                    while True:
                        e = entry(&c)
                        if c.bad:
                            return None
                        batch.append(e)
                        if lit(&c, b"]", 1):
                            break
                        if not lit(&c, b",", 1):
                            return None
            elif named(s, n, b"entry", 5):
                one = entry(&c)
            elif named(s, n, b"batch", 5):
                if not lit(&c, b"true", 4) and not lit(&c, b"false", 5):
                    return None  # (a getter: not read)
            elif named(s, n, b"term", 4):
                term = number(&c)
            elif named(s, n, b"code", 4):
                code = number(&c)
            elif named(s, n, b"commitIndex", 11):
                commit = number(&c)
            elif named(s, n, b"count", 5) or named(s, n, b"firstEntryIndex", 15) or \
                    named(s, n, b"lastEntryIndex", 14) or named(s, n, b"totalSize", 9):
                number(&c)  # getters: not read
            else:
                at = name_at(s, n, PUSH_TEXTS)
                if at < 0:
                    return None
                n = string(&c, &s)
                if c.bad:
                    return None
                texts[at] = (<bytes>s[:n]).decode("ascii")
            n = next_key(&c, &s)
        if c.bad or c.p != c.end:
            return None
    finally:
        PyBuffer_Release(&pb)
    return (texts[0], texts[1], texts[2], texts[3], term, code, texts[4], commit, one, batch)


# The fields of the entries pushed and kept read from their slots (the push of
# a 16-entry read reads each entry's ``wire`` and ``size``, its keeping its
# ``index`` and ``size``: ~140 instructions each through the attribute
# protocol), for the last entry class met when it is a plain slots class;
# any other entry through its attributes.
cdef object read_class = None
cdef Py_ssize_t at_index = -1, at_size = -1, at_wire = -1, at_body = -1


cdef inline int know_class(e) except -1:
    """``at_index``, ``at_size``, ``at_wire`` and ``at_body`` for ``e``'s class."""
    global read_class, at_index, at_size, at_wire, at_body
    cls = type(e)
    if cls is not read_class:
        at_index = slot_offset(cls, "index", MemberDescriptorType)
        at_size = slot_offset(cls, "size", MemberDescriptorType)
        at_wire = slot_offset(cls, "wire", MemberDescriptorType)
        at_body = slot_offset(cls, "body", MemberDescriptorType)
        read_class = cls
    return 0


cdef inline object index_of(e):
    know_class(e)
    return slot_or_attr(e, at_index, "index")


cdef inline int64_t size_of(e) except? -1:
    know_class(e)
    return <int64_t>slot_or_attr(e, at_size, "size")


cdef inline uint8_t* put_b(uint8_t* p, bytes b) noexcept:
    memcpy(p, PyBytes_AS_STRING(b), PyBytes_GET_SIZE(b))
    return p + PyBytes_GET_SIZE(b)


cdef bytes entry_wire(e):
    """The entry's JSON object (``Entry.json_bytes``), made once and kept on it."""
    know_class(e)
    cdef bytes wire = slot_or_attr(e, at_wire, "wire")
    if wire is not None:
        return wire
    cdef Py_buffer pb
    cdef Py_ssize_t size
    PyObject_GetBuffer(e.body, &pb, PyBUF_SIMPLE)
    try:
        size = BODY_OFFSET + pb.len
        wire = wire_of(<const uint8_t*>pb.buf, pb.len, e.body_crc, e.chain_crc, e.channel,
                       e.index, e.magic, e.pos, size, e.term)
    finally:
        PyBuffer_Release(&pb)
    e.size = size
    e.wire = wire
    return wire


cdef bytes push_bytes(bytes head, int64_t opaque, bytes tail, bytes group, bytes ids,
                      int64_t term, int64_t commit_index, list entries, bint batch):
    """An APPEND push's body; with ``head`` (not None) the whole remoting
    frame around it: the length words, then ``head``, ``opaque`` in decimal
    and ``tail`` (the frame's JSON header), then the body."""
    cdef Py_ssize_t n = len(entries) if batch else 1
    cdef Py_ssize_t room = 256 + PyBytes_GET_SIZE(group) + PyBytes_GET_SIZE(ids) + n
    cdef int64_t total = 0
    cdef Py_ssize_t i, hn = 0
    cdef uint8_t* start
    cdef uint8_t* p
    if not entries:
        raise IndexError("a push carries an entry")
    if head is not None:
        room += 8 + PyBytes_GET_SIZE(head) + 20 + PyBytes_GET_SIZE(tail)
    wires = []
    for i in range(n):
        w = entry_wire(entries[i])
        wires.append(w)
        room += PyBytes_GET_SIZE(w)
        if batch:
            total += size_of(entries[i])
    cdef int64_t first_index = index_of(entries[0])
    cdef int64_t last_index = index_of(entries[n - 1 if batch else len(entries) - 1])
    # written in place into the bytes object returned (no second copy of the
    # push), which is shrunk to what was written
    cdef PyObject* out = new_bytes(NULL, room)
    if out == NULL:
        raise MemoryError()
    start = <uint8_t*>raw_bytes_at(out)
    p = start
    if head is not None:
        p = put_b(start + 8, head)
        p = put_b(json_write_int(p, opaque), tail)
        hn = p - start - 8
    if batch:
        p = put(p, b'{"batch":true,"batchEntry":[', 28)
        for i in range(n):
            if i:
                p = put(p, b",", 1)
            p = put_b(p, <bytes>wires[i])
        p = put(p, b'],"code":200,"commitIndex":', 27)
        p = put(json_write_int(p, commit_index), b',"count":', 9)
        p = put(json_write_int(p, n), b',', 1)
    else:
        p = put(p, b'{"batch":false,"batchEntry":[],"code":200,"commitIndex":', 56)
        p = put(json_write_int(p, commit_index), b',"count":1,"entry":', 19)
        p = put(put_b(p, <bytes>wires[0]), b',', 1)
    p = put(p, b'"firstEntryIndex":', 18)
    p = put(json_write_int(p, first_index), b',"group":', 9)
    p = put(put_b(p, group), b',"lastEntryIndex":', 18)
    p = put(json_write_int(p, last_index), b',', 1)
    p = put(put_b(p, ids), b'"term":', 7)
    p = put(json_write_int(p, term), b',"totalSize":', 13)
    p = put(json_write_int(p, total), b',"type":"APPEND"}', 17)
    if head is not None:
        put32(start, <int32_t>(p - start - 4))
        put32(start + 4, <int32_t>hn)
    if _PyBytes_Resize(&out, p - start) < 0:  # (out freed and NULL then)
        raise MemoryError()
    return take_ref(out)


def encode_push(bytes group, bytes ids, int64_t term, int64_t commit_index, list entries,
                bint batch):
    """An APPEND push's bytes (``messages._push_body``): ``group`` the
    group's JSON string, ``ids`` the leaderId, localId and remoteId members
    written (each followed by a comma), ``batch`` puts ``entries`` in
    ``batchEntry``, else the first in ``entry``."""
    return push_bytes(None, 0, None, group, ids, term, commit_index, entries, batch)


def encode_push_frame(bytes head not None, int32_t opaque, bytes tail not None, bytes group,
                      bytes ids, int64_t term, int64_t commit_index, list entries, bint batch):
    """The whole remoting frame of an APPEND push (``rpc.py_push_entries_frame``):
    ``encode_push``'s body behind the frame's length words and its JSON
    header (``head``, ``opaque`` in decimal, ``tail``), written in one pass
    -- the bytes ``dledger_frames.push_frame`` makes of ``head``, ``opaque``,
    ``tail`` and ``encode_push``'s body."""
    return push_bytes(head, opaque, tail, group, ids, term, commit_index, entries, batch)


# the numbers of a push's answer, in the order of their slots in ``answer_fields``
# (beginIndex, endIndex and count, 3 to 5: the compare's business, not an append's)
cdef const char* ANSWER_NUMBERS[6]
ANSWER_NUMBERS[:] = [b"code", b"term", b"index", b"beginIndex", b"endIndex", b"count"]
cdef Py_ssize_t ANSWER_LENGTHS[6]
ANSWER_LENGTHS[:] = [4, 4, 5, 10, 8, 5]


cdef inline int answer_slot(const uint8_t* s, Py_ssize_t n) noexcept nogil:
    """The slot of a push answer's number named ``s[:n]``, -1 for any
    other name (the lengths compared first: no ``strlen`` per name)."""
    cdef int at
    for at in range(6):
        if ANSWER_LENGTHS[at] == n and memcmp(s, ANSWER_NUMBERS[at], n) == 0:
            return at
    return -1


cdef bint answer_fields(const uint8_t* text, Py_ssize_t size, int64_t* code_out, int64_t* term_out,
                        int64_t* index_out, bint* has_index_out) noexcept nogil:
    """``decode_push_answer`` of the ``size`` bytes at ``text``, into the
    outs: False for a body the general reader must read."""
    cdef Cur c
    cdef const uint8_t* s
    cdef Py_ssize_t n
    cdef int at
    cdef int64_t x
    cdef int64_t v[3]  # code, term, index
    cdef bint has_index = False
    v[0] = 200
    v[1] = -1
    v[2] = 0
    c.p = text
    c.end = text + size
    c.bad = False
    n = first_key(&c, &s)
    while n >= 0:
        at = answer_slot(s, n)
        if lit(&c, b"null", 4):  # a null is a missing field: its default
            if at == 0:
                v[0] = 200
            elif at == 1:
                v[1] = -1
            elif at == 2:
                has_index = False
            elif at < 0 and not 0 <= name_at(s, n, PUSH_TEXTS) < 4:
                return False
        elif at >= 0:
            x = number(&c)
            if at < 3:
                v[at] = x
                has_index = has_index or at == 2
        elif 0 <= name_at(s, n, PUSH_TEXTS) < 4:  # group and the ids
            string(&c, &s)
        else:
            return False
        n = next_key(&c, &s)
    if c.bad or c.p != c.end:
        return False
    code_out[0] = v[0]
    term_out[0] = v[1]
    index_out[0] = v[2]
    has_index_out[0] = has_index
    return True


def decode_push_answer(body):
    """(code, term, index) of a follower's answer to a push as
    ``PushEntryResponse.from_json(protocol.decode(body))`` reads them (index
    None when the answer has none); None for a body the general reader must
    read (anything but an object of the response's fields as DLedger writes
    them: integers, plain ASCII strings, nulls).  The leader reads one per
    push and follower: through orjson it was a dict, then a response object
    field by field."""
    cdef Py_buffer pb
    cdef int64_t code, term, index
    cdef bint has_index, ok
    PyObject_GetBuffer(body, &pb, PyBUF_SIMPLE)
    try:
        ok = answer_fields(<const uint8_t*>pb.buf, pb.len, &code, &term, &index, &has_index)
    finally:
        PyBuffer_Release(&pb)
    if not ok:
        return None
    return (code, term, index if has_index else None)


def kept_run(store, int64_t first, int64_t max_bytes):
    """``DLedgerMmapFileStore.kept_run`` (its twin ``rmq.dledger.mmap_store._kept_run``):
    the entries a push from ``first`` carries, up to ``max_bytes`` (0: that
    one alone) and the ledger's end, each the kept one or ``store.get``'s;
    the store's fields read at their slots."""
    return c_kept_run(store, first, max_bytes)


cdef list c_kept_run(store, int64_t first, int64_t max_bytes):
    """``kept_run`` for the push round."""
    cdef Py_ssize_t s[ST_N]
    cdef int64_t size, index, last
    _STORE.copy(store, s)
    cdef list recent = slot_or_attr(store, s[ST_RECENT], "_recent")
    cdef int64_t at = slot_or_attr(store, s[ST_RECENT_FIRST], "_recent_first")
    last = slot_or_attr(store, s[ST_END], "ledger_end_index")
    entry = None
    if slot_or_attr(store, s[ST_BEGIN], "ledger_begin_index") <= first <= last:
        entry = kept_at(recent, at, first)
    if entry is None:
        entry = store.get(first)  # (or its refusal)
    cdef list entries = [entry]
    know_class(entry)
    size = BODY_OFFSET + len(slot_or_attr(entry, at_body, "body"))  # (compute_size)
    set_slot_or_attr(entry, at_size, "size", size)
    index = first + 1
    while size < max_bytes and index <= last:
        entry = kept_at(recent, at, index)
        if entry is None:
            entry = store.get(index)
        entries.append(entry)
        size += size_of(entry)
        index += 1
    return entries


def keep_more(list recent not None, list entries not None, int64_t first, int64_t kept,
              int64_t max_bytes):
    """Add ``entries`` (appended in order) to ``recent``, the kept entries
    in index order from index ``first`` (``kept`` bytes; dropped first when
    ``entries`` do not follow them), then, when more than ``max_bytes`` are
    kept, drop the oldest down to three quarters of it at once, never the
    last entry.  Returns the new (first, kept).  The twin of
    ``rmq.dledger.mmap_store._keep_more``."""
    return keep_entries(recent, entries, first, kept, max_bytes)


cdef tuple keep_entries(list recent, list entries, int64_t first, int64_t kept,
                        int64_t max_bytes):
    """``keep_more`` for compiled callers (``dledger_append.append_run``):
    the entries kept in a list, not by index in a dict (an append or a
    push's read of one is a list operation, no int made and hashed)."""
    cdef Py_ssize_t drop = 0
    cdef int64_t target
    if not entries:
        return first, kept
    if not recent or first + len(recent) != <int64_t>index_of(entries[0]):
        del recent[:]
        first = index_of(entries[0])
        kept = 0
    recent.extend(entries)
    for entry in entries:
        kept += size_of(entry)
    if kept > max_bytes:
        target = max_bytes - max_bytes // 4
        while kept > target and drop < len(recent) - 1:
            kept -= size_of(<object>PyList_GET_ITEM(recent, drop))
            drop += 1
        del recent[:drop]
        first += drop
    return first, kept


# ---- the leader's push round ------------------------------------------------
# ``EntryPusher._push_round`` in one call (the twin: ``rmq.dledger.pusher._push_round``
# and what it calls -- ``PeerDispatcher.push_now`` and ``_push_from``,
# ``DLedgerMmapFileStore.kept_run``, ``PeerClient.push_entries``,
# ``RemotingNode.send_frame``, ``Channel.write_bytes`` -- about eight Python
# frames per follower and round, and ``_Acked``'s constructor): for each
# dispatcher appending with room, the entries from its next index (read once
# for followers level with each other), the frame, the wait kept in the
# client's response table, the frame written.  The pusher's, dispatchers',
# member state's, store's and channel's fields are read at their slots; what
# is not the common case (a follower not appending, MAX_PENDING pushes in
# flight, a peer not connected, the response table's scan not running, a
# write queued behind others) takes the methods the twin calls.
# ``bind_push`` hands over what the layers above own.

log = logging.getLogger("rmq.dledger")

cdef object _acked_class = None   # pusher._Acked
cdef Py_ssize_t acked_at[3]       # its dispatcher, count and told slots
cdef bint acked_in_place = False  # made by its allocator, its slots set here
cdef object _leader = None        # Role.LEADER
cdef object _append = None        # PushType.APPEND
cdef object _compare = None       # PushType.COMPARE
cdef object _channel_class = None  # rmq.remoting.channel.Channel
cdef object _opaques = None       # the request ids' counter (command.OPAQUES)
cdef bytes _head = None, _tail = None  # a push's JSON header around its opaque
cdef int64_t _max_pending = 0
cdef object _timeout_ms = None
cdef double _timeout_s = 0


def bind_push(acked_class, leader, append, compare, channel_class, int64_t max_pending,
              timeout_ms, bytes head not None, bytes tail not None, opaques):
    """``_Acked`` (a push's wait), ``Role.LEADER``, ``PushType.APPEND`` and
    ``COMPARE``, ``Channel``, ``MAX_PENDING``, ``RPC_TIMEOUT_MS``,
    ``rpc.PUSH_HEAD`` and ``PUSH_TAIL``, and ``command.OPAQUES``."""
    global _acked_class, acked_in_place, _leader, _append, _compare, _channel_class
    global _opaques, _head, _tail, _max_pending, _timeout_ms, _timeout_s
    # (``told`` is a slot of its base, ``FrameWait``)
    slot_offsets(acked_class, ("dispatcher", "count", "told"), acked_at, MemberDescriptorType)
    acked_in_place = acked_class.__new__ is object.__new__ and acked_at[0] > 0 and \
        acked_at[1] > 0 and acked_at[2] > 0
    _acked_class = acked_class
    _leader = leader
    _append = append
    _compare = compare
    _channel_class = channel_class
    _max_pending = max_pending
    _timeout_ms = timeout_ms
    _timeout_s = timeout_ms / 1000.0
    _head = head
    _tail = tail
    _opaques = opaques


cdef object new_acked(d, Py_ssize_t count):
    """``_Acked(d, count)``: its constructor's fields set in place."""
    if not acked_in_place:
        return _acked_class(d, count)
    wait = new_instance(_acked_class)
    set_slot_at_offset(wait, acked_at[0], d)
    set_slot_at_offset(wait, acked_at[1], count if count > 1 else 1)
    set_slot_at_offset(wait, acked_at[2], False)
    return wait


cdef enum:
    # the pusher's fields, in ``_PUSHER``'s order
    U_MS = 0
    U_STORE = 1
    U_OPEN = 2
    U_DISPATCHERS = 3
    U_CONFIG = 4
    U_RPC = 5
    U_SOON = 6
    U_LOOP = 7
    U_N = 8
    # a dispatcher's, in ``_DISPATCHER``'s
    D_PEER = 0
    D_PENDING = 1
    D_WRITE = 2
    D_WAKE = 3
    D_STATE = 4
    D_TERM = 5
    D_NAMES = 6
    D_LAST_PUSH = 7
    D_N = 8
    # the member state's, in ``_LEADER``'s
    M_ROLE = 0
    M_TERM = 1
    M_N = 2
    # the store's, in ``_STORE``'s
    ST_RECENT = 0
    ST_BEGIN = 1
    ST_END = 2
    ST_COMMITTED = 3
    ST_RECENT_FIRST = 4
    ST_N = 5
    # a channel's, in ``_CHANNEL``'s
    C_CLOSED = 0
    C_TRANSPORT = 1
    C_PENDING = 2
    C_ACTIVE = 3
    C_N = 4

cdef ClassOffsets _PUSHER = ClassOffsets(
    ("ms", "store", "_open", "dispatchers", "config", "rpc", "_push_soon", "loop"), True)
cdef ClassOffsets _DISPATCHER = ClassOffsets(
    ("peer", "pending", "write_index", "wake", "state", "term", "names", "last_push_commit"), True)
cdef ClassOffsets _LEADER = ClassOffsets(("role", "curr_term"), True)
cdef ClassOffsets _STORE = ClassOffsets(
    ("_recent", "ledger_begin_index", "ledger_end_index", "committed_index", "_recent_first"),
    True)
cdef ClassOffsets _CHANNEL = ClassOffsets(("_closed", "_transport", "_pending", "last_active"),
                                          True)


cdef class _Round:
    """What one push round reads once for all its pushes."""
    cdef object pusher, ms, store, client, loop
    cdef dict peer_map, table, responses  # (read through the dict calls, not their methods)
    cdef bint batch, hooks, scanning
    cdef int64_t max_bytes
    cdef list run  # the entries of the round's last push (None before the first)


def push_round(pusher):
    """``EntryPusher._push_round`` (its twin ``rmq.dledger.pusher._push_round``):
    each dispatcher's ``push_now``, in one call."""
    cdef Py_ssize_t u[U_N]
    cdef _Round r = _Round()
    if _acked_class is None:
        raise RuntimeError("dledger_push.bind_push was not called")
    _PUSHER.copy(pusher, u)
    set_slot_or_attr(pusher, u[U_SOON], "_push_soon", False)
    r.pusher = pusher
    r.ms = slot_or_attr(pusher, u[U_MS], "ms")
    r.store = slot_or_attr(pusher, u[U_STORE], "store")
    config = slot_or_attr(pusher, u[U_CONFIG], "config")
    r.batch = config.enable_batch_push
    r.max_bytes = config.max_batch_push_size if r.batch else 0
    rpc = slot_or_attr(pusher, u[U_RPC], "rpc")
    r.peer_map = rpc.peer_map
    r.client = rpc.client
    r.table = r.client._table
    r.responses = r.client._responses
    r.hooks = bool(r.client._rpc_hooks)
    r.loop = slot_or_attr(pusher, u[U_LOOP], "loop")  # (get_running_loop(): a getpid() call)
    r.scanning = r.client._scan_handle is not None and r.client._scan_loop is r.loop
    for d in slot_or_attr(pusher, u[U_DISPATCHERS], "dispatchers").values():
        push_now(r, d)


cdef int push_now(_Round r, d) except -1:
    """``PeerDispatcher.push_now``."""
    cdef Py_ssize_t p[D_N]
    cdef Py_ssize_t m[M_N]
    cdef Py_ssize_t s[ST_N]
    _DISPATCHER.copy(d, p)
    _LEADER.copy(r.ms, m)
    if slot_or_attr(d, p[D_STATE], "state") != _append or \
            slot_or_attr(d, p[D_TERM], "term") != slot_or_attr(r.ms, m[M_TERM], "curr_term") or \
            slot_or_attr(r.ms, m[M_ROLE], "role") is not _leader:
        slot_or_attr(d, p[D_WAKE], "wake").set()
        return 0
    try:
        while True:
            _STORE.copy(r.store, s)
            index = slot_or_attr(d, p[D_WRITE], "write_index")
            if not index <= slot_or_attr(r.store, s[ST_END], "ledger_end_index"):
                return 0
            if len(slot_or_attr(d, p[D_PENDING], "pending")) >= _max_pending:
                slot_or_attr(d, p[D_WAKE], "wake").set()
                return 0
            push_from(r, d, p, index)
    except Exception as exc:  # as in the task: compare again
        log.info("push to %s: %s", slot_or_attr(d, p[D_PEER], "peer"), exc)
        d._change(-1, _compare)
    return 0


cdef int push_from(_Round r, d, Py_ssize_t* p, index) except -1:
    """``PeerDispatcher._push_from(index)`` and ``PeerClient.push_entries``."""
    cdef Py_ssize_t u[U_N]
    cdef Py_ssize_t s[ST_N]
    cdef Py_ssize_t c[C_N]
    cdef int64_t first = index
    cdef list entries = r.run
    if entries is None or index_of(entries[0]) != first:
        entries = r.run = c_kept_run(r.store, first, r.max_bytes)
    _PUSHER.copy(r.pusher, u)
    set_slot_or_attr(r.pusher, u[U_OPEN], "_open", None)
    cdef Py_ssize_t n = len(entries)
    after = first + n
    now = monotonic() * 1000
    slot_or_attr(d, p[D_PENDING], "pending")[index] = now
    set_slot_or_attr(d, p[D_LAST_PUSH], "last_push_commit", now)
    _STORE.copy(r.store, s)
    committed = slot_or_attr(r.store, s[ST_COMMITTED], "committed_index")
    term = slot_or_attr(d, p[D_TERM], "term")
    names = slot_or_attr(d, p[D_NAMES], "names")
    cdef bint batch = r.batch or n > 1
    wait = new_acked(d, n)
    more = after <= slot_or_attr(r.store, s[ST_END], "ledger_end_index")
    addr = r.peer_map[slot_or_attr(d, p[D_PEER], "peer")]
    ch = r.table.get(addr)
    if ch is None or r.hooks or type(ch) is not _channel_class:
        r.client.push_entries(addr, names, term, committed, entries, batch, _timeout_ms, wait, more)
    else:
        _CHANNEL.copy(ch, c)
        transport = slot_or_attr(ch, c[C_TRANSPORT], "_transport")
        if slot_or_attr(ch, c[C_CLOSED], "_closed") or transport.is_closing():
            r.client.push_entries(addr, names, term, committed, entries, batch, _timeout_ms,
                                  wait, more)
        else:
            opaque = next(_opaques) & 0x7FFFFFFF
            frame = push_bytes(_head, opaque, _tail, names[0], names[1], term, committed,
                               entries, batch)
            if not r.scanning:  # (its scan of the response table started there)
                r.client.send_frame(ch, opaque, frame, _timeout_ms, wait, more)
                r.scanning = True
            else:
                # RemotingNode.send_frame and Channel.write_bytes
                r.responses[opaque] = (wait, ch, r.loop.time() + _timeout_s, _timeout_ms)
                if more or slot_or_attr(ch, c[C_PENDING], "_pending") is not None:
                    ch.write_bytes(frame, more)
                else:
                    transport.write(frame)
                    set_slot_or_attr(ch, c[C_ACTIVE], "last_active", monotonic())
    set_slot_or_attr(d, p[D_WRITE], "write_index", after)
    return 0
