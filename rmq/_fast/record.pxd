# cython: language_level=3
# The commit-log record writer (STORE_FORMAT.md 2.2), shared by the store codec,
# the single-send fast path and the batch put, and the property scan of a record
# shared by the bulk dispatcher and the batch put; inline, so none pays a call.

from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t
from libc.string cimport memchr, memcmp, memcpy

from rmq._fast.byteorder cimport masked_crc, put32, put64
from rmq._fast.index_slot cimport index_put


cdef enum:
    RECORD_MAGIC = -626843481


cdef inline Py_ssize_t c_record_size(int32_t sys_flag, Py_ssize_t body_len, Py_ssize_t topic_len,
                                     Py_ssize_t props_len) noexcept nogil:
    return (4 + 4 + 4 + 4 + 4 + 8 + 8 + 4 + 8 + (20 if sys_flag & 0x10 else 8) + 8
            + (20 if sys_flag & 0x20 else 8) + 4 + 8 + 4 + body_len + 1 + topic_len + 2 + props_len)


cdef inline Py_ssize_t c_write_record(uint8_t *out, int32_t queue_id, int32_t flag, int64_t queue_offset,
                                      int64_t phy_offset, int32_t sys_flag, int64_t born_ts,
                                      const uint8_t *born, Py_ssize_t born_len, int64_t store_ts,
                                      const uint8_t *store, Py_ssize_t store_len, int32_t reconsume,
                                      int64_t prepared, const uint8_t *body, Py_ssize_t body_len,
                                      const uint8_t *topic, Py_ssize_t topic_len, const uint8_t *props,
                                      Py_ssize_t props_len) noexcept nogil:
    cdef Py_ssize_t size = c_record_size(sys_flag, body_len, topic_len, props_len)
    cdef uint8_t *p = out
    put32(p, <int32_t>size)
    put32(p + 4, RECORD_MAGIC)
    put32(p + 8, masked_crc(body, body_len))
    put32(p + 12, queue_id)
    put32(p + 16, flag)
    put64(p + 20, queue_offset)
    put64(p + 28, phy_offset)
    put32(p + 36, sys_flag)
    put64(p + 40, born_ts)
    p += 48
    memcpy(p, born, born_len)
    p += born_len
    put64(p, store_ts)
    p += 8
    memcpy(p, store, store_len)
    p += store_len
    put32(p, reconsume)
    put64(p + 4, prepared)
    put32(p + 12, <int32_t>body_len)
    p += 16
    if body_len:
        memcpy(p, body, body_len)
    p += body_len
    p[0] = <uint8_t>topic_len
    memcpy(p + 1, topic, topic_len)
    p += 1 + topic_len
    p[0] = (props_len >> 8) & 0xFF
    p[1] = props_len & 0xFF
    if props_len:
        memcpy(p + 2, props, props_len)
    return size


# --- the properties of a stored record (STORE_FORMAT.md 2.8) -------------------
# What dispatch needs from a record's properties, found without a Python object:
# shared by the bulk dispatcher and the batch put, inline.

cdef struct Props:
    Py_ssize_t tags_at, tags_len, keys_at, keys_len, uniq_at, uniq_len
    bint delay
    bint non_ascii


cdef extern from *:
    """
    /* Eight bytes at a time for the scans and hashes below (a record's
       properties and keys are mostly ASCII): whether none has its top bit
       set, and Java's ``h * 31 + c`` continued over all eight, in uint32
       arithmetic (31 to the powers 8..1 modulo 2**32). */
    static inline int rmq_ascii8(const uint8_t *p) {
        uint64_t w;
        memcpy(&w, p, 8);
        return (w & 0x8080808080808080ull) == 0;
    }
    static inline uint32_t rmq_hash31_8(uint32_t h, const uint8_t *p) {
        return h * 2487512833u + p[0] * 1742810335u + p[1] * 887503681u + p[2] * 28629151u
            + p[3] * 923521u + p[4] * 29791u + p[5] * 961u + p[6] * 31u + p[7];
    }
    """
    bint rmq_ascii8(const uint8_t *p) noexcept nogil
    uint32_t rmq_hash31_8(uint32_t h, const uint8_t *p) noexcept nogil


