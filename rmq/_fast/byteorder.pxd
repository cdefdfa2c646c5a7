# cython: language_level=3
# Big-endian field access and the masked CRC32 of stored records, shared by the
# compiled modules (store, remoting frames, client decoding).  Inline, so each
# caller gets them without a call; declared once here instead of in every module.

from libc.stdint cimport int16_t, int32_t, int64_t, uint8_t, uint32_t, uint64_t

from rmq._fast.crc32 cimport masked_crc32


cdef extern from *:
    """
    /* One unaligned access and one byte swap per field: gcc does not reliably
       merge byte-wise accesses of a 64-bit value built from two 32-bit halves. */
    static inline void rmq_put_be32(uint8_t *p, uint32_t v) {
        v = __builtin_bswap32(v);
        memcpy(p, &v, 4);
    }
    static inline void rmq_put_be64(uint8_t *p, uint64_t v) {
        v = __builtin_bswap64(v);
        memcpy(p, &v, 8);
    }
    static inline uint32_t rmq_get_be32(const uint8_t *p) {
        uint32_t v;
        memcpy(&v, p, 4);
        return __builtin_bswap32(v);
    }
    static inline uint64_t rmq_get_be64(const uint8_t *p) {
        uint64_t v;
        memcpy(&v, p, 8);
        return __builtin_bswap64(v);
    }
    """
    void rmq_put_be32(uint8_t *p, uint32_t v) noexcept nogil
    void rmq_put_be64(uint8_t *p, uint64_t v) noexcept nogil
    uint32_t rmq_get_be32(const uint8_t *p) noexcept nogil
    uint64_t rmq_get_be64(const uint8_t *p) noexcept nogil


cdef inline void put32(uint8_t *p, int32_t v) noexcept nogil:
    rmq_put_be32(p, <uint32_t>v)


cdef inline void put16(uint8_t *p, int32_t v) noexcept nogil:
    p[0] = <uint8_t>(v >> 8)
    p[1] = <uint8_t>v


cdef inline void put64(uint8_t *p, int64_t v) noexcept nogil:
    rmq_put_be64(p, <uint64_t>v)


cdef inline int32_t get32(const uint8_t *p) noexcept nogil:
    return <int32_t>rmq_get_be32(p)


cdef inline int64_t get64(const uint8_t *p) noexcept nogil:
    return <int64_t>rmq_get_be64(p)


cdef inline int16_t get16(const uint8_t *p) noexcept nogil:
    return <int16_t>((p[0] << 8) | p[1])


cdef inline int32_t masked_crc(const uint8_t *p, Py_ssize_t n) noexcept nogil:
    """BODYCRC as stored (STORE_FORMAT.md 2.7) by the carry-less-multiply CRC of
    crc32_fast.h (zlib-identical, several times faster on 1-4 KiB bodies)."""
    return masked_crc32(p, <size_t>n)
