# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Compiled twin of ``PullLane`` in rmq/broker/pull_lane.py: the pulls at the
start of a read that find messages, the first answered at once and the others
queued on the channel.

For each frame it reads the JSON or ROCKETMQ header in place -- no dict, no
``RemotingCommand`` -- into the values a pull needs, hands them to
``PullLaneSupport.take`` (the processor's checks, the store read and every
statistic, in Python, shared with the twin), and renders the answer's header
from ``FoundHeader``'s pieces with the five numbers printed between them (a
ROCKETMQ answer's header by ``PullLaneSupport.render_rocketmq``); the
first answer's records are copied behind it, the others are written from the
views the store read.

The reader takes a strict subset of JSON it can vouch for: an object of the
remoting header's own keys, strings without escapes or control bytes whose
bytes past ASCII are well-formed UTF-8 (a subscription's non-ASCII tags),
integers without fraction or exponent, ``null``, whitespace between tokens.
A ROCKETMQ header's texts must be well-formed UTF-8, as the general decoder
requires.  Texts are handed on decoded as the general decoder decodes them.
Anything else -- escapes, malformed UTF-8, floats, unknown or repeated keys,
numbers the general path would read differently, a body -- ends the lane's
turn and the general path, which decides everything, serves the frame; so
the answers are the general path's whatever the lane takes.
"""

from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize
from cpython.unicode cimport PyUnicode_DecodeUTF8
from libc.stdint cimport int32_t, int64_t, uint8_t, uint64_t
from libc.string cimport memcmp, memcpy

from rmq._fast.byteorder cimport get32, put32
from rmq._fast.frame_body cimport copy_records
from rmq._fast.json_text cimport header_utf8, json_utf8_valid

cdef enum:
    PULL = 11
    RPC_RESPONSE = 1
    RPC_ONEWAY = 2
    MAX_DIGITS = 19           # int64 without its sign
    # extFields the lane reads
    F_GROUP = 0
    F_TOPIC = 1
    F_QUEUE_ID = 2
    F_QUEUE_OFFSET = 3
    F_MAX_NUMS = 4
    F_SYS_FLAG = 5
    F_COMMIT_OFFSET = 6
    F_SUSPEND = 7
    F_SUB_VERSION = 8
    F_SUBSCRIPTION = 9
    F_EXPRESSION = 10
    NF = 11
    REQUIRED = 0x1FF          # every field but subscription and expressionType
    # top-level keys
    K_CODE = 0
    K_EXT = 1
    K_FLAG = 2
    K_LANGUAGE = 3
    K_OPAQUE = 4
    K_REMARK = 5
    K_SERIALIZE = 6
    K_VERSION = 7
    NK = 8
    # value kinds
    V_STR = 1
    V_INT = 2
    V_BOOL = 3
    V_NULL = 4

cdef const char *FIELD_NAMES[NF]
FIELD_NAMES[:] = [b"consumerGroup", b"topic", b"queueId", b"queueOffset", b"maxMsgNums",
                  b"sysFlag", b"commitOffset", b"suspendTimeoutMillis", b"subVersion",
                  b"subscription", b"expressionType"]
cdef Py_ssize_t FIELD_LENS[NF]
FIELD_LENS[:] = [13, 5, 7, 11, 10, 7, 12, 20, 10, 12, 14]
cdef const char *KEY_NAMES[NK]
KEY_NAMES[:] = [b"code", b"extFields", b"flag", b"language", b"opaque", b"remark",
                b"serializeTypeCurrentRPC", b"version"]
cdef Py_ssize_t KEY_LENS[NK]
KEY_LENS[:] = [4, 9, 4, 8, 6, 6, 23, 7]


cdef struct Text:
    const uint8_t *p
    Py_ssize_t n


cdef struct Req:
    int64_t code, flag, opaque
    int stype                 # 0 JSON, 1 ROCKETMQ: the answer's serialization
    int keys                  # top-level keys seen (bit per K_*)
    int fields                # extFields read (bit per F_*)
    Text f[NF]                # a field's text (V_STR)
    int64_t v[NF]             # a field's number (V_INT: the C++ client's queueId, sysFlag, ...)
    int kind[NF]


cdef inline const uint8_t *skip_ws(const uint8_t *p, const uint8_t *end) noexcept nogil:
    while p < end and (p[0] == 32 or p[0] == 10 or p[0] == 13 or p[0] == 9):
        p += 1
    return p


cdef inline const uint8_t *plain_string(const uint8_t *p, const uint8_t *end,
                                        Text *out) noexcept nogil:
    """``p`` at an opening quote: a string without escapes or control bytes,
    its bytes past ASCII well-formed UTF-8 (as orjson requires), into
    ``out``; the byte after the closing quote, or NULL."""
    cdef const uint8_t *s = p + 1
    cdef bint wide = False
    p = s
    while p < end:
        if p[0] == 34:
            if wide and not json_utf8_valid(s, p - s):
                return NULL
            out.p = s
            out.n = p - s
            return p + 1
        if p[0] >= 0x80:
            wide = True
        elif p[0] < 0x20 or p[0] == 0x7F or p[0] == 92:
            return NULL
        p += 1
    return NULL


cdef inline const uint8_t *json_int(const uint8_t *p, const uint8_t *end,
                                    int64_t *out) noexcept nogil:
    """A JSON integer (``-?(0|[1-9][0-9]*)``, at most 18 digits, no fraction or
    exponent) into ``out``; the byte after it, or NULL."""
    cdef bint neg = False
    cdef int64_t v = 0
    cdef int digits = 0
    if p < end and p[0] == 45:
        neg = True
        p += 1
    if p >= end or not 48 <= p[0] <= 57:
        return NULL
    if p[0] == 48 and p + 1 < end and 48 <= p[1] <= 57:
        return NULL  # a leading zero is not JSON
    while p < end and 48 <= p[0] <= 57:
        v = v * 10 + (p[0] - 48)
        digits += 1
        if digits > 18:
            return NULL
        p += 1
    if p < end and (p[0] == 46 or p[0] == 101 or p[0] == 69):
        return NULL
    out[0] = -v if neg else v
    return p


cdef inline bint text_int(Text t, int64_t *out) noexcept nogil:
    """A string holding ``-?[0-9]{1,18}`` (Python's ``int`` reads it as this
    value); False for any other text."""
    cdef const uint8_t *p = t.p
    cdef const uint8_t *end = t.p + t.n
    cdef bint neg = False
    cdef int64_t v = 0
    if p < end and p[0] == 45:
        neg = True
        p += 1
    if p >= end or end - p > 18:
        return False
    while p < end:
        if not 48 <= p[0] <= 57:
            return False
        v = v * 10 + (p[0] - 48)
        p += 1
    out[0] = -v if neg else v
    return True


cdef inline int key_index(Text k, const char **names, const Py_ssize_t *lens,
                          int n) noexcept nogil:
    cdef int i
    for i in range(n):
        if lens[i] == k.n and memcmp(names[i], k.p, k.n) == 0:
            return i
    return -1


cdef const uint8_t *scalar(const uint8_t *p, const uint8_t *end, int *kind, Text *s,
                           int64_t *v) noexcept nogil:
    """A string, an integer, true, false or null at ``p``; the byte after it,
    or NULL."""
    if p >= end:
        return NULL
    if p[0] == 34:
        kind[0] = V_STR
        return plain_string(p, end, s)
    if p[0] == 110 or p[0] == 116 or p[0] == 102:
        kind[0] = V_NULL if p[0] == 110 else V_BOOL
        if end - p >= 4 and (memcmp(p, b"null", 4) == 0 or memcmp(p, b"true", 4) == 0):
            return p + 4
        if end - p >= 5 and memcmp(p, b"false", 5) == 0:
            return p + 5
        return NULL
    kind[0] = V_INT
    return json_int(p, end, v)


cdef const uint8_t *ext_fields(const uint8_t *p, const uint8_t *end, Req *r) noexcept nogil:
    """The extFields object at ``p`` (its '{'): every value a scalar, the
    pull's fields each at most once, its names as strings and its numbers as
    strings or integers (the general reader turns an integer into its decimal
    text, which ``int`` reads back as the same number)."""
    cdef Text k, val
    cdef int i, kind
    cdef int64_t v
    p = skip_ws(p + 1, end)
    if p < end and p[0] == 125:
        return p + 1
    while True:
        if p >= end or p[0] != 34:
            return NULL
        p = plain_string(p, end, &k)
        if p == NULL:
            return NULL
        p = skip_ws(p, end)
        if p >= end or p[0] != 58:
            return NULL
        p = scalar(skip_ws(p + 1, end), end, &kind, &val, &v)
        if p == NULL:
            return NULL
        i = key_index(k, FIELD_NAMES, FIELD_LENS, NF)
        if i >= 0:
            if r.fields & (1 << i):
                return NULL  # repeated: the general reader keeps the last one
            if kind == V_BOOL or kind == V_NULL or (kind == V_INT and (i == F_GROUP or i == F_TOPIC
                                                        or i >= F_SUBSCRIPTION)):
                return NULL
            r.fields |= 1 << i
            r.kind[i] = kind
            r.f[i] = val
            r.v[i] = v
        p = skip_ws(p, end)
        if p >= end:
            return NULL
        if p[0] == 125:
            return p + 1
        if p[0] != 44:
            return NULL
        p = skip_ws(p + 1, end)


cdef bint read_header(const uint8_t *p, Py_ssize_t n, Req *r) noexcept nogil:
    """The JSON header ``p[:n]`` of a request into ``r``; False for anything
    this reader does not take for certain."""
    cdef const uint8_t *end = p + n
    cdef Text k, s
    cdef int i, kind
    cdef int64_t v
    r.keys = 0
    r.fields = 0
    r.code = r.flag = r.opaque = 0
    p = skip_ws(p, end)
    if p >= end or p[0] != 123:
        return False
    p = skip_ws(p + 1, end)
    if p < end and p[0] == 125:
        return False
    while True:
        if p >= end or p[0] != 34:
            return False
        p = plain_string(p, end, &k)
        if p == NULL:
            return False
        i = key_index(k, KEY_NAMES, KEY_LENS, NK)
        if i < 0 or r.keys & (1 << i):
            return False
        r.keys |= 1 << i
        p = skip_ws(p, end)
        if p >= end or p[0] != 58:
            return False
        p = skip_ws(p + 1, end)
        if i == K_EXT:
            if p >= end or p[0] != 123:
                return False
            p = ext_fields(p, end, r)
        else:
            p = scalar(p, end, &kind, &s, &v)
            if p == NULL:
                return False
            if i == K_CODE or i == K_FLAG or i == K_OPAQUE or i == K_VERSION:
                if kind != V_INT or not -2147483648 <= v <= 2147483647:
                    return False
                if i == K_CODE:
                    r.code = v
                elif i == K_FLAG:
                    r.flag = v
                elif i == K_OPAQUE:
                    r.opaque = v
            elif kind != V_STR and kind != V_NULL:
                return False  # language, remark, serializeTypeCurrentRPC: text or null
        if p == NULL:
            return False
        p = skip_ws(p, end)
        if p >= end:
            return False
        if p[0] == 125:
            break
        if p[0] != 44:
            return False
        p = skip_ws(p + 1, end)
    p = skip_ws(p + 1, end)
    return (p == end and r.keys & (1 << K_CODE) and r.keys & (1 << K_OPAQUE)
            and r.keys & (1 << K_EXT) and (r.fields & REQUIRED) == REQUIRED)


cdef inline bint header_text(const uint8_t *p, Py_ssize_t n, bint printable) noexcept nogil:
    """A ROCKETMQ header text the general decoder decodes (well-formed UTF-8)
    and, when ``printable``, without control bytes (below 0x20, 0x7F)."""
    cdef Py_ssize_t i
    cdef bint wide
    if printable:
        for i in range(n):
            if p[i] < 0x20 or p[i] == 0x7F:
                return False
    return header_utf8(p, n, &wide)


cdef bint read_header_rmq(const uint8_t *d, Py_ssize_t hlen, Req *r) noexcept nogil:
    """The ROCKETMQ binary header ``d[:hlen]`` of a request into ``r``
    (``read_header``'s contract): the pull's fields are length-prefixed
    texts; an entry with an empty key or value is skipped (the general
    reader's rule).
    Malformed UTF-8, a control byte in a pull field, a pull field twice, or
    a length outside the header is left to the general path."""
    cdef int32_t rlen, elen, vlen
    cdef Py_ssize_t p, stop
    cdef int klen, i
    cdef Text k
    r.keys = 0
    r.fields = 0
    if hlen < 21:
        return False
    r.code = (d[0] << 8) | d[1]
    if r.code & 0x8000:
        r.code -= 0x10000
    r.opaque = get32(d + 5)
    r.flag = get32(d + 9)
    rlen = get32(d + 13)
    if rlen < 0 or 17 + <Py_ssize_t>rlen + 4 > hlen or not header_text(d + 17, rlen, False):
        return False
    p = 17 + rlen
    elen = get32(d + p)
    p += 4
    if elen < 0 or p + <Py_ssize_t>elen > hlen:
        return False
    stop = p + elen
    while p < stop:
        if p + 2 > stop:
            return False
        klen = (d[p] << 8) | d[p + 1]
        p += 2
        if klen & 0x8000 or p + klen + 4 > stop or not header_text(d + p, klen, False):
            return False
        k.p = d + p
        k.n = klen
        p += klen
        vlen = get32(d + p)
        p += 4
        if vlen < 0 or p + <Py_ssize_t>vlen > stop:
            return False
        i = key_index(k, FIELD_NAMES, FIELD_LENS, NF)
        if not header_text(d + p, vlen, i >= 0):
            return False
        if i >= 0 and vlen:
            if r.fields & (1 << i):
                return False  # repeated: the general reader keeps the last one
            r.fields |= 1 << i
            r.kind[i] = V_STR
            r.f[i].p = d + p
            r.f[i].n = vlen
        p += vlen
    return (r.fields & REQUIRED) == REQUIRED


cdef bint read_pull(const uint8_t *frame, Py_ssize_t length, Req *r,
                    int64_t *vals) noexcept nogil:
    """The PULL_MESSAGE request ``frame[:length]`` (after its length prefix),
    JSON or ROCKETMQ header and no body, into ``r`` and its numbers into
    ``vals``; False for anything this reader leaves to the general path."""
    cdef Py_ssize_t hlen
    cdef int i
    if frame[0] > 1:
        return False  # an unknown serialization
    hlen = (<Py_ssize_t>frame[1] << 16) | (<Py_ssize_t>frame[2] << 8) | frame[3]
    if hlen + 4 != length:
        return False  # a body, or a header longer than the frame
    r.stype = frame[0]
    if not (read_header_rmq(frame + 4, hlen, r) if r.stype else read_header(frame + 4, hlen, r)):
        return False
    if r.code != PULL or r.flag & (RPC_RESPONSE | RPC_ONEWAY):
        return False
    for i in range(F_QUEUE_ID, F_SUB_VERSION + 1):
        if r.kind[i] == V_INT:
            vals[i] = r.v[i]
        elif not text_int(r.f[i], &vals[i]):
            return False
    return True


cdef object field_str(Req *r, int i):
    """A text field as the lane hands it on (None when absent)."""
    if not r.fields & (1 << i):
        return None
    return PyUnicode_DecodeUTF8(<const char *>r.f[i].p, r.f[i].n, NULL)


def pull_head(buf, Py_ssize_t pos, Py_ssize_t end, Py_ssize_t max_frame, make):
    """The pull request at ``buf[pos:end]`` as the lane reads it: (opaque,
    serialize type, the header ``make`` builds from the values), or None for
    what the lane leaves to the general path.  For tests and fuzzing:
    whatever it returns, the general reader must read the same."""
    cdef Py_buffer pb
    cdef Req r
    cdef int64_t vals[NF]
    cdef Py_ssize_t length
    PyObject_GetBuffer(buf, &pb, PyBUF_SIMPLE)
    try:
        if pos < 0 or end > pb.len or pos > end:
            raise ValueError("pos/end outside the buffer")
        if end - pos < 8:
            return None
        length = get32(<const uint8_t *>pb.buf + pos)
        if length < 4 or length > max_frame or end - pos - 4 < length:
            return None
        if not read_pull(<const uint8_t *>pb.buf + pos + 4, length, &r, vals):
            return None
        return r.opaque, r.stype, make(
            field_str(&r, F_GROUP), field_str(&r, F_TOPIC), vals[F_QUEUE_ID],
            vals[F_QUEUE_OFFSET], vals[F_MAX_NUMS], vals[F_SYS_FLAG], vals[F_COMMIT_OFFSET],
            vals[F_SUSPEND], field_str(&r, F_SUBSCRIPTION), vals[F_SUB_VERSION],
            field_str(&r, F_EXPRESSION))
    finally:
        PyBuffer_Release(&pb)


cdef Py_ssize_t put_int(char *out, int64_t v) noexcept nogil:
    """``str(v)`` into ``out``; its length."""
    cdef char tmp[24]
    cdef int n = 0, k = 0
    cdef uint64_t u = <uint64_t>v
    if v < 0:
        u = <uint64_t>0 - u
        out[0] = 45
        k = 1
    while True:
        tmp[n] = <char>(48 + u % 10)
        n += 1
        u //= 10
        if u == 0:
            break
    while n:
        n -= 1
        out[k] = tmp[n]
        k += 1
    return k


cdef class _Name:
    """The last text a header field held and its ``str``: a consumer pulls the
    same group and topic again and again, so the str (and its hash) is made
    once."""
    cdef bytes raw
    cdef object text

    def __cinit__(self):
        self.raw = b""
        self.text = None

    cdef object of(self, Text t):
        if self.text is not None and len(self.raw) == t.n and \
                memcmp(PyBytes_AS_STRING(self.raw), t.p, t.n) == 0:
            return self.text
        self.raw = PyBytes_FromStringAndSize(<const char *>t.p, t.n)
        self.text = PyUnicode_DecodeUTF8(<const char *>t.p, t.n, NULL)
        return self.text


cdef class PullLane:
    """See ``rmq.broker.pull_lane.PullLane`` (the twin) for the contract."""

    cdef readonly object support
    cdef readonly Py_ssize_t max_frame
    cdef object _take, _has_messages
    cdef object _make
    cdef list _pieces
    cdef int _order[5]
    cdef Py_ssize_t _fixed      # bytes of the pieces together
    cdef int _taken
    cdef object _response       # FoundResponse
    cdef object _render_rocketmq
    cdef _Name _group, _topic, _subscription, _expression

    def __init__(self, support, Py_ssize_t max_frame):
        self.support = support
        self.max_frame = max_frame
        self._take = support.take
        self._has_messages = support.has_messages
        self._make = support.make_header
        head = support.head
        self._pieces = [bytes(p) for p in head.pieces]
        if len(self._pieces) != 6 or sorted(head.order) != [0, 1, 2, 3, 4]:
            raise ValueError("the found-response header must hold five numbers")
        for i in range(5):
            self._order[i] = head.order[i]
        self._fixed = sum(len(p) for p in self._pieces)
        self._taken = 0
        self._response = support.response
        self._render_rocketmq = support.render_rocketmq
        self._group = _Name()
        self._topic = _Name()
        self._subscription = _Name()
        self._expression = _Name()

    def served(self):
        """(request code, oneway, count) of what the last ``serve`` took."""
        return [(PULL, False, self._taken)] if self._taken else []

    def serve(self, channel, buf, Py_ssize_t pos, Py_ssize_t end):
        """Serve the pulls at the start of ``buf[pos:end]`` that find messages:
        the first answer written at once, the others queued on the channel
        (written together when the loop's turn ends); returns the position of
        the first frame left to the general path (and None: nothing is left
        for the caller to write)."""
        cdef Py_buffer pb
        cdef const uint8_t *p
        cdef Py_ssize_t length
        cdef Req r
        cdef int64_t vals[NF]
        self._taken = 0
        PyObject_GetBuffer(buf, &pb, PyBUF_SIMPLE)
        try:
            p = <const uint8_t *>pb.buf
            if end > pb.len:
                end = pb.len
            while pos >= 0 and end - pos >= 4:
                length = get32(p + pos)
                if length < 4 or length > self.max_frame or end - pos - 4 < length:
                    break
                if not read_pull(p + pos + 4, length, &r, vals):
                    break
                if not self._answer(channel, &r, vals):
                    break
                pos += 4 + length
                self._taken += 1
        finally:
            PyBuffer_Release(&pb)
        return pos, None

    cdef bint _answer(self, channel, Req *r, int64_t *vals) except -1:
        """Take one pull: False when ``support.take`` leaves it to the general path."""
        topic = self._topic.of(r.f[F_TOPIC])
        if not self._has_messages(topic, vals[F_QUEUE_ID], vals[F_QUEUE_OFFSET]):
            return False
        sub = self._subscription.of(r.f[F_SUBSCRIPTION]) \
            if r.fields & (1 << F_SUBSCRIPTION) else None
        expr = self._expression.of(r.f[F_EXPRESSION]) \
            if r.fields & (1 << F_EXPRESSION) else None
        h = self._make(self._group.of(r.f[F_GROUP]), topic,
                       vals[F_QUEUE_ID], vals[F_QUEUE_OFFSET], vals[F_MAX_NUMS],
                       vals[F_SYS_FLAG], vals[F_COMMIT_OFFSET], vals[F_SUSPEND], sub,
                       vals[F_SUB_VERSION], expr)
        try:
            taken = self._take(channel, h)
        except Exception as exc:  # answered as the general path would
            self.support.failed(channel, r.opaque, exc)
            return True
        if taken is None:
            return False
        if r.stype:
            t = <tuple>taken
            head = self._render_rocketmq(t[1], t[2], t[3], t[4], r.opaque, t[5])
            if self._taken == 0:
                channel.write_bytes(b"".join([head, *t[0]]))
            else:
                channel.send_response(self._response(head, r.opaque, t[0]))
            return True
        answer = (taken, r.opaque)
        if self._taken == 0:
            channel.write_bytes(self._frames([answer]))
        else:
            head = PyBytes_FromStringAndSize(NULL, self._head(answer, NULL))
            self._head(answer, PyBytes_AS_STRING(head))
            channel.send_response(self._response(head, r.opaque, (<tuple>taken)[0]))
        return True

    cdef Py_ssize_t _head(self, tuple answer, char *out) except -1:
        """The length prefix and header of one answer into ``out`` (NULL: only
        measure); the bytes they take."""
        cdef char digits[5][24]
        cdef Py_ssize_t lens[5]
        cdef int64_t values[5]
        cdef Py_ssize_t hlen = self._fixed, at = 8, n, size
        cdef int i
        taken, opaque = answer
        _views, suggest, next_begin, min_offset, max_offset, size = taken
        values[0] = suggest
        values[1] = next_begin
        values[2] = min_offset
        values[3] = max_offset
        values[4] = opaque
        for i in range(5):
            lens[i] = put_int(digits[i], values[i])
            hlen += lens[i]
        if out == NULL:
            return 8 + hlen
        put32(<uint8_t *>out, <int32_t>(4 + hlen + size))
        put32(<uint8_t *>out + 4, <int32_t>hlen)
        for i in range(6):
            piece = <bytes>self._pieces[i]
            n = len(piece)
            memcpy(out + at, PyBytes_AS_STRING(piece), n)
            at += n
            if i < 5:
                memcpy(out + at, digits[self._order[i]], lens[self._order[i]])
                at += lens[self._order[i]]
        return at

    cdef bytes _frames(self, list answers):
        """The response frames of ``answers`` back to back: each its header
        and its records (``(views, suggest, nextBeginOffset, minOffset,
        maxOffset, size)`` as ``take`` gave them, and the request's opaque)."""
        cdef Py_ssize_t total = 0, at = 0, size
        cdef char *out
        for answer in answers:
            total += self._head(<tuple>answer, NULL) + <Py_ssize_t>(answer[0][5])
        result = PyBytes_FromStringAndSize(NULL, total)
        out = PyBytes_AS_STRING(result)
        for answer in answers:
            size = answer[0][5]
            at += self._head(<tuple>answer, out + at)
            at = copy_records(out, at, size, <list>(answer[0][0]))
        return result