cdef inline bint is_ascii(const uint8_t *p, Py_ssize_t n) noexcept nogil:
    """No byte of ``p[:n]`` is >= 0x80 (topics and property strings the
    compiled put paths take)."""
    cdef Py_ssize_t i = 0
    while i + 8 <= n:
        if not rmq_ascii8(p + i):
            return False
        i += 8
    while i < n:
        if p[i] >= 0x80:
            return False
        i += 1
    return True


cdef inline bint prop_is(const uint8_t *seg, Py_ssize_t n, const char *name,
                         Py_ssize_t ln) noexcept nogil:
    """The segment ``seg[:n]`` is ``name``, its \\x01 and a value of one
    byte or more: its first \\x01 follows the name (none of whose bytes is
    one)."""
    return n > ln + 1 and seg[ln] == 1 and memcmp(seg, name, ln) == 0


cdef inline void find_props(const uint8_t *props, Py_ssize_t n, Props *out) noexcept nogil:
    """TAGS, KEYS, UNIQ_KEY (positions inside ``props``), whether DELAY is set and
    whether any byte is non-ASCII; the segment rule of the reference parser
    (a \\x01 neither first nor last), later duplicates win.  Each segment
    found by ``memchr`` and told by its first bytes (the names looked for
    are the only ones that matter), the ASCII check a word at a time."""
    cdef Py_ssize_t i = 0, seg_end, ln
    cdef const uint8_t *seg
    cdef const void *e
    out.tags_at = out.keys_at = out.uniq_at = -1
    out.tags_len = out.keys_len = out.uniq_len = 0
    out.delay = False
    out.non_ascii = not is_ascii(props, n)
    while i < n:
        seg = props + i
        e = memchr(seg, 2, n - i)
        seg_end = n if e == NULL else <const uint8_t*>e - props
        ln = seg_end - i
        if ln >= 6:
            if prop_is(seg, ln, "TAGS", 4):
                out.tags_at = i + 5
                out.tags_len = ln - 5
            elif prop_is(seg, ln, "KEYS", 4):
                out.keys_at = i + 5
                out.keys_len = ln - 5
            elif prop_is(seg, ln, "UNIQ_KEY", 8):
                out.uniq_at = i + 9
                out.uniq_len = ln - 9
            elif prop_is(seg, ln, "DELAY", 5):
                out.delay = True
        i = seg_end + 1


cdef inline int32_t ascii_hash(int32_t h, const uint8_t *p, Py_ssize_t n) noexcept nogil:
    """Java ``String.hashCode`` continued over ASCII bytes."""
    cdef uint32_t u = <uint32_t>h
    cdef Py_ssize_t i = 0
    while i + 8 <= n:
        u = rmq_hash31_8(u, p + i)
        i += 8
    while i < n:
        u = u * 31 + p[i]
        i += 1
    return <int32_t>u


cdef inline int32_t code_point_hash(int32_t h, uint32_t cp) noexcept nogil:
    """Java ``String.hashCode`` continued over one code point's UTF-16 code
    units (past U+FFFF: its surrogate pair)."""
    if cp > 0xFFFF:
        cp -= 0x10000
        h = <int32_t>(<uint32_t>h * 31 + (0xD800 + (cp >> 10)))
        return <int32_t>(<uint32_t>h * 31 + (0xDC00 + (cp & 0x3FF)))
    return <int32_t>(<uint32_t>h * 31 + cp)


cdef inline int32_t utf16_hash(int32_t h, str s):
    """Java ``String.hashCode`` continued over ``s``'s UTF-16 code units (a
    code point past U+FFFF counts as its surrogate pair)."""
    cdef Py_UCS4 ch
    cdef uint32_t cp
    for ch in s:
        cp = ch
        h = code_point_hash(h, cp)
    return h


