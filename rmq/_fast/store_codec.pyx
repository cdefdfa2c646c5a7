# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Compiled twin of the stored-message codec in rmq/store/message_codec.py.

Same functions, same arguments, same bytes and tuples; the record layout is
described at the top of message_codec.py (STORE_FORMAT.md 2).  Every length
is checked once against the buffer before any raw access.
"""

from cpython.buffer cimport PyBUF_SIMPLE, PyBUF_WRITABLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE
from libc.stdint cimport int16_t, int32_t, int64_t, uint8_t, uint32_t
from rmq._fast.byteorder cimport put32, put64, get32, get64, get16, masked_crc
from rmq._fast.record cimport ascii_hash, c_record_size, c_write_record, utf16_hash
from libc.string cimport memcpy
from rmq.common.message import parse_properties_text


cdef enum:
    MESSAGE_MAGIC = -626843481
    BLANK_MAGIC = -875286124

cdef int SCAN_END = 0
cdef int SCAN_MESSAGE = 1
cdef int SCAN_BLANK = 2
cdef int SCAN_SIZE_MISMATCH = 3
cdef int SCAN_CRC_ERROR = 4


def record_size(int sys_flag, Py_ssize_t body_len, Py_ssize_t topic_len, Py_ssize_t props_len):
    return c_record_size(sys_flag, body_len, topic_len, props_len)


cdef class _Bufs:
    """Read-only views of the arguments of one call: ``bytes`` are used in
    place, anything else through the buffer protocol (released at the end)."""
    cdef Py_buffer views[6]
    cdef int used

    def __cinit__(self):
        self.used = 0

    cdef const uint8_t *get(self, object o, Py_ssize_t *n) except? NULL:
        if type(o) is bytes:
            n[0] = PyBytes_GET_SIZE(o)
            return <const uint8_t *>PyBytes_AS_STRING(o)
        PyObject_GetBuffer(o, &self.views[self.used], PyBUF_SIMPLE)
        self.used += 1
        n[0] = self.views[self.used - 1].len
        return <const uint8_t *>self.views[self.used - 1].buf

    def __dealloc__(self):
        cdef int i
        for i in range(self.used):
            PyBuffer_Release(&self.views[i])


def write_record(object buf, Py_ssize_t pos, int queue_id, int flag, long long queue_offset,
                 long long phy_offset, int sys_flag, long long born_ts, object born_host,
                 long long store_ts, object store_host, int reconsume_times,
                 long long prepared_tx_offset, object body, object topic, object props):
    cdef _Bufs bufs = _Bufs()
    cdef Py_ssize_t born_len, store_len, body_len, topic_len, props_len
    cdef const uint8_t *bh = bufs.get(born_host, &born_len)
    cdef const uint8_t *sh = bufs.get(store_host, &store_len)
    cdef const uint8_t *bp = bufs.get(body, &body_len)
    cdef const uint8_t *tp = bufs.get(topic, &topic_len)
    cdef const uint8_t *pp = bufs.get(props, &props_len)
    cdef Py_ssize_t size = c_record_size(sys_flag, body_len, topic_len, props_len)
    if born_len != (20 if sys_flag & 0x10 else 8) or store_len != (20 if sys_flag & 0x20 else 8):
        raise ValueError("host field length does not match the sysFlag")
    if topic_len > 127 or props_len > 32767:
        raise ValueError("topic or properties too long")
    cdef Py_buffer out
    PyObject_GetBuffer(buf, &out, PyBUF_WRITABLE)
    try:
        if pos < 0 or pos + size > out.len:
            raise ValueError("record does not fit into the buffer")
        with nogil:
            c_write_record(<uint8_t *>out.buf + pos, queue_id, flag, queue_offset, phy_offset, sys_flag,
                           born_ts, bh, born_len, store_ts, sh, store_len, reconsume_times,
                           prepared_tx_offset, bp, body_len, tp, topic_len, pp, props_len)
    finally:
        PyBuffer_Release(&out)
    return size


def write_blank(uint8_t[::1] buf, Py_ssize_t pos, int max_blank):
    if pos < 0 or pos + 8 > buf.shape[0]:
        raise ValueError("blank does not fit into the buffer")
    put32(&buf[pos], max_blank)
    put32(&buf[pos + 4], BLANK_MAGIC)


def batch_size(const uint8_t[::1] wire, int sys_flag, Py_ssize_t topic_len, Py_ssize_t batch_props_len):
    cdef Py_ssize_t n = wire.shape[0]
    cdef Py_ssize_t pos = 0, total = 0, count = 0, end
    cdef int32_t inner_size, body_len
    cdef Py_ssize_t props_len
    cdef const uint8_t *w = &wire[0] if n else NULL
    while pos < n:
        if pos + 20 > n:
            raise ValueError("truncated batch record header")
        inner_size = get32(w + pos)
        body_len = get32(w + pos + 16)
        if body_len < 0 or pos + 20 + body_len + 2 > n:
            raise ValueError("bad batch body length")
        props_len = get16(w + pos + 20 + body_len)
        end = pos + 22 + body_len + props_len
        if props_len < 0 or end > n or inner_size != end - pos:
            raise ValueError("bad batch record size")
        if props_len and batch_props_len and w[end - 1] != 2:
            props_len += 1 + batch_props_len
        elif batch_props_len:
            props_len += batch_props_len
        if props_len > 32767:
            raise ValueError("batch properties too long")
        total += c_record_size(sys_flag, body_len, topic_len, props_len)
        count += 1
        pos = end
    return total, count


def write_batch(uint8_t[::1] buf, Py_ssize_t pos, const uint8_t[::1] wire, int queue_id, int sys_flag,
                long long born_ts, const uint8_t[::1] born_host, long long store_ts,
                const uint8_t[::1] store_host, int reconsume_times, const uint8_t[::1] topic,
                const uint8_t[::1] batch_props, long long first_queue_offset, long long phy_offset,
                int[::1] sizes):
    total, count = batch_size(wire, sys_flag, topic.shape[0], batch_props.shape[0])
    cdef Py_ssize_t c_total = total
    cdef Py_ssize_t c_count = count
    if born_host.shape[0] != (20 if sys_flag & 0x10 else 8) or store_host.shape[0] != (20 if sys_flag & 0x20 else 8):
        raise ValueError("host field length does not match the sysFlag")
    if topic.shape[0] > 127:
        raise ValueError("topic too long")
    if pos < 0 or pos + c_total > buf.shape[0] or sizes.shape[0] < c_count:
        raise ValueError("batch does not fit into the buffer")
    if c_count == 0:
        return 0
    cdef const uint8_t *w = &wire[0]
    cdef uint8_t *out = &buf[pos]
    cdef const uint8_t *bp = &batch_props[0] if batch_props.shape[0] else NULL
    cdef const uint8_t *tp = &topic[0] if topic.shape[0] else NULL
    cdef Py_ssize_t bpl = batch_props.shape[0]
    cdef Py_ssize_t n = wire.shape[0]
    cdef Py_ssize_t rpos = 0, wpos = 0, i = 0, size, plen, total_props
    cdef int32_t flag, body_len
    cdef uint8_t *p
    cdef bint sep
    with nogil:
        while rpos < n:
            flag = get32(w + rpos + 12)
            body_len = get32(w + rpos + 16)
            plen = get16(w + rpos + 20 + body_len)
            sep = plen > 0 and bpl > 0 and w[rpos + 22 + body_len + plen - 1] != 2
            total_props = plen + (1 if sep else 0) + bpl
            # header and body through the single-record writer, then the joined properties
            size = c_write_record(out + wpos, queue_id, flag, first_queue_offset + i,
                                  phy_offset + wpos, sys_flag, born_ts, &born_host[0], born_host.shape[0],
                                  store_ts, &store_host[0], store_host.shape[0], reconsume_times, 0,
                                  w + rpos + 20, body_len, tp, topic.shape[0], NULL, 0)
            size += total_props
            put32(out + wpos, <int32_t>size)
            p = out + wpos + size - total_props - 2
            p[0] = (total_props >> 8) & 0xFF
            p[1] = total_props & 0xFF
            p += 2
            if plen:
                memcpy(p, w + rpos + 22 + body_len, plen)
                p += plen
            if sep:
                p[0] = 2
                p += 1
            if bpl:
                memcpy(p, bp, bpl)
            sizes[i] = <int>size
            wpos += size
            rpos += 22 + body_len + plen
            i += 1
    return wpos


cdef object java_hash_utf8(const uint8_t *p, Py_ssize_t n):
    """Java String.hashCode of UTF-8 bytes (over UTF-16 code units)."""
    cdef int32_t h = 0
    cdef Py_ssize_t i
    cdef bint ascii = True
    for i in range(n):
        if p[i] >= 0x80:
            ascii = False
            break
    if ascii:
        return ascii_hash(h, p, n)
    return utf16_hash(h, (<bytes>p[:n]).decode("utf-8", "replace"))


cdef inline bint name_is(const uint8_t *p, Py_ssize_t n, const char *name, Py_ssize_t ln) noexcept nogil:
    cdef Py_ssize_t i
    if n != ln:
        return False
    for i in range(n):
        if p[i] != <uint8_t>name[i]:
            return False
    return True


_NOT_A_MESSAGE = (0, 0, None, 0, 0, 0, 0, 0, 0, None, None, None, 0, 0, 0)


def scan_record(object buf, Py_ssize_t pos, Py_ssize_t limit, bint check_crc):
    cdef Py_buffer view
    PyObject_GetBuffer(buf, &view, PyBUF_SIMPLE)
    try:
        if pos < 0 or pos + 8 > limit or limit > view.len:
            return _NOT_A_MESSAGE
        return c_scan(<const uint8_t *>view.buf, pos, limit, check_crc)
    finally:
        PyBuffer_Release(&view)


cdef object c_scan(const uint8_t *b, Py_ssize_t pos, Py_ssize_t limit, bint check_crc):
    cdef int32_t size = get32(b + pos)
    cdef int32_t magic = get32(b + pos + 4)
    if magic == BLANK_MAGIC:
        return (SCAN_BLANK, size) + _NOT_A_MESSAGE[2:]
    if magic != MESSAGE_MAGIC or size < 91 or pos + size > limit:
        return _NOT_A_MESSAGE
    cdef const uint8_t *r = b + pos
    cdef const uint8_t *end = r + size
    cdef int32_t crc = get32(r + 8)
    cdef int32_t queue_id = get32(r + 12)
    cdef int64_t queue_offset = get64(r + 20)
    cdef int64_t phy_offset = get64(r + 28)
    cdef int32_t sys_flag = get32(r + 36)
    if size < 91 + (12 if sys_flag & 0x10 else 0) + (12 if sys_flag & 0x20 else 0):
        return (SCAN_SIZE_MISMATCH, size) + _NOT_A_MESSAGE[2:]  # too short for its host fields
    cdef const uint8_t *p = r + 48 + (20 if sys_flag & 0x10 else 8)
    cdef int64_t store_ts = get64(p)
    p += 8 + (20 if sys_flag & 0x20 else 8)
    cdef int64_t prepared = get64(p + 4)
    cdef int32_t body_len = get32(p + 12)
    p += 16
    if body_len < 0 or body_len > end - p - 1:
        return (SCAN_SIZE_MISMATCH, size) + _NOT_A_MESSAGE[2:]
    cdef const uint8_t *body = p
    p += body_len
    cdef int topic_len = p[0]
    if topic_len > 127 or p + 1 + topic_len + 2 > end:
        return (SCAN_SIZE_MISMATCH, size) + _NOT_A_MESSAGE[2:]
    cdef const uint8_t *topic = p + 1
    p += 1 + topic_len
    cdef int16_t props_len = get16(p)
    p += 2
    if props_len < 0 or c_record_size(sys_flag, body_len, topic_len, props_len) != size:
        return (SCAN_SIZE_MISMATCH, size) + _NOT_A_MESSAGE[2:]
    cdef int32_t actual
    if check_crc and body_len > 0:
        with nogil:
            actual = masked_crc(body, body_len)
        if actual != crc:
            return (SCAN_CRC_ERROR, size) + _NOT_A_MESSAGE[2:]
    # properties: TAGS, KEYS, UNIQ_KEY, DELAY (segments with a \x01 neither first nor last)
    cdef const uint8_t *props = p
    cdef Py_ssize_t i = 0, seg, sep, seg_end
    cdef Py_ssize_t tags_at = -1, tags_len = 0, keys_at = -1, keys_len = 0
    cdef Py_ssize_t uniq_at = -1, uniq_len = 0, delay_at = -1, delay_len = 0
    while i <= props_len and props_len > 0:
        seg = i
        while i < props_len and props[i] != 2:
            i += 1
        seg_end = i
        sep = seg
        while sep < seg_end and props[sep] != 1:
            sep += 1
        if sep > seg and sep < seg_end - 1:
            if name_is(props + seg, sep - seg, "TAGS", 4):
                tags_at = sep + 1
                tags_len = seg_end - sep - 1
            elif name_is(props + seg, sep - seg, "KEYS", 4):
                keys_at = sep + 1
                keys_len = seg_end - sep - 1
            elif name_is(props + seg, sep - seg, "UNIQ_KEY", 8):
                uniq_at = sep + 1
                uniq_len = seg_end - sep - 1
            elif name_is(props + seg, sep - seg, "DELAY", 5):
                delay_at = sep + 1
                delay_len = seg_end - sep - 1
        i += 1
    tags_code = java_hash_utf8(props + tags_at, tags_len) if tags_at >= 0 else 0
    return (
        SCAN_MESSAGE, size, (<bytes>topic[:topic_len]).decode("utf-8", "replace"), queue_id, queue_offset,
        phy_offset, sys_flag, store_ts, tags_code,
        (<bytes>props[keys_at:keys_at + keys_len]).decode("utf-8", "replace") if keys_at >= 0 else None,
        (<bytes>props[uniq_at:uniq_at + uniq_len]).decode("utf-8", "replace") if uniq_at >= 0 else None,
        (<bytes>props[delay_at:delay_at + delay_len]).decode("utf-8", "replace") if delay_at >= 0 else None,
        (props - b), props_len, prepared,
    )


cdef extern from "Python.h":
    object PyUnicode_DecodeASCII(const char *s, Py_ssize_t size, const char *errors)
    void *PyUnicode_DATA(object o)
    int PyUnicode_IS_ASCII(object o)
    Py_ssize_t PyUnicode_GET_LENGTH(object o)


cdef dict parse_ascii_props(const uint8_t *p, Py_ssize_t n):
    cdef dict out = {}
    cdef Py_ssize_t i = 0, seg, sep, seg_end
    while i < n:
        seg = i
        while i < n and p[i] != 2:
            i += 1
        seg_end = i
        sep = seg
        while sep < seg_end and p[sep] != 1:
            sep += 1
        if seg < sep < seg_end - 1:
            out[PyUnicode_DecodeASCII(<const char *>p + seg, sep - seg, NULL)] = \
                PyUnicode_DecodeASCII(<const char *>p + sep + 1, seg_end - sep - 1, NULL)
        i += 1
    return out


def string_to_message_properties(object text):
    """Compiled ``string_to_message_properties`` of rmq/store/message_codec.py:
    ASCII text (a str or any bytes-like object) is parsed here without an
    intermediate string; anything else goes to the twin."""
    cdef Py_buffer view
    cdef bint ascii
    cdef Py_ssize_t i
    if text is None:
        return {}
    if type(text) is str:
        if PyUnicode_IS_ASCII(text):
            return parse_ascii_props(<const uint8_t *>PyUnicode_DATA(text),
                                     PyUnicode_GET_LENGTH(text))
        return parse_properties_text(text)
    PyObject_GetBuffer(text, &view, PyBUF_SIMPLE)
    try:
        ascii = True
        for i in range(view.len):
            if (<const uint8_t *>view.buf)[i] >= 0x80:
                ascii = False
                break
        if ascii:
            return parse_ascii_props(<const uint8_t *>view.buf, view.len)
    finally:
        PyBuffer_Release(&view)
    return parse_properties_text(text)
