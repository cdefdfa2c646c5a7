# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Compiled twin of ``append_single`` in rmq/store/single_put.py.

One call writes a single send's commit-log record (STORE_FORMAT.md 2), its
consume-queue entry (STORE_FORMAT.md 5) and returns the offset message id:
the three steps the general put makes through three Python-level calls and
two result objects.  Every size is checked against the limits and both
buffers before the first byte is written; ``None`` means "nothing written,
take the general path".
"""

from cpython.buffer cimport PyBUF_SIMPLE, PyBUF_WRITABLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE
from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t, uint64_t
from rmq._fast.byteorder cimport put32, put64
from rmq._fast.record cimport c_write_record
from libc.string cimport memcpy


cdef extern from "Python.h":
    object PyUnicode_New(Py_ssize_t size, Py_UCS4 maxchar)
    void *PyUnicode_DATA(object o)
    int PyUnicode_IS_ASCII(object o)
    Py_ssize_t PyUnicode_GET_LENGTH(object o)

cdef const char *HEX = b"0123456789ABCDEF"


cdef str msg_id(str host_hex, int64_t phy):
    """host hex + the offset as 16 upper-case hex digits (two's complement)."""
    cdef Py_ssize_t hl = PyUnicode_GET_LENGTH(host_hex)
    out = PyUnicode_New(hl + 16, 127)
    cdef char *o = <char *>PyUnicode_DATA(out)
    memcpy(o, PyUnicode_DATA(host_hex), hl)
    cdef uint64_t u = <uint64_t>phy
    cdef int i
    for i in range(16):
        o[hl + 15 - i] = HEX[u & 0xF]
        u >>= 4
    return out


def append_single(object buf, Py_ssize_t pos, Py_ssize_t limit, Py_ssize_t max_body,
                  int queue_id, int flag, long long queue_offset, long long phy, int sys_flag,
                  long long born_ts, bytes born_host, long long store_ts, bytes store_host,
                  int reconsume, object body, bytes topic, str props, object cq_buf,
                  Py_ssize_t cq_pos, long long tags_code, str host_hex):
    """(record size, offset message id), or None when the record is too big,
    does not end by ``limit`` or a field is too long (nothing written)."""
    if not PyUnicode_IS_ASCII(host_hex):
        raise ValueError("host hex must be ASCII")
    cdef bytes props_b = None
    cdef const uint8_t *pp
    cdef Py_ssize_t plen
    if PyUnicode_IS_ASCII(props):
        pp = <const uint8_t *>PyUnicode_DATA(props)
        plen = PyUnicode_GET_LENGTH(props)
    else:
        props_b = props.encode("utf-8")
        pp = <const uint8_t *>PyBytes_AS_STRING(props_b)
        plen = PyBytes_GET_SIZE(props_b)
    cdef Py_ssize_t tlen = PyBytes_GET_SIZE(topic)
    cdef Py_ssize_t blen = PyBytes_GET_SIZE(born_host)
    cdef Py_ssize_t slen = PyBytes_GET_SIZE(store_host)
    if blen != (20 if sys_flag & 0x10 else 8) or slen != (20 if sys_flag & 0x20 else 8):
        raise ValueError("host field length does not match the sysFlag")
    if tlen > 127 or plen > 32767:
        return None
    cdef Py_buffer bv, ov, cv
    cdef const uint8_t *bp
    cdef const uint8_t *sp
    cdef const uint8_t *tp
    PyObject_GetBuffer(body, &bv, PyBUF_SIMPLE)
    cdef Py_ssize_t size = (4 + 4 + 4 + 4 + 4 + 8 + 8 + 4 + 8 + blen + 8 + slen + 4 + 8 + 4
                            + bv.len + 1 + tlen + 2 + plen)
    try:
        if bv.len > max_body or size > max_body + 65536 or pos < 0 or pos + size > limit:
            return None
        PyObject_GetBuffer(buf, &ov, PyBUF_WRITABLE)
        try:
            PyObject_GetBuffer(cq_buf, &cv, PyBUF_WRITABLE)
            try:
                if pos + size > ov.len or cq_pos < 0 or cq_pos + 20 > cv.len:
                    raise ValueError("record or consume queue entry out of range")
                bp = <const uint8_t *>PyBytes_AS_STRING(born_host)
                sp = <const uint8_t *>PyBytes_AS_STRING(store_host)
                tp = <const uint8_t *>PyBytes_AS_STRING(topic)
                with nogil:
                    c_write_record(<uint8_t *>ov.buf + pos, queue_id, flag, queue_offset, phy,
                                   sys_flag, born_ts, bp, blen, store_ts, sp, slen, reconsume,
                                   0, <const uint8_t *>bv.buf, bv.len, tp, tlen, pp, plen)
                    put64(<uint8_t *>cv.buf + cq_pos, phy)
                    put32(<uint8_t *>cv.buf + cq_pos + 8, <int32_t>size)
                    put64(<uint8_t *>cv.buf + cq_pos + 12, tags_code)
            finally:
                PyBuffer_Release(&cv)
        finally:
            PyBuffer_Release(&ov)
    finally:
        PyBuffer_Release(&bv)
    return size, msg_id(host_hex, phy)
