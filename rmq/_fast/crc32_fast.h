/*
 * CRC-32 (the zlib/gzip polynomial, bit-reflected) with carry-less multiply.
 *
 * rmq_crc32(crc, p, n) gives exactly zlib's crc32(crc, p, n).  On x86-64
 * CPUs with PCLMULQDQ and SSE4.1 (checked once at run time), blocks of 64
 * bytes are folded four lanes at a time with PCLMULQDQ, then reduced to 32
 * bits with a Barrett step (Gopal et al., "Fast CRC Computation for Generic
 * Polynomials Using PCLMULQDQ Instruction", Intel, 2009; the constants below
 * are x^k mod P for the folding distances of that paper, in the reflected
 * domain).  The tail shorter than 16 bytes, inputs shorter than 64 bytes and
 * other CPUs go to zlib, so results never depend on the path taken.
 *
 * Why: BODYCRC of every stored and every recovered record is a CRC-32 of the
 * body; zlib's table-driven loop manages ~3-5 GB/s here, the folding loop
 * several times that, which matters for 1-4 KiB bodies.
 */
#ifndef RMQ_CRC32_FAST_H
#define RMQ_CRC32_FAST_H

#include <stddef.h>
#include <stdint.h>
#include <zlib.h>

/* zlib takes an unsigned int length: feed it in pieces of at most 1 GiB */
static inline uint32_t rmq_crc32_zlib(uint32_t crc, const unsigned char *p, size_t n)
{
    unsigned long c = crc;
    while (n > 0x40000000u) {
        c = crc32(c, p, 0x40000000u);
        p += 0x40000000u;
        n -= 0x40000000u;
    }
    return (uint32_t)crc32(c, p, (unsigned int)n);
}

#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>

#define RMQ_CRC32_HAVE_CLMUL 1

/*
 * Fold n bytes (n >= 64, a multiple of 16) into the raw CRC register
 * ``state`` (no pre/post inversion here); returns the new register.
 */
