# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Compiled twin of ``append_batch`` in rmq/store/batch_append.py.

One call stores a whole SEND_BATCH_MESSAGE body: every inner message becomes
a full commit-log record (STORE_FORMAT.md 2.14: the inner flag, body and
properties joined with the batch-level string, the shared header fields,
consecutive queue and physical offsets, one store timestamp), its
consume-queue entry (tagsCode of TAGS, STORE_FORMAT.md 4-5) and its index
entries (UNIQ_KEY, then the KEYS tokens, STORE_FORMAT.md 7) are written, and
the comma-joined offset message ids are made -- no Python object per message.

A first pass reads the wire body and checks everything before the first byte
is written: a malformed body, DELAY or non-ASCII properties, a record that
does not end by ``limit``, a consume-queue or index file without room for all
of it make the call return None with nothing written, and the caller takes
the general path.
"""

from cpython.buffer cimport PyBUF_SIMPLE, PyBUF_WRITABLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE
from libc.stdint cimport int32_t, int64_t, uint8_t, uint64_t
from libc.string cimport memcmp, memcpy
from rmq._fast.byteorder cimport get16, get32, get64, put32, put64
from rmq._fast.record cimport (
    Props,
    ascii_hash,
    is_ascii,
    c_record_size,
    c_write_record,
    find_props,
    index_prop_keys,
    prop_keys,
)


cdef extern from "Python.h":
    object PyUnicode_New(Py_ssize_t size, Py_UCS4 maxchar)
    void *PyUnicode_DATA(object o)
    int PyUnicode_IS_ASCII(object o)
    Py_ssize_t PyUnicode_GET_LENGTH(object o)

cdef const char *HEX = b"0123456789ABCDEF"

cdef inline void join_props(Props *inner, const Props *batch, Py_ssize_t boff) noexcept nogil:
    """The scan of ``inner [+ \\x02] + batch`` from the scans of both parts: the
    segments of the joined string are the inner ones followed by the batch
    ones (a trailing \\x02 of the inner string only ends an empty segment), so
    a name present in the batch part wins, as a later duplicate does."""
    if batch.tags_at >= 0:
        inner.tags_at = boff + batch.tags_at
        inner.tags_len = batch.tags_len
    if batch.keys_at >= 0:
        inner.keys_at = boff + batch.keys_at
        inner.keys_len = batch.keys_len
    if batch.uniq_at >= 0:
        inner.uniq_at = boff + batch.uniq_at
        inner.uniq_len = batch.uniq_len


cdef inline bint _has_timer(const uint8_t *p, Py_ssize_t n) noexcept nogil:
    """A property named TIMER_... (a timer batch: the put hook parks it)."""
    cdef Py_ssize_t i = 0
    while i + 6 < n:
        if (i == 0 or p[i - 1] == 2) and memcmp(p + i, b"TIMER_", 6) == 0:
            return True
        i += 1
    return False


cdef Py_ssize_t check_wire(const uint8_t *w, Py_ssize_t n, int32_t sys_flag, Py_ssize_t tlen,
                           const uint8_t *bp, Py_ssize_t bpl, Py_ssize_t *count,
                           Py_ssize_t *keys, Props *kept) noexcept nogil:
    """Stored size of the batch (count and an upper bound of the index keys
    through the pointers), or -1 when the fast path does not take it.  The
    property scans of the first ``KEPT`` records go to ``kept``."""
    cdef Props pr
    find_props(bp, bpl, &pr)
    if pr.delay or pr.non_ascii or _has_timer(bp, bpl):
        return -1
    cdef Py_ssize_t batch_keys = prop_keys(bp, &pr)
    cdef Py_ssize_t pos = 0, total = 0, end, plen, joined
    cdef int32_t inner_size, body_len
    count[0] = 0
    keys[0] = 0
    while pos < n:
        if pos + 22 > n:
            return -1
        inner_size = get32(w + pos)
        body_len = get32(w + pos + 16)
        if body_len < 0 or pos + 22 + <Py_ssize_t>body_len > n:
            return -1
        plen = get16(w + pos + 20 + body_len)
        end = pos + 22 + body_len + plen
        if plen < 0 or end > n or inner_size != end - pos:
            return -1
        find_props(w + end - plen, plen, &pr)
        if pr.delay or pr.non_ascii:
            return -1
        if count[0] < KEPT:
            kept[count[0]] = pr
        joined = plen + (1 if plen > 0 and bpl > 0 and w[end - 1] != 2 else 0) + bpl
        if joined > 32767:
            return -1
        keys[0] += prop_keys(w + end - plen, &pr) + batch_keys
        total += c_record_size(sys_flag, body_len, tlen, joined)
        count[0] += 1
        pos = end
    return total


cdef void write_all(uint8_t *out, const uint8_t *w, Py_ssize_t n, int32_t queue_id,
                    int32_t sys_flag, int64_t born_ts, const uint8_t *born, Py_ssize_t born_len,
                    int64_t store_ts, const uint8_t *store, Py_ssize_t store_len,
                    int32_t reconsume, const uint8_t *topic, Py_ssize_t tlen,
                    const uint8_t *bp, Py_ssize_t bpl, int64_t first_qoff, int64_t phy,
                    uint8_t *cq, uint8_t *ix, int64_t max_slots, int64_t max_index,
                    char *ids, Py_ssize_t hex_len, int32_t *last_tags,
                    const Props *kept) noexcept nogil:
    """Records, consume-queue entries, index entries and message ids of a batch
    ``check_wire`` accepted; ``last_tags`` gets the last record's tagsCode."""
    cdef int32_t topic_hash = ascii_hash(0, topic, tlen)
    cdef Py_ssize_t rpos = 0, wpos = 0, i = 0, size, plen, joined = 0
    cdef int32_t flag, body_len, tags_code = 0
    cdef int64_t rec_phy
    cdef uint64_t u
    cdef uint8_t *p
    cdef bint sep
    cdef Props pr, bpr
    cdef int j
    find_props(bp, bpl, &bpr)
    while rpos < n:
        flag = get32(w + rpos + 12)
        body_len = get32(w + rpos + 16)
        plen = get16(w + rpos + 20 + body_len)
        sep = plen > 0 and bpl > 0 and w[rpos + 22 + body_len + plen - 1] != 2
        joined = plen + (1 if sep else 0) + bpl
        rec_phy = phy + wpos
        # header and body through the single-record writer, then the joined properties
        size = c_write_record(out + wpos, queue_id, flag, first_qoff + i, rec_phy, sys_flag,
                              born_ts, born, born_len, store_ts, store, store_len, reconsume, 0,
                              w + rpos + 20, body_len, topic, tlen, NULL, 0) + joined
        put32(out + wpos, <int32_t>size)
        p = out + wpos + size - joined - 2
        p[0] = (joined >> 8) & 0xFF
        p[1] = joined & 0xFF
        p += 2
        if plen:
            memcpy(p, w + rpos + 22 + body_len, plen)
        if sep:
            p[plen] = 2
        if bpl:
            memcpy(p + joined - bpl, bp, bpl)
        # dispatch: what the reput scan would read back from this record
        if i < KEPT:
            pr = kept[i]
        else:
            find_props(p, plen, &pr)
        join_props(&pr, &bpr, plen + (1 if sep else 0))
        tags_code = ascii_hash(0, p + pr.tags_at, pr.tags_len) if pr.tags_at >= 0 else 0
        put64(cq + i * 20, rec_phy)
        put32(cq + i * 20 + 8, <int32_t>size)
        put64(cq + i * 20 + 12, <int64_t>tags_code)
        if ix != NULL and (pr.keys_at >= 0 or pr.uniq_at >= 0) and rec_phy >= get64(ix + 24):
            index_prop_keys(ix, max_slots, max_index, topic_hash, p, &pr, rec_phy, store_ts)
        # offset message id: store host hex (already in place) + 16 hex digits
        if i:
            (ids - 1)[0] = 44  # ','
            memcpy(ids, ids - hex_len - 17, hex_len)
        u = <uint64_t>rec_phy
        for j in range(16):
            ids[hex_len + 15 - j] = HEX[u & 0xF]
            u >>= 4
        ids += hex_len + 17
        wpos += size
        rpos += 22 + body_len + plen
        i += 1
    last_tags[0] = tags_code


