# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""A DLedger PUSH body read in one pass: the compiled twin of
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
from libc.stdint cimport int64_t, uint8_t
from libc.string cimport memcmp

from rmq._fast.b64 cimport _decode

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
    if c.p >= c.end or c.p[0] != b'"':
        c.bad = True
        return 0
    c.p += 1
    s[0] = c.p
    while c.p < c.end and c.p[0] != b'"':
        if c.p[0] == b"\\" or c.p[0] < 0x20 or c.p[0] >= 0x80:
            c.bad = True
            return 0
        c.p += 1
    if c.p >= c.end:
        c.bad = True
        return 0
    c.p += 1
    return c.p - 1 - s[0]


cdef inline Py_ssize_t key(Cur* c, const uint8_t** s) noexcept nogil:
    cdef Py_ssize_t n = string(c, s)
    if not c.bad and not lit(c, b":", 1):
        c.bad = True
    return n


cdef inline bint named(const uint8_t* s, Py_ssize_t n, const char* name,
                       Py_ssize_t m) noexcept nogil:
    return n == m and memcmp(s, name, m) == 0


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
    if not lit(c, b"{", 1):
        c.bad = True
        return None
    if lit(c, b"}", 1):
        return (v[0], v[1], b"", v[2], v[3], v[4], v[5], v[6], BODY_OFFSET)
    while True:
        n = key(c, &s)
        if c.bad:
            return None
        if named(s, n, b"body", 4):
            if lit(c, b"null", 4):
                text = NULL
                tn = 0
            else:
                tn = string(c, &text)
        else:
            if named(s, n, b"index", 5):
                at = 0
            elif named(s, n, b"term", 4):
                at = 1
            elif named(s, n, b"pos", 3):
                at = 2
            elif named(s, n, b"magic", 5):
                at = 3
            elif named(s, n, b"channel", 7):
                at = 4
            elif named(s, n, b"chainCrc", 8):
                at = 5
            elif named(s, n, b"bodyCrc", 7):
                at = 6
            elif named(s, n, b"size", 4):
                at = -1  # a getter of the body's size: not read
            else:
                c.bad = True
                return None
            if at >= 0:
                v[at] = number(c)
            else:
                number(c)
        if c.bad:
            return None
        if lit(c, b"}", 1):
            break
        if not lit(c, b",", 1):
            c.bad = True
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
        c.p = <const uint8_t*>pb.buf
        c.end = c.p + pb.len
        c.bad = False
        if not lit(&c, b"{", 1):
            return None
        if not lit(&c, b"}", 1):
            while True:
                n = key(&c, &s)
                if c.bad:
                    return None
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
                    if named(s, n, b"group", 5):
                        at = 0
                    elif named(s, n, b"localId", 7):
                        at = 1
                    elif named(s, n, b"remoteId", 8):
                        at = 2
                    elif named(s, n, b"leaderId", 8):
                        at = 3
                    elif named(s, n, b"type", 4):
                        at = 4
                    else:
                        return None
                    n = string(&c, &s)
                    if c.bad:
                        return None
                    texts[at] = (<bytes>s[:n]).decode("ascii")
                if c.bad:
                    return None
                if lit(&c, b"}", 1):
                    break
                if not lit(&c, b",", 1):
                    return None
        if c.p != c.end:
            return None
    finally:
        PyBuffer_Release(&pb)
    return (texts[0], texts[1], texts[2], texts[3], term, code, texts[4], commit, one, batch)
