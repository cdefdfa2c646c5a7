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
from rmq._fast.crc32 cimport masked_crc32, rmq_crc32, rmq_crc32_path, rmq_crc32_set_path

# the names of crc32_fast.h's RMQ_CRC32_PATH_* values, by value
_PATHS = ("zlib", "clmul", "vpclmul")


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


def path():
    """The path this module takes for inputs long enough to fold: "vpclmul"
    (512-bit folding), "clmul" (128-bit folding) or "zlib"."""
    return _PATHS[rmq_crc32_path()]


def _force_path(name):
    """Make this module take path ``name`` ("zlib", "clmul", "vpclmul"), or
    the best one this CPU allows again for None, so that tests can check
    every path on one machine.  Other compiled modules keep their own
    choice.  ValueError for an unknown name or a path this CPU cannot run."""
    if name is not None and name not in _PATHS:
        raise ValueError(f"unknown CRC-32 path {name!r}; expected one of {', '.join(_PATHS)} or None")
    code = rmq_crc32_set_path(-1 if name is None else _PATHS.index(name))
    if code < 0:
        raise ValueError(f"this CPU cannot run the {name} CRC-32 path")
    return _PATHS[code]
