# cython: language_level=3
# The CRC-32 of crc32_fast.h for other compiled modules: rmq_crc32(crc, p, n)
# equals zlib's crc32(crc, p, n); masked_crc32 is BODYCRC as stored (top bit
# cleared).  cimport these instead of calling zlib's crc32 directly.

from libc.stdint cimport int32_t, uint32_t


cdef extern from "crc32_fast.h" nogil:
    uint32_t rmq_crc32(uint32_t crc, const unsigned char *p, size_t n)
    int rmq_crc32_path()
    int rmq_crc32_set_path(int path)


cdef inline int32_t masked_crc32(const unsigned char *p, size_t n) noexcept nogil:
    return <int32_t>(rmq_crc32(0, p, n) & 0x7FFFFFFF)
