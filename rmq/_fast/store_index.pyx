# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Compiled twins of the index-file slot functions in rmq/store/index.py
(STORE_FORMAT.md 7): the whole state lives in the mapped buffer."""

from cpython.buffer cimport PyBUF_WRITABLE, PyBuffer_Release, PyObject_GetBuffer
from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t
from rmq._fast.byteorder cimport get32, get64
from rmq._fast.index_slot cimport index_put as c_index_put
from rmq._fast.record cimport utf16_hash


cdef extern from "Python.h":
    int PyUnicode_KIND(object o)
    void *PyUnicode_DATA(object o)
    Py_ssize_t PyUnicode_GET_LENGTH(object o)
    Py_UCS4 PyUnicode_READ(int kind, void *data, Py_ssize_t index) nogil


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
    cdef int32_t h = utf16_hash(0, key)
    if h == -2147483648:
        return 0
    return -h if h < 0 else h


cdef inline uint32_t hash_unit(uint32_t h, Py_UCS4 ch) noexcept nogil:
    """One character into a Java String.hashCode (UTF-16 code units)."""
    cdef uint32_t cp = ch
    if cp > 0xFFFF:
        cp -= 0x10000
        h = h * 31 + (0xD800 + (cp >> 10))
        return h * 31 + (0xDC00 + (cp & 0x3FF))
    return h * 31 + cp


cdef inline uint32_t hash_range(uint32_t h, int kind, void *data, Py_ssize_t start,
                                Py_ssize_t end) noexcept nogil:
    cdef Py_ssize_t i
    for i in range(start, end):
        h = hash_unit(h, PyUnicode_READ(kind, data, i))
    return h


cdef inline int32_t abs_hash(uint32_t h) noexcept nogil:
    cdef int32_t s = <int32_t>h
    if s == -2147483648:
        return 0
    return -s if s < 0 else s


def index_keys(object buf, long long max_slots, long long max_index, str topic,
               long long phy_offset, long long store_ts, str uniq_key, str keys,
               Py_ssize_t start):
    """Index one message's keys ``topic#UNIQ_KEY`` then ``topic#token`` for every
    non-empty space-separated KEYS token, skipping the first ``start`` of them.
    -1 when done (or when the file already covers ``phy_offset``); otherwise the
    number of the key that did not fit because the file is full."""
    cdef Py_buffer view
    PyObject_GetBuffer(buf, &view, PyBUF_WRITABLE)
    try:
        check(view.len, max_slots, max_index)
        return put_keys(<uint8_t *>view.buf, max_slots, max_index, topic, phy_offset, store_ts,
                        uniq_key, keys, start)
    finally:
        PyBuffer_Release(&view)


cdef Py_ssize_t put_keys(uint8_t *b, int64_t max_slots, int64_t max_index, str topic,
                         int64_t phy, int64_t store_ts, str uniq_key, str keys,
                         Py_ssize_t start) except -2:
    cdef int32_t count = get32(b + 36)
    if (count if count > 0 else 1) >= max_index:
        return start
    if phy < get64(b + 24):
        return -1
    cdef uint32_t prefix = hash_range(0, PyUnicode_KIND(topic), PyUnicode_DATA(topic), 0,
                                      PyUnicode_GET_LENGTH(topic))
    prefix = prefix * 31 + 35  # '#'
    cdef Py_ssize_t n = 0, i, ks, klen
    cdef int kind
    cdef void *data
    if uniq_key is not None and PyUnicode_GET_LENGTH(uniq_key):
        if n >= start:
            if not c_index_put(b, max_slots, max_index,
                               abs_hash(hash_range(prefix, PyUnicode_KIND(uniq_key),
                                                   PyUnicode_DATA(uniq_key), 0,
                                                   PyUnicode_GET_LENGTH(uniq_key))),
                               phy, store_ts):
                return n
        n += 1
    if keys is None:
        return -1
    kind = PyUnicode_KIND(keys)
    data = PyUnicode_DATA(keys)
    klen = PyUnicode_GET_LENGTH(keys)
    ks = 0
    for i in range(klen + 1):
        if i < klen and PyUnicode_READ(kind, data, i) != 32:
            continue
        if i > ks:
            if n >= start:
                if not c_index_put(b, max_slots, max_index,
                                   abs_hash(hash_range(prefix, kind, data, ks, i)), phy, store_ts):
                    return n
            n += 1
        ks = i + 1
    return -1
