# cython: language_level=3, boundscheck=False, wraparound=False, binding=False
"""Compiled twins of the consume-queue entry helpers in
rmq/store/consume_queue.py (20-byte entries: long offset, int size, long tagsCode)."""

from cpython.buffer cimport PyBUF_WRITABLE, PyBuffer_Release, PyObject_GetBuffer
from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t
from rmq._fast.byteorder cimport put32, put64, get32, get64


def cq_write(object buf, Py_ssize_t pos, long long offset, int size, long long tags_code):
    """One entry at ``buf[pos:]``.  The writable buffer is taken with the bare
    buffer protocol: a typed memoryview costs more to set up than the 20-byte
    write itself, and this runs once per dispatched message."""
    cdef Py_buffer pb
    PyObject_GetBuffer(buf, &pb, PyBUF_WRITABLE)
    if pos < 0 or pos + 20 > pb.len:
        PyBuffer_Release(&pb)
        raise ValueError("consume queue entry out of range")
    cdef uint8_t *p = <uint8_t *>pb.buf + pos
    put64(p, offset)
    put32(p + 8, size)
    put64(p + 12, tags_code)
    PyBuffer_Release(&pb)


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
