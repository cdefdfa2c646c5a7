# cython: language_level=3, boundscheck=False, wraparound=False
"""Compiled twin of ``_ack_entry_now`` in rmq/broker/processor/ack.py: one
entry of a BATCH_ACK_MESSAGE -- its fields read, its queue checked, its
bitset's offsets, its ack record stored and applied -- step for step in one
call; the bitset is read here (what ``bitset_offsets`` gives), the record
goes through the revive service's ``write_ack_now``.  The classes and functions
of the layers above are handed over by ``bind``.

``read_batch_ack`` reads the batch's JSON body (5.3.3's
BatchAckMessageRequestBody) straight to each entry's fields, without a dict
per entry; it takes only the plain bodies every client writes and leaves
anything else to the general JSON reader, whose twin path it is.  A field's
text that is the one read before is that str again (its hash then known),
and a plain base64 bit map is decoded here on the stack, any other by
``a2b_base64``.
"""

from binascii import a2b_base64

from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.list cimport PyList_GET_ITEM
from cpython.unicode cimport PyUnicode_DecodeUTF8
from libc.limits cimport LLONG_MAX
from libc.stdint cimport int64_t, uint8_t, uint64_t
from libc.string cimport memcmp, memset

from rmq._fast.json_text cimport json_ctz64, json_mask16
from rmq._fast.pop_revive cimport direct, write_ack_arr
from rmq._fast.topic_table cimport topic_config


cdef extern from "Python.h":
    void *PyUnicode_DATA(object o)
    int PyUnicode_IS_ASCII(object o)
    Py_ssize_t PyUnicode_GET_LENGTH(object o)

cdef object _EXTRA = None
cdef object _real_topic = None
cdef object _SYSTEM_ERROR = None
cdef object _ORDER_QID = None
cdef tuple _DONE = (0, None)  # the answer of a batch done at once: (SUCCESS, no remark)
cdef bint _bound = False


def bind(extra_type: type, real_topic: object, system_error: object,
         order_qid: object, success: object = 0) -> None:
    """ExtraInfo, ``pop_records.real_topic``, ResponseCode.SYSTEM_ERROR
    and the orderly pops' revive queue id (and SUCCESS)."""
    global _EXTRA, _real_topic, _SYSTEM_ERROR, _ORDER_QID, _bound, _DONE
    _DONE = (success, None)
    _EXTRA = extra_type
    _real_topic = real_topic
    _SYSTEM_ERROR = system_error
    _ORDER_QID = order_qid
    _bound = True


cdef list bitset_offsets(object start, object data):
    """``ack.bitset_offsets``: the offsets whose bit is set, lowest first."""
    cdef bytes raw = a2b_base64(data) if data else b""
    cdef const unsigned char *bits = raw  # (no memoryview: read in place)
    cdef Py_ssize_t i, n = len(raw)
    cdef int bit
    cdef unsigned char byte
    cdef list out = []
    cdef long long s
    try:
        s = start
    except OverflowError:
        s = -1
    cdef bint big = s < 0 or s > LLONG_MAX - 8 * n  # beyond a long: Python's integers
    for i in range(n):
        byte = bits[i]
        if byte:
            for bit in range(8):
                if byte >> bit & 1:
                    out.append(start + (i * 8 + bit) if big else s + (i * 8 + bit))
    return out


cdef enum:
    ARR_ROOM = 64  # an entry's offsets kept in a C array up to this many


cdef Py_ssize_t bitset_into(object start, const unsigned char *bits, Py_ssize_t n,
                            int64_t *out) except -2:
    """``bitset_offsets`` of the decoded bit map ``bits[:n]`` into ``out``
    (room for ``ARR_ROOM``): their number, or -1 (nothing to rely on in
    ``out``) when there are more or ``start`` is not an exact int that keeps
    every offset within 64 bits."""
    cdef Py_ssize_t i, at = 0
    cdef int bit
    cdef unsigned char byte
    cdef long long s
    if type(start) is not int:
        return -1
    try:
        s = start
    except OverflowError:
        return -1
    if s < 0 or s > LLONG_MAX - 8 * n:
        return -1
    for i in range(n):
        byte = bits[i]
        if byte == 0xFF and at + 8 <= ARR_ROOM:  # eight offsets in a row (most acks)
            for bit in range(8):
                out[at + bit] = s + (i * 8 + bit)
            at += 8
            continue
        while byte:  # its set bits, lowest first
            if at == ARR_ROOM:
                return -1
            out[at] = s + (i * 8 + json_ctz64(byte))
            at += 1
            byte &= byte - 1
    return at


