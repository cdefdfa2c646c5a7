# cython: language_level=3
# Big-endian field access and the masked CRC32 of stored records, shared by the
# store's compiled modules.  Inline, so each caller gets them without a call;
# declared once here instead of in every module.

from libc.stdint cimport int16_t, int32_t, int64_t, uint8_t, uint32_t

from rmq._fast.crc32 cimport masked_crc32


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


cdef inline int16_t get16(const uint8_t *p) noexcept nogil:
    return <int16_t>((p[0] << 8) | p[1])


cdef inline int32_t masked_crc(const uint8_t *p, Py_ssize_t n) noexcept nogil:
    """BODYCRC as stored (STORE_FORMAT.md 2.7) by the carry-less-multiply CRC of
    crc32_fast.h (zlib-identical, several times faster on 1-4 KiB bodies)."""
    return masked_crc32(p, <size_t>n)
