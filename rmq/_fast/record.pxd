# cython: language_level=3
# The commit-log record writer (STORE_FORMAT.md 2.2), shared by the store codec
# and the single-send fast path; inline, so neither pays a call.

from libc.stdint cimport int32_t, int64_t, uint8_t
from libc.string cimport memcpy

from rmq._fast.byteorder cimport masked_crc, put32, put64


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