cdef enum:
    B64_ROOM = 256  # a bit map decoded on the stack up to this many bytes (2048 offsets)


cdef signed char _B64[256]  # each byte's value in base64's alphabet; -1 outside it


cdef void _b64_table() noexcept:
    cdef const char *alphabet = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
    cdef int i
    memset(_B64, -1, 256)
    for i in range(64):
        _B64[<uint8_t>alphabet[i]] = i


_b64_table()


cdef Py_ssize_t b64_plain(object data, uint8_t *out) noexcept:
    """``a2b_base64(data)`` into ``out`` (room for ``B64_ROOM``) for a plain
    text: an ASCII str of whole quads of the alphabet, ``=`` only as the
    padding of the last one; the number of bytes, or -1 for any other text
    (or a longer one), which ``a2b_base64`` then decodes or refuses.  Like
    it, the bits a padded quad leaves over are dropped."""
    cdef const uint8_t *s
    cdef Py_ssize_t n, i, at = 0, pad = 0
    cdef int a, b, c, d
    if type(data) is not str or not PyUnicode_IS_ASCII(data):
        return -1
    s = <const uint8_t *>PyUnicode_DATA(data)
    n = PyUnicode_GET_LENGTH(data)
    if n == 0 or n % 4 or n // 4 * 3 > B64_ROOM:
        return -1
    if s[n - 1] == 61:
        pad = 2 if s[n - 2] == 61 else 1
    for i in range(0, n, 4):
        a = _B64[s[i]]
        b = _B64[s[i + 1]]
        c = _B64[s[i + 2]] if i + 4 < n or pad < 2 else 0
        d = _B64[s[i + 3]] if i + 4 < n or pad < 1 else 0
        if a < 0 or b < 0 or c < 0 or d < 0:
            return -1
        out[at] = <uint8_t>(a << 2 | b >> 4)
        out[at + 1] = <uint8_t>(b << 4 | c >> 2)
        out[at + 2] = <uint8_t>(c << 6 | d)
        at += 3
    return at - pad


def ack_entry_now(p, a, broker_name):
    """``_ack_entry_now`` of rmq/broker/processor/ack.py, step for step."""
    if not _bound:
        raise RuntimeError("ack_entry.bind was not called")
    return entry_now(p, a, broker_name)


def batch_ack_now(p, body):
    """``AckMessageProcessor.batch_ack_now`` (the twin), step for step, for
    a body ``read_batch_ack`` takes; any other body goes to the twin."""
    cdef Py_ssize_t i = 0
    if not _bound:
        raise RuntimeError("ack_entry.bind was not called")
    read = _read(body)
    if read is None:
        return p.batch_ack_now(body)
    broker_name, acks = <tuple>read
    broker_name = broker_name or p.bc.brokerName
    for a in <list>acks:
        i += 1
        got = entry_now(p, a, broker_name)
        if got is None:
            continue
        if len(<tuple>got) == 2:
            return got
        return p._batch_ack_rest(got, acks, i, broker_name)
    return _DONE


