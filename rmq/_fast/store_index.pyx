# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Compiled twins of the index-file slot functions in rmq/store/index.py
(STORE_FORMAT.md 7): the whole state lives in the mapped buffer."""

from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t
from rmq._fast.byteorder cimport get32, get64
from rmq._fast.index_slot cimport index_put as c_index_put


cdef inline void check(Py_ssize_t n, long long max_slots, long long max_index) except *:
    if max_slots <= 0 or max_index <= 0 or n < 40 + max_slots * 4 + max_index * 20:
        raise ValueError("index buffer smaller than its layout")


def index_put(uint8_t[::1] buf, long long max_slots, long long max_index, int key_hash,
              long long phy_offset, long long store_ts):
    check(buf.shape[0], max_slots, max_index)
    if key_hash < 0:
        raise ValueError("negative key hash")
    return c_index_put(&buf[0], max_slots, max_index, key_hash, phy_offset, store_ts)


def index_get(const uint8_t[::1] buf, long long max_slots, long long max_index, int key_hash,
              long long begin, long long end, Py_ssize_t max_num):
    check(buf.shape[0], max_slots, max_index)
    out = []
    if key_hash < 0:
        return out
    cdef const uint8_t *b = &buf[0]
    cdef int64_t begin_ts = get64(b)
    cdef int32_t index_count = get32(b + 36)
    cdef int32_t cur = get32(b + 40 + (key_hash % max_slots) * 4)
    if cur <= 0 or cur > index_count or index_count <= 1 or index_count > max_index:
        return out
    cdef const uint8_t *base = b + 40 + max_slots * 4
    cdef const uint8_t *e
    cdef int32_t h, diff, prev
    cdef int64_t t
    while len(out) < max_num:
        e = base + <int64_t>cur * 20
        h = get32(e)
        diff = get32(e + 12)
        prev = get32(e + 16)
        if diff < 0:
            break
        t = begin_ts + <int64_t>diff * 1000
        if h == key_hash and begin <= t <= end:
            out.append(get64(e + 4))
        if prev <= 0 or prev > index_count or prev == cur or t < begin:
            break
        cur = prev
    return out


def key_hash(str key):
    """abs(String.hashCode(key)) over UTF-16 code units; 0 for Integer.MIN_VALUE."""
    cdef int32_t h = 0
    cdef Py_UCS4 ch
    cdef uint32_t cp
    for ch in key:
        cp = ch
        if cp > 0xFFFF:
            cp -= 0x10000
            h = <int32_t>(<uint32_t>h * 31 + (0xD800 + (cp >> 10)))
            h = <int32_t>(<uint32_t>h * 31 + (0xDC00 + (cp & 0x3FF)))
        else:
            h = <int32_t>(<uint32_t>h * 31 + cp)
    if h == -2147483648:
        return 0
    return -h if h < 0 else h