def append_batch(object buf, Py_ssize_t pos, Py_ssize_t limit, object wire, int queue_id,
                 int sys_flag, long long born_ts, bytes born_host, long long store_ts,
                 bytes store_host, int reconsume, bytes topic, bytes batch_props,
                 long long first_qoff, long long phy, object cq_buf, Py_ssize_t cq_pos,
                 object index, long long max_slots, long long max_index, str host_hex):
    """``(total bytes, count, message ids, last tagsCode)``, or None (nothing
    written)."""
    cdef Py_ssize_t blen = PyBytes_GET_SIZE(born_host)
    cdef Py_ssize_t slen = PyBytes_GET_SIZE(store_host)
    cdef Py_ssize_t tlen = PyBytes_GET_SIZE(topic)
    cdef Py_ssize_t bpl = PyBytes_GET_SIZE(batch_props)
    cdef Py_ssize_t hex_len = PyUnicode_GET_LENGTH(host_hex)
    if blen != (20 if sys_flag & 0x10 else 8) or slen != (20 if sys_flag & 0x20 else 8):
        raise ValueError("host field length does not match the sysFlag")
    if not PyUnicode_IS_ASCII(host_hex):
        raise ValueError("host hex must be ASCII")
    cdef const uint8_t *tp = <const uint8_t *>PyBytes_AS_STRING(topic)
    cdef const uint8_t *bp = <const uint8_t *>PyBytes_AS_STRING(batch_props)
    cdef const uint8_t *bh = <const uint8_t *>PyBytes_AS_STRING(born_host)
    cdef const uint8_t *sh = <const uint8_t *>PyBytes_AS_STRING(store_host)
    if tlen > 127 or not is_ascii(tp, tlen):
        return None
    cdef Py_buffer wv, ov, cv, iv
    cdef Py_ssize_t total, count = 0, keys = 0
    cdef int32_t last_tags = 0
    cdef uint8_t *ix = NULL
    cdef char *ids_p
    cdef Props kept[KEPT]
    PyObject_GetBuffer(wire, &wv, PyBUF_SIMPLE)
    try:
        with nogil:
            total = check_wire(<const uint8_t *>wv.buf, wv.len, sys_flag, tlen, bp, bpl,
                               &count, &keys, kept)
        if total < 0 or count == 0 or pos < 0 or pos + total > limit:
            return None
        PyObject_GetBuffer(buf, &ov, PyBUF_WRITABLE)
        try:
            if pos + total > ov.len:
                raise ValueError("batch does not fit into the buffer")
            PyObject_GetBuffer(cq_buf, &cv, PyBUF_WRITABLE)
            try:
                if cq_pos < 0 or cq_pos + count * 20 > cv.len:
                    return None
                if index is not None:
                    PyObject_GetBuffer(index, &iv, PyBUF_WRITABLE)
                    ix = <uint8_t *>iv.buf
                try:
                    if ix != NULL:
                        if max_slots <= 0 or max_index <= 0 or \
                                iv.len < 40 + max_slots * 4 + max_index * 20:
                            raise ValueError("index buffer smaller than its layout")
                        if keys and max(1, get32(ix + 36)) + keys > max_index:
                            return None
                    ids = PyUnicode_New(count * (hex_len + 17) - 1, 127)
                    ids_p = <char *>PyUnicode_DATA(ids)
                    memcpy(ids_p, PyUnicode_DATA(host_hex), hex_len)
                    with nogil:
                        write_all(
                            <uint8_t *>ov.buf + pos, <const uint8_t *>wv.buf, wv.len, queue_id,
                            sys_flag, born_ts, bh, blen, store_ts, sh, slen,
                            reconsume, tp, tlen, bp, bpl, first_qoff, phy,
                            <uint8_t *>cv.buf + cq_pos, ix, max_slots, max_index, ids_p, hex_len,
                            &last_tags, kept)
                finally:
                    if ix != NULL:
                        PyBuffer_Release(&iv)
            finally:
                PyBuffer_Release(&cv)
        finally:
            PyBuffer_Release(&ov)
    finally:
        PyBuffer_Release(&wv)
    return total, count, ids, last_tags
