# cython: language_level=3, boundscheck=False, wraparound=False
"""CRC-32 with carry-less multiply folding (crc32_fast.h), zlib-identical.

``crc32(data, value=0)`` is ``zlib.crc32``; ``body_crc(data)`` is the masked
BODYCRC of a stored record, the compiled twin of
``rmq.store.message_codec.body_crc``.  Other compiled modules cimport
``rmq_crc32`` / ``masked_crc32`` from crc32.pxd and call it without Python.
"""

from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE
from libc.stdint cimport uint32_t
from rmq._fast.crc32 cimport masked_crc32, rmq_crc32, rmq_crc32_uses_clmul


def crc32(data, unsigned int value=0):
    """zlib.crc32(data, value): the GIL is released from 64 KiB on."""
    cdef Py_buffer pb
    cdef uint32_t c = value
    PyObject_GetBuffer(data, &pb, PyBUF_SIMPLE)
    if pb.len >= 65536:
        with nogil:
            c = rmq_crc32(c, <const unsigned char *>pb.buf, <size_t>pb.len)
    else:
        c = rmq_crc32(c, <const unsigned char *>pb.buf, <size_t>pb.len)
    PyBuffer_Release(&pb)
    return c


def body_crc(data):
    """BODYCRC as stored: CRC-32 of the body with the top bit cleared.  A
    ``bytes`` body (what a request carries) is read in place: for a 1 KiB
    body the buffer request and release would be a fifth of the call."""
    if type(data) is bytes:
        return masked_crc32(<const unsigned char *>PyBytes_AS_STRING(data),
                            <size_t>PyBytes_GET_SIZE(data))
    cdef Py_buffer pb
    PyObject_GetBuffer(data, &pb, PyBUF_SIMPLE)
    cdef int c = masked_crc32(<const unsigned char *>pb.buf, <size_t>pb.len)
    PyBuffer_Release(&pb)
    return c


def uses_clmul():
    """True when this CPU takes the carry-less multiply path."""
    return rmq_crc32_uses_clmul() != 0