cdef object entry_now(p, a, broker_name):
    cdef int64_t offs[ARR_ROOM]
    cdef uint8_t raw[B64_ROOM]
    cdef Py_ssize_t n = -1, i
    offsets = None
    try:
        if type(a) is not tuple:  # the general reader's object: ``entry_fields``
            a = (str(a["c"]), str(a.get("r", "0")), str(a["t"]), int(a["q"]), int(a["so"]),
                 int(a["pt"]), int(a.get("it", 0)), int(a["rq"]), a.get("b") or "")
        group, retry, raw_topic, queue_id, start, pop_time, invisible, qid, data = <tuple>a
        # ``real_topic``: the topic itself unless the flag names a retry topic
        topic = raw_topic if retry == "0" else _real_topic(raw_topic, group, retry)
        # the bit map's offsets in ``offs`` (``n`` of them), or the list
        # ``offsets`` when they do not fit there
        if not data:
            n = 0
        else:
            n = b64_plain(data, raw)
            if n >= 0:
                n = bitset_into(start, raw, n, offs)
            else:
                bits = a2b_base64(data)
                n = bitset_into(start, bits, len(bits), offs)
        if n < 0:
            offsets = bitset_offsets(start, data)
            n = len(offsets)
    except (KeyError, ValueError, TypeError) as exc:
        return _SYSTEM_ERROR, f"bad batch ack entry: {exc}"
    tc = topic_config(p.topics, topic) if type(topic) is str else None
    if tc is None or not 0 <= queue_id < tc.readQueueNums:  # ``_check_queue`` refuses it
        refused = p._check_queue(topic, queue_id, None)
        if refused is not None:
            return refused.code, refused.remark
    if not n:
        return None
    revive = p.revive
    if qid != _ORDER_QID:
        if not 0 <= qid < revive.queue_num:
            return None
        if offsets is None and direct(revive, "write_ack_now"):
            stored = write_ack_arr(revive, qid, topic, group, queue_id, start, pop_time,
                                   broker_name, offs, n)
        else:
            if offsets is None:
                offsets = [offs[i] for i in range(n)]
            stored = revive.write_ack_now(qid, topic, group, queue_id, start, pop_time,
                                          broker_name, offsets)
        if stored is not None:
            return None
    # an orderly pop's ack, or a record that must wait (the ExtraInfo only then)
    if offsets is None:
        offsets = [offs[i] for i in range(n)]
    return group, topic, queue_id, _EXTRA(start, pop_time, invisible, qid, retry,
                                          broker_name, queue_id, start), offsets


# ---- the batch's body ---------------------------------------------------------------
# An entry's keys (BatchAck's JSON names), in the order of ``entry_fields``' tuple.
cdef enum:
    K_C = 0
    K_R = 1
    K_T = 2
    K_Q = 3
    K_SO = 4
    K_PT = 5
    K_IT = 6
    K_RQ = 7
    K_B = 8
    REQUIRED = (1 << K_C) | (1 << K_T) | (1 << K_Q) | (1 << K_SO) | (1 << K_PT) | (1 << K_RQ)


cdef inline Py_ssize_t _ws(const uint8_t *p, Py_ssize_t i, Py_ssize_t n) noexcept:
    while i < n and p[i] <= 32 and (p[i] == 32 or p[i] == 10 or p[i] == 13 or p[i] == 9):
        i += 1
    return i


cdef inline Py_ssize_t _next_or_end(const uint8_t *p, Py_ssize_t i, Py_ssize_t n,
                                     uint8_t close, bint *more) noexcept:
    """The step after an object's member or an array's element that ends
    before ``p[i]``: blanks skipped, then a comma goes on (``more`` set; the
    position of the next one, blanks skipped) and ``close`` ends (``more``
    clear; the position past it); -1 for anything else."""
    i = _ws(p, i, n)
    if i < n and p[i] == 44:
        more[0] = True
        return _ws(p, i + 1, n)
    more[0] = False
    if i < n and p[i] == close:
        return i + 1
    return -1


cdef inline Py_ssize_t _string_end(const uint8_t *p, Py_ssize_t i, Py_ssize_t n,
                                   bint *ascii) noexcept:
    """The closing quote of the string opening at ``p[i]``, or -1 for one this
    reader leaves to the general one (an escape, a control byte, no end).
    Sixteen bytes at a time while as many are left, then byte by byte."""
    cdef uint8_t c
    cdef uint64_t m
    cdef int wide, k
    ascii[0] = True
    i += 1
    while i + 16 <= n:
        wide = 0
        m = json_mask16(p + i, &wide)  # '"', '\\' and control bytes; ``wide``: those >= 0x80
        if m:
            k = json_ctz64(m)
            if wide & ((1 << k) - 1):
                ascii[0] = False
            return i + k if p[i + k] == 34 else -1
        if wide:
            ascii[0] = False
        i += 16
    while i < n:
        c = p[i]
        if c == 34:
            return i
        if c == 92 or c < 32:
            return -1
        if c >= 128:
            ascii[0] = False
        i += 1
    return -1