__attribute__((target("pclmul,sse4.1")))
static uint32_t rmq_crc32_clmul_blocks(uint32_t state, const unsigned char *p, size_t n)
{
    /* folding multipliers: 4x128 bits apart, 128 bits apart, 64->32 bits; Barrett P' and mu */
    const __m128i k_by4 = _mm_set_epi64x(0x01c6e41596LL, 0x0154442bd4LL);
    const __m128i k_by1 = _mm_set_epi64x(0x00ccaa009eLL, 0x01751997d0LL);
    const __m128i k_64 = _mm_set_epi64x(0, 0x0163cd6124LL);
    const __m128i k_barrett = _mm_set_epi64x(0x01f7011641LL, 0x01db710641LL);
    const __m128i low32 = _mm_setr_epi32(-1, 0, -1, 0);
    __m128i a, b, c, d, t;

    a = _mm_xor_si128(_mm_loadu_si128((const __m128i *)p), _mm_cvtsi32_si128((int)state));
    b = _mm_loadu_si128((const __m128i *)(p + 16));
    c = _mm_loadu_si128((const __m128i *)(p + 32));
    d = _mm_loadu_si128((const __m128i *)(p + 48));
    p += 64;
    n -= 64;

    /* four independent lanes, each carried 512 bits forward per round */
    while (n >= 64) {
        __m128i a_lo = _mm_clmulepi64_si128(a, k_by4, 0x00);
        __m128i b_lo = _mm_clmulepi64_si128(b, k_by4, 0x00);
        __m128i c_lo = _mm_clmulepi64_si128(c, k_by4, 0x00);
        __m128i d_lo = _mm_clmulepi64_si128(d, k_by4, 0x00);
        a = _mm_clmulepi64_si128(a, k_by4, 0x11);
        b = _mm_clmulepi64_si128(b, k_by4, 0x11);
        c = _mm_clmulepi64_si128(c, k_by4, 0x11);
        d = _mm_clmulepi64_si128(d, k_by4, 0x11);
        a = _mm_xor_si128(_mm_xor_si128(a, a_lo), _mm_loadu_si128((const __m128i *)p));
        b = _mm_xor_si128(_mm_xor_si128(b, b_lo), _mm_loadu_si128((const __m128i *)(p + 16)));
        c = _mm_xor_si128(_mm_xor_si128(c, c_lo), _mm_loadu_si128((const __m128i *)(p + 32)));
        d = _mm_xor_si128(_mm_xor_si128(d, d_lo), _mm_loadu_si128((const __m128i *)(p + 48)));
        p += 64;
        n -= 64;
    }

    /* merge the lanes: carry a over b, the result over c, then over d */
    t = _mm_clmulepi64_si128(a, k_by1, 0x00);
    a = _mm_xor_si128(_mm_xor_si128(_mm_clmulepi64_si128(a, k_by1, 0x11), t), b);
    t = _mm_clmulepi64_si128(a, k_by1, 0x00);
    a = _mm_xor_si128(_mm_xor_si128(_mm_clmulepi64_si128(a, k_by1, 0x11), t), c);
    t = _mm_clmulepi64_si128(a, k_by1, 0x00);
    a = _mm_xor_si128(_mm_xor_si128(_mm_clmulepi64_si128(a, k_by1, 0x11), t), d);

    /* the remaining whole 16-byte blocks, one at a time */
    while (n >= 16) {
        t = _mm_clmulepi64_si128(a, k_by1, 0x00);
        a = _mm_xor_si128(_mm_xor_si128(_mm_clmulepi64_si128(a, k_by1, 0x11), t),
                          _mm_loadu_si128((const __m128i *)p));
        p += 16;
        n -= 16;
    }

    /* 128 -> 64 bits */
    t = _mm_clmulepi64_si128(a, k_by1, 0x10);
    a = _mm_xor_si128(_mm_srli_si128(a, 8), t);
    /* 64 -> 32 bits (plus 32 pending) */
    t = _mm_srli_si128(a, 4);
    a = _mm_xor_si128(_mm_clmulepi64_si128(_mm_and_si128(a, low32), k_64, 0x00), t);
    /* Barrett reduction to the 32-bit remainder */
    t = _mm_clmulepi64_si128(_mm_and_si128(a, low32), k_barrett, 0x10);
    t = _mm_clmulepi64_si128(_mm_and_si128(t, low32), k_barrett, 0x00);
    a = _mm_xor_si128(a, t);
    return (uint32_t)_mm_extract_epi32(a, 1);
}

/* 1 = use the folding loop, 0 = zlib only, -1 = not checked yet */
static int rmq_crc32_clmul_ok = -1;

static inline int rmq_crc32_check_cpu(void)
{
    int ok;
    __builtin_cpu_init();
    ok = __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.1");
    rmq_crc32_clmul_ok = ok;
    return ok;
}

static inline int rmq_crc32_uses_clmul(void)
{
    int ok = rmq_crc32_clmul_ok;
    return ok >= 0 ? ok : rmq_crc32_check_cpu();
}

#else
#define RMQ_CRC32_HAVE_CLMUL 0
static inline int rmq_crc32_uses_clmul(void) { return 0; }
#endif

/* zlib's crc32(crc, p, n) */
static inline uint32_t rmq_crc32(uint32_t crc, const unsigned char *p, size_t n)
{
#if RMQ_CRC32_HAVE_CLMUL
    if (n >= 64 && rmq_crc32_uses_clmul()) {
        size_t blocks = n & ~(size_t)15;
        crc = ~rmq_crc32_clmul_blocks(~crc, p, blocks);
        p += blocks;
        n -= blocks;
    }
#endif
    return n ? rmq_crc32_zlib(crc, p, n) : crc;
}

#endif /* RMQ_CRC32_FAST_H */
