# cython: language_level=3, boundscheck=False, wraparound=False
"""Compiled twins of the consume-queue entry helpers in
rmq/store/consume_queue.py (20-byte entries: long offset, int size, long tagsCode)."""

from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t


cdef inline void put32(uint8_t *p, int32_t v) noexcept nogil:
    cdef uint32_t u = <uint32_t>v
    p[0] = (u >> 24) & 0xFF
    p[1] = (u >> 16) & 0xFF
    p[2] = (u >> 8) & 0xFF
    p[3] = u & 0xFF


cdef inline void put64(uint8_t *p, int64_t v) noexcept nogil:
    put32(p, <int32_t>(v >> 32))
    put32(p + 4, <int32_t>(<uint32_t>v))


cdef inline int32_t get32(const uint8_t *p) noexcept nogil:
    return <int32_t>((<uint32_t>p[0] << 24) | (<uint32_t>p[1] << 16) | (<uint32_t>p[2] << 8) | <uint32_t>p[3])


cdef inline int64_t get64(const uint8_t *p) noexcept nogil:
    return (<int64_t>get32(p) << 32) | (<int64_t>(<uint32_t>get32(p + 4)))


def cq_write(uint8_t[::1] buf, Py_ssize_t pos, long long offset, int size, long long tags_code):
    if pos < 0 or pos + 20 > buf.shape[0]:
        raise ValueError("consume queue entry out of range")
    put64(&buf[pos], offset)
    put32(&buf[pos + 8], size)
    put64(&buf[pos + 12], tags_code)


def cq_valid_bytes(const uint8_t[::1] buf, Py_ssize_t start, Py_ssize_t end):
    if end > buf.shape[0]:
        end = buf.shape[0]
    if start < 0:
        raise ValueError("negative start")
    cdef Py_ssize_t pos = start
    cdef const uint8_t *b = &buf[0] if buf.shape[0] else NULL
    with nogil:
        while pos + 20 <= end:
            if get64(b + pos) < 0 or get32(b + pos + 8) <= 0:
                break
            pos += 20
    return pos - start


def cq_filler(uint8_t[::1] buf, Py_ssize_t start, Py_ssize_t end):
    if start < 0 or end > buf.shape[0]:
        raise ValueError("filler out of range")
    cdef Py_ssize_t pos = start
    with nogil:
        while pos < end:
            put64(&buf[pos], 0)
            put32(&buf[pos + 8], 0x7FFFFFFF)
            put64(&buf[pos + 12], 0)
            pos += 20
