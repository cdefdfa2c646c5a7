# cython: language_level=3, boundscheck=False, wraparound=False, binding=False
"""Compiled twins of the consume-queue entry helpers in
rmq/store/consume_queue.py (20-byte entries: long offset, int size, long tagsCode)."""

from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.memoryview cimport PyMemoryView_GET_BUFFER
from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t
from rmq._fast.byteorder cimport put32, put64, get32, get64


def cq_write(object buf, Py_ssize_t pos, long long offset, int size, long long tags_code):
    """One entry at ``buf[pos:]``.  This runs once per dispatched message, so
    the entry's 20 bytes should cost more than reaching them: a memoryview
    (what the store passes: a mapped file's view) is read through its own
    buffer, which it keeps alive, without a new buffer request; anything else
    takes the bare buffer protocol."""
    cdef Py_buffer pb
    if type(buf) is memoryview:
        _put_entry(PyMemoryView_GET_BUFFER(buf), pos, offset, size, tags_code)
        return
    PyObject_GetBuffer(buf, &pb, PyBUF_SIMPLE)
    try:
        _put_entry(&pb, pos, offset, size, tags_code)
    finally:
        PyBuffer_Release(&pb)


cdef inline int _put_entry(Py_buffer *view, Py_ssize_t pos, long long offset, int size,
                           long long tags_code) except -1:
    if pos < 0 or pos + 20 > view.len:
        raise ValueError("consume queue entry out of range")
    if view.readonly:
        raise TypeError("consume queue entry into a read-only buffer")
    cdef uint8_t *p = <uint8_t *>view.buf + pos
    put64(p, offset)
    put32(p + 8, size)
    put64(p + 12, tags_code)
    return 0


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