cdef inline Py_ssize_t _int_end(const uint8_t *p, Py_ssize_t i, Py_ssize_t n,
                                long long *value) noexcept:
    """The end of the JSON integer at ``p[i]`` (``-?(0|[1-9][0-9]*)``, at most
    18 digits, no fraction or exponent after it) with its value, or -1."""
    cdef bint neg = False
    cdef Py_ssize_t start
    cdef unsigned long long v = 0  # (wraps past 19 digits: refused by their count)
    cdef unsigned int d
    if i < n and p[i] == 45:
        neg = True
        i += 1
    start = i
    while i < n:
        d = p[i] - 48
        if d > 9:
            break
        v = v * 10 + d
        i += 1
    if i == start or i - start > 18 or (p[start] == 48 and i - start > 1):
        return -1
    if i < n and (p[i] == 46 or p[i] == 101 or p[i] == 69):
        return -1
    value[0] = -<long long>v if neg else <long long>v
    return i


cdef Py_ssize_t _null_end(const uint8_t *p, Py_ssize_t i, Py_ssize_t n) noexcept:
    if n - i >= 4 and memcmp(p + i, b"null", 4) == 0:
        return i + 4
    return -1


cdef Py_ssize_t _skip_scalar(const uint8_t *p, Py_ssize_t i, Py_ssize_t n) noexcept:
    """The end of a value of a key nobody reads: a plain ASCII string, an
    integer, true, false or null; -1 for anything else."""
    cdef bint ascii
    cdef long long v
    cdef uint8_t c = p[i]
    if c == 34:
        i = _string_end(p, i, n, &ascii)
        return i + 1 if i >= 0 and ascii else -1
    if c == 45 or 48 <= c <= 57:
        return _int_end(p, i, n, &v)
    if n - i >= 4 and memcmp(p + i, b"true", 4) == 0:
        return i + 4
    if n - i >= 5 and memcmp(p + i, b"false", 5) == 0:
        return i + 5
    return _null_end(p, i, n)


cdef object _text(const uint8_t *p, Py_ssize_t start, Py_ssize_t end):
    """The string between ``p[start:end]``, or None when it is not UTF-8."""
    try:
        return PyUnicode_DecodeUTF8(<const char *>p + start, end - start, NULL)
    except UnicodeDecodeError:
        return None


cdef enum:
    K_BROKER = 9  # the body's brokerName: its ``_kept`` entry after the entries' keys


cdef list _kept = [None] * (K_BROKER + 1)  # each field's last ASCII text read


cdef object _field_text(const uint8_t *p, Py_ssize_t start, Py_ssize_t end, bint ascii,
                        int field):
    """``_text`` of one of the body's fields (its ``_kept`` index): the str
    read for that field before when it is the same ASCII text (a client
    sends the same group, topic and broker name again and again), else a new
    one, kept when ASCII; its hash is then worked out only once."""
    cdef Py_ssize_t n = end - start
    last = <object>PyList_GET_ITEM(_kept, field)
    if ascii and last is not None and PyUnicode_GET_LENGTH(last) == n and \
            memcmp(PyUnicode_DATA(last), p + start, n) == 0:
        return last
    text = _text(p, start, end)
    if ascii:
        _kept[field] = text
    return text


cdef int _entry_key(const uint8_t *k, Py_ssize_t n) noexcept:
    if n == 1:
        if k[0] == 99:
            return K_C
        if k[0] == 116:
            return K_T
        if k[0] == 114:
            return K_R
        if k[0] == 113:
            return K_Q
        if k[0] == 98:
            return K_B
    elif n == 2:
        if k[0] == 115 and k[1] == 111:
            return K_SO
        if k[0] == 112 and k[1] == 116:
            return K_PT
        if k[0] == 105 and k[1] == 116:
            return K_IT
        if k[0] == 114 and k[1] == 113:
            return K_RQ
    return -1