cdef inline int32_t utf8_hash(int32_t h, const uint8_t *p, Py_ssize_t n) noexcept nogil:
    """Java ``String.hashCode`` continued over the UTF-16 code units of the
    well-formed UTF-8 ``p[:n]`` (checked by the caller); ``ascii_hash`` for
    ASCII."""
    cdef Py_ssize_t i = 0
    cdef uint32_t cp
    cdef uint8_t c
    while i < n:
        if i + 8 <= n and rmq_ascii8(p + i):  # (eight ASCII bytes at once)
            h = <int32_t>rmq_hash31_8(<uint32_t>h, p + i)
            i += 8
            continue
        c = p[i]
        if c < 0x80:
            h = <int32_t>(<uint32_t>h * 31 + c)
            i += 1
            continue
        if c < 0xE0:
            cp = ((c & 0x1F) << 6) | (p[i + 1] & 0x3F)
            i += 2
        elif c < 0xF0:
            cp = ((c & 0x0F) << 12) | ((p[i + 1] & 0x3F) << 6) | (p[i + 2] & 0x3F)
            i += 3
        else:
            cp = ((c & 0x07) << 18) | ((p[i + 1] & 0x3F) << 12) | ((p[i + 2] & 0x3F) << 6) \
                | (p[i + 3] & 0x3F)
            i += 4
        h = code_point_hash(h, cp)
    return h


cdef inline int32_t index_key_hash(int32_t topic_hash, const uint8_t *key, Py_ssize_t n) noexcept nogil:
    """Index slot hash of ``topic#key`` (STORE_FORMAT.md 7.2) from the topic's
    hash; the key is well-formed UTF-8."""
    cdef int32_t h = utf8_hash(<int32_t>(<uint32_t>topic_hash * 31 + 35), key, n)  # '#'
    if h == -2147483648:
        return 0
    return -h if h < 0 else h


cdef inline Py_ssize_t count_keys(const uint8_t *p, Py_ssize_t n) noexcept nogil:
    """Non-empty space-separated tokens of a KEYS value."""
    cdef Py_ssize_t i = 0, c = 0
    while i < n:
        while i < n and p[i] == 32:
            i += 1
        if i < n:
            c += 1
        while i < n and p[i] != 32:
            i += 1
    return c


cdef inline Py_ssize_t prop_keys(const uint8_t *props, Props *pr) noexcept nogil:
    """Index keys a property string holds: UNIQ_KEY plus the KEYS tokens."""
    return (1 if pr.uniq_at >= 0 else 0) + (count_keys(props + pr.keys_at, pr.keys_len)
                                             if pr.keys_at >= 0 else 0)


cdef inline void index_prop_keys(uint8_t *ix, int64_t max_slots, int64_t max_index,
                                 int32_t topic_hash, const uint8_t *props, Props *pr, int64_t phy,
                                 int64_t store_ts) noexcept nogil:
    """Index a record under its UNIQ_KEY, then under each non-empty KEYS token
    (buildIndex's order); the caller has checked the file has room."""
    cdef Py_ssize_t k = 0, ks
    if pr.uniq_at >= 0:
        index_put(ix, max_slots, max_index,
                  index_key_hash(topic_hash, props + pr.uniq_at, pr.uniq_len), phy, store_ts)
    if pr.keys_at < 0:
        return
    while k < pr.keys_len:
        while k < pr.keys_len and props[pr.keys_at + k] == 32:
            k += 1
        ks = k
        while k < pr.keys_len and props[pr.keys_at + k] != 32:
            k += 1
        if k > ks:
            index_put(ix, max_slots, max_index,
                      index_key_hash(topic_hash, props + pr.keys_at + ks, k - ks), phy, store_ts)


cdef inline object direct_tail_of(object mfq):
    """The last mapped file of a commit log's files (``mfq``) when a compiled
    put may write records straight into it: there is one, and it keeps no
    separate write buffer (the transient store pool's commit step would
    otherwise have to copy them).  The caller reads ``mfq`` (kept, or at its
    slot)."""
    files = mfq.mapped_files
    if not files:
        return None
    mf = files[len(files) - 1]
    return None if mf.write_buffer is not None else mf