cdef Py_ssize_t _read_entry(const uint8_t *p, Py_ssize_t i, Py_ssize_t n, list out):
    """The entry object opening at ``p[i]`` appended to ``out`` as the tuple
    ``entry_fields`` makes; its end, or -1 when it is not a plain entry."""
    cdef Py_ssize_t ks, ke, j
    cdef bint ascii, more
    cdef int k, seen = 0
    cdef long long ints[5]
    ints[K_IT - K_Q] = 0
    c = t = None
    r = "0"
    b = ""
    i = _ws(p, i + 1, n)
    while True:
        if i >= n or p[i] != 34:
            return -1
        ke = _string_end(p, i, n, &ascii)
        if ke < 0 or not ascii:
            return -1
        ks = i + 1
        i = _ws(p, ke + 1, n)
        if i >= n or p[i] != 58:
            return -1
        i = _ws(p, i + 1, n)
        if i >= n:
            return -1
        k = _entry_key(p + ks, ke - ks)
        if k >= 0:
            if seen & (1 << k):
                return -1  # a key twice: the general reader's rule
            seen |= 1 << k
        if k == K_C or k == K_R or k == K_T or k == K_B:
            if k == K_B and p[i] == 110:
                i = _null_end(p, i, n)
                if i < 0:
                    return -1
            else:
                if p[i] != 34:
                    return -1
                j = _string_end(p, i, n, &ascii)
                if j < 0:
                    return -1
                text = _field_text(p, i + 1, j, ascii, k)
                if text is None:
                    return -1
                if k == K_C:
                    c = text
                elif k == K_R:
                    r = text
                elif k == K_T:
                    t = text
                else:
                    b = text
                i = j + 1
        elif k >= K_Q:
            i = _int_end(p, i, n, &ints[k - K_Q])
            if i < 0:
                return -1
        else:
            i = _skip_scalar(p, i, n)
            if i < 0:
                return -1
        i = _next_or_end(p, i, n, 125, &more)
        if i < 0:
            return -1
        if not more:
            break
    if seen & REQUIRED != REQUIRED:
        return -1
    out.append((c, r, t, ints[0], ints[1], ints[2], ints[3], ints[4], b))
    return i


cdef Py_ssize_t _read_acks(const uint8_t *p, Py_ssize_t i, Py_ssize_t n, list out):
    """The array of entries opening at ``p[i]``; its end, or -1."""
    cdef bint more
    i = _ws(p, i + 1, n)
    if i < n and p[i] == 93:
        return i + 1
    while True:
        if i >= n or p[i] != 123:
            return -1
        i = _read_entry(p, i, n, out)
        if i < 0:
            return -1
        i = _next_or_end(p, i, n, 93, &more)
        if i < 0 or not more:
            return i


cdef object _read_body(const uint8_t *p, Py_ssize_t n):
    cdef Py_ssize_t i = _ws(p, 0, n), ks, ke, j
    cdef bint ascii, more, seen_acks = False, seen_name = False
    cdef list acks = []
    broker = None
    if i >= n or p[i] != 123:
        return None
    i = _ws(p, i + 1, n)
    if i < n and p[i] == 125:
        i += 1
    else:
        while True:
            if i >= n or p[i] != 34:
                return None
            ke = _string_end(p, i, n, &ascii)
            if ke < 0 or not ascii:
                return None
            ks = i + 1
            i = _ws(p, ke + 1, n)
            if i >= n or p[i] != 58:
                return None
            i = _ws(p, i + 1, n)
            if i >= n:
                return None
            if ke - ks == 4 and memcmp(p + ks, b"acks", 4) == 0:
                if seen_acks:
                    return None
                seen_acks = True
                if p[i] == 91:
                    i = _read_acks(p, i, n, acks)
                else:
                    i = _null_end(p, i, n)  # null: no entries, as an empty list
            elif ke - ks == 10 and memcmp(p + ks, b"brokerName", 10) == 0:
                if seen_name:
                    return None
                seen_name = True
                if p[i] == 34:
                    j = _string_end(p, i, n, &ascii)
                    if j < 0:
                        return None
                    broker = _field_text(p, i + 1, j, ascii, K_BROKER)
                    if broker is None:
                        return None
                    i = j + 1
                else:
                    i = _null_end(p, i, n)
            else:
                i = _skip_scalar(p, i, n)
            if i < 0:
                return None
            i = _next_or_end(p, i, n, 125, &more)
            if i < 0:
                return None
            if not more:
                break
    if _ws(p, i, n) != n:
        return None
    return broker, acks


def read_batch_ack(body):
    """A BATCH_ACK_MESSAGE body (bytes-like) read to ``(brokerName or None,
    [entry fields, ...])``, each entry the tuple ``ack.entry_fields`` makes
    of the general reader's object; None for a body it does not take (not
    plain JSON of strings and integers, an entry without a required field or
    with a field of another type, a key twice, anything odd), which the
    general reader then reads and judges."""
    return _read(body)


cdef object _read(object body):
    """``read_batch_ack``."""
    cdef Py_buffer pb
    PyObject_GetBuffer(body, &pb, PyBUF_SIMPLE)
    try:
        return _read_body(<const uint8_t *>pb.buf, pb.len)
    finally:
        PyBuffer_Release(&pb)
