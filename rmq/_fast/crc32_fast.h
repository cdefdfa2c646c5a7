/*
 * CRC-32 (the zlib/gzip polynomial, bit-reflected) with carry-less multiply.
 *
 * rmq_crc32(crc, p, n) gives exactly zlib's crc32(crc, p, n), whichever of
 * three paths runs; the path is chosen once per process (per extension
 * module: each one including this header has its own copy of the choice):
 *
 *   vpclmul  x86-64 with AVX-512F/VL and VPCLMULQDQ, and an OS that saves the
 *            ZMM registers (cpuid + xgetbv): inputs of RMQ_CRC32_ZMM_MIN
 *            (64) bytes or more are folded 512 bits at a time, 4 x 512 bits
 *            per round from 256 bytes on, then handed to the 128-bit
 *            folding below for the last blocks and the reduction;
 *   clmul    x86-64 with PCLMULQDQ and SSE4.1: 4 x 128 bits per round, then
 *            one 16-byte block at a time, the last partial block, and a
 *            Barrett reduction to 32 bits; 4 to 15 bytes as one block;
 *   zlib     every other CPU, and inputs shorter than 4 bytes on all paths.
 *
 * Why: BODYCRC of every stored and every recovered record is a CRC-32 of the
 * body.  Measured on a Sapphire Rapids core: zlib ~3.5 GB/s (and ~2 ns a
 * byte below 16 bytes), the 128-bit folding ~30 GB/s for 1 KiB, the 512-bit
 * folding ~60 GB/s for 1 KiB and ~100 GB/s for 4 KiB.
 *
 * Where the constants come from (the method of Gopal et al., "Fast CRC
 * Computation for Generic Polynomials Using PCLMULQDQ Instruction", Intel,
 * 2009).  P = 0x104C11DB7.  In the reflected domain the low quadword of a
 * 128-bit lane holds the earlier (higher-degree) 64 message bits.  Carrying a
 * lane D bits further along the message multiplies it by x^D mod P; split
 * into its quadwords that is
 *     low qword  * (x^(D+32) mod P)   and   high qword * (x^(D-32) mod P),
 * each remainder written bit-reversed over 32 bits and shifted left by one
 * (the reflected product of PCLMULQDQ comes out one bit low).  The two
 * products are at most 96 bits wide and are XORed onto the lane D bits
 * further on.  Distances used: 2048 (four ZMM registers per round), 1536,
 * 1024 and 512 (merging the four ZMM registers into one; 512 is also the
 * four-XMM round), 384, 256 and 128 (merging the four lanes of one ZMM into
 * an XMM; 128 is also the one-block step and the partial last block), then
 * x^64 for 64 -> 32 bits, and for the Barrett step P itself (reflected,
 * 0x1DB710641) and mu = floor(x^64 / P) (reflected, 0x1F7011641).  The
 * figures can be re-derived with a few lines of Python: reduce x^e mod P
 * bit by bit, reverse the 32-bit remainder, shift left by one.
 */
#ifndef RMQ_CRC32_FAST_H
#define RMQ_CRC32_FAST_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <zlib.h>

/* paths, in the order of preference (rmq_crc32_path() / rmq_crc32_set_path()) */
#define RMQ_CRC32_PATH_ZLIB 0
#define RMQ_CRC32_PATH_CLMUL 1
#define RMQ_CRC32_PATH_VPCLMUL 2

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

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#include <immintrin.h>

#define RMQ_CRC32_HAVE_CLMUL 1
#define RMQ_CRC32_TARGET_CLMUL __attribute__((target("pclmul,sse4.1")))
#define RMQ_CRC32_TARGET_ZMM __attribute__((target("avx512f,avx512vl,vpclmulqdq,pclmul,sse4.1")))

/*
 * From here on the ZMM path: a single ZMM register and its lane merge were
 * measured ~10% quicker than the four XMM lanes already at 64-255 bytes, and
 * the four ZMM registers from 256 bytes on take 1 KiB in half the time.
 */
#ifndef RMQ_CRC32_ZMM_MIN
#define RMQ_CRC32_ZMM_MIN 64
#endif

/* the folding constants of the comment above: (x^(D+32), x^(D-32)) for distance D */
#define RMQ_K_2048 0x011542778aULL, 0x01322d1430ULL
#define RMQ_K_1536 0x01821d8bc0ULL, 0x012e958ac4ULL
#define RMQ_K_1024 0x01e88ef372ULL, 0x014a7fe880ULL
#define RMQ_K_512 0x0154442bd4ULL, 0x01c6e41596ULL
#define RMQ_K_384 0x003db1ecdcULL, 0x0174359406ULL
#define RMQ_K_256 0x00f1da05aaULL, 0x015a546366ULL
#define RMQ_K_128 0x01751997d0ULL, 0x00ccaa009eULL
#define RMQ_K_64 0x0163cd6124ULL
#define RMQ_K_BARRETT 0x01db710641ULL, 0x01f7011641ULL

/* an XMM of (low qword, high qword) */
RMQ_CRC32_TARGET_CLMUL
static inline __m128i rmq_crc32_xmm_pair(uint64_t lo, uint64_t hi)
{
    return _mm_set_epi64x((long long)hi, (long long)lo);
}

/* carry ``a`` by the distance of the constants ``k`` and add ``next`` */
RMQ_CRC32_TARGET_CLMUL
static inline __m128i rmq_crc32_fold16(__m128i a, __m128i k, __m128i next)
{
    __m128i lo = _mm_clmulepi64_si128(a, k, 0x00);
    __m128i hi = _mm_clmulepi64_si128(a, k, 0x11);
    return _mm_xor_si128(_mm_xor_si128(lo, hi), next);
}

/*
 * Shuffle controls for a last block of r bytes (1..15), loaded from offset r:
 * byte i is 0x80 | (i + r) while i + r < 16, else i + r - 16.  Used as is it
 * moves the first r bytes of a register to its top (the rest zero); XORed
 * with 0x80 it moves the other 16 - r bytes to the bottom and, as a blend
 * mask, selects the new bytes above them.
 */
static const unsigned char rmq_crc32_shift_tab[32] = {
    0x80, 0x81, 0x82, 0x83, 0x84, 0x85, 0x86, 0x87,
    0x88, 0x89, 0x8a, 0x8b, 0x8c, 0x8d, 0x8e, 0x8f,
    0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07,
    0x08, 0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x0e, 0x0f,
};

/*
 * The end of every folding path: ``a`` holds the 128 pending bits, ``p`` the
 * n (< 64) bytes still to come, of which at least 16 precede ``p`` in the
 * same buffer.  Folds the whole blocks, then the partial one (as if the
 * message were 16 - r zero bits longer at its start, which changes nothing),
 * and reduces to the 32-bit register.
 */
RMQ_CRC32_TARGET_CLMUL
static inline uint32_t rmq_crc32_finish(__m128i a, const unsigned char *p, size_t n)
{
    const __m128i k128 = rmq_crc32_xmm_pair(RMQ_K_128);
    const __m128i k64 = _mm_set_epi64x(0, (long long)RMQ_K_64);
    const __m128i kb = rmq_crc32_xmm_pair(RMQ_K_BARRETT);
    const __m128i low32 = _mm_setr_epi32(-1, 0, -1, 0);
    __m128i t;

    while (n >= 16) {
        a = rmq_crc32_fold16(a, k128, _mm_loadu_si128((const __m128i *)p));
        p += 16;
        n -= 16;
    }
    if (n) {
        __m128i ctl = _mm_loadu_si128((const __m128i *)(rmq_crc32_shift_tab + n));
        __m128i ctl_rest = _mm_xor_si128(ctl, _mm_set1_epi8((char)0x80));
        __m128i last = _mm_loadu_si128((const __m128i *)(p + n - 16));
        __m128i head = _mm_shuffle_epi8(a, ctl);
        __m128i rest = _mm_blendv_epi8(_mm_shuffle_epi8(a, ctl_rest), last, ctl_rest);
        a = rmq_crc32_fold16(head, k128, rest);
    }

    /* 128 -> 64 bits */
    t = _mm_clmulepi64_si128(a, k128, 0x10);
    a = _mm_xor_si128(_mm_srli_si128(a, 8), t);
    /* 64 -> 32 bits (plus 32 pending) */
    t = _mm_srli_si128(a, 4);
    a = _mm_xor_si128(_mm_clmulepi64_si128(_mm_and_si128(a, low32), k64, 0x00), t);
    /* Barrett reduction to the 32-bit remainder */
    t = _mm_clmulepi64_si128(_mm_and_si128(a, low32), kb, 0x10);
    t = _mm_clmulepi64_si128(_mm_and_si128(t, low32), kb, 0x00);
    a = _mm_xor_si128(a, t);
    return (uint32_t)_mm_extract_epi32(a, 1);
}

/*
 * Raw CRC register ``state`` over 4 <= n < 16 bytes, which zlib takes ~2 ns
 * per byte for: the bytes, their first four plus the register, become the
 * end of a 16-byte block whose leading zero bytes change nothing, read with
 * two overlapping loads (never outside the n bytes) and reduced at once.
 */
RMQ_CRC32_TARGET_CLMUL
static uint32_t rmq_crc32_clmul_short(uint32_t state, const unsigned char *p, size_t n)
{
    unsigned __int128 m;
    if (n >= 8) {
        uint64_t first, last;
        memcpy(&first, p, 8);
        memcpy(&last, p + n - 8, 8);
        /* bytes 8..n-1 are the top n-8 bytes of ``last`` (two shifts: n = 8 drops all) */
        m = first | ((unsigned __int128)((last >> (8 * (15 - n))) >> 8) << 64);
    } else {
        uint32_t first, last;
        memcpy(&first, p, 4);
        memcpy(&last, p + n - 4, 4);
        m = first | ((uint64_t)((last >> (8 * (7 - n))) >> 8) << 32);
    }
    m ^= state;
    m <<= 8 * (16 - n);
    return rmq_crc32_finish(_mm_set_epi64x((long long)(uint64_t)(m >> 64), (long long)(uint64_t)m), p, 0);
}

/*
 * Raw CRC register ``state`` (no pre/post inversion) over n >= 16 bytes with
 * 128-bit folding: four lanes 512 bits apart while 64 bytes remain.
 */
RMQ_CRC32_TARGET_CLMUL
static uint32_t rmq_crc32_clmul(uint32_t state, const unsigned char *p, size_t n)
{
    const __m128i k128 = rmq_crc32_xmm_pair(RMQ_K_128);
    __m128i a = _mm_xor_si128(_mm_loadu_si128((const __m128i *)p), _mm_cvtsi32_si128((int)state));

    if (n >= 64) {
        const __m128i k512 = rmq_crc32_xmm_pair(RMQ_K_512);
        __m128i b = _mm_loadu_si128((const __m128i *)(p + 16));
        __m128i c = _mm_loadu_si128((const __m128i *)(p + 32));
        __m128i d = _mm_loadu_si128((const __m128i *)(p + 48));
        p += 64;
        n -= 64;
        while (n >= 64) {
            a = rmq_crc32_fold16(a, k512, _mm_loadu_si128((const __m128i *)p));
            b = rmq_crc32_fold16(b, k512, _mm_loadu_si128((const __m128i *)(p + 16)));
            c = rmq_crc32_fold16(c, k512, _mm_loadu_si128((const __m128i *)(p + 32)));
            d = rmq_crc32_fold16(d, k512, _mm_loadu_si128((const __m128i *)(p + 48)));
            p += 64;
            n -= 64;
        }
        /* merge the lanes: carry a over b, the result over c, then over d */
        a = rmq_crc32_fold16(a, k128, b);
        a = rmq_crc32_fold16(a, k128, c);
        a = rmq_crc32_fold16(a, k128, d);
    } else {
        p += 16;
        n -= 16;
    }
    return rmq_crc32_finish(a, p, n);
}

/* a ZMM with the same (low, high) constant pair in all four lanes */
RMQ_CRC32_TARGET_ZMM
static inline __m512i rmq_crc32_zmm_pair(uint64_t lo, uint64_t hi)
{
    return _mm512_broadcast_i32x4(_mm_set_epi64x((long long)hi, (long long)lo));
}

/* a ZMM of three constant pairs for its lower lanes, zero in the top lane */
RMQ_CRC32_TARGET_ZMM
static inline __m512i rmq_crc32_zmm_lanes(uint64_t lo0, uint64_t hi0, uint64_t lo1, uint64_t hi1,
                                          uint64_t lo2, uint64_t hi2)
{
    return _mm512_setr_epi64((long long)lo0, (long long)hi0, (long long)lo1, (long long)hi1,
                             (long long)lo2, (long long)hi2, 0, 0);
}

/* every 128-bit lane of ``z`` carried by the distance of ``k``, plus ``next`` */
RMQ_CRC32_TARGET_ZMM
static inline __m512i rmq_crc32_fold64(__m512i z, __m512i k, __m512i next)
{
    __m512i lo = _mm512_clmulepi64_epi128(z, k, 0x00);
    __m512i hi = _mm512_clmulepi64_epi128(z, k, 0x11);
    return _mm512_ternarylogic_epi64(lo, hi, next, 0x96); /* lo ^ hi ^ next */
}

/*
 * Raw CRC register ``state`` over n >= 64 bytes.  From 256 bytes on, four
 * ZMM registers (256 bytes) are carried 2048 bits per round and merged into
 * one; then one more ZMM per 64 bytes; its four lanes are merged into one
 * XMM and the rest goes as on the 128-bit path.
 */
RMQ_CRC32_TARGET_ZMM
static uint32_t rmq_crc32_vpclmul(uint32_t state, const unsigned char *p, size_t n)
{
    const __m512i k512 = rmq_crc32_zmm_pair(RMQ_K_512);
    __m512i k, z = _mm512_xor_si512(_mm512_loadu_si512((const void *)p),
                                    _mm512_zextsi128_si512(_mm_cvtsi32_si128((int)state)));
    __m128i a;

    if (n >= 256) {
        const __m512i k2048 = rmq_crc32_zmm_pair(RMQ_K_2048);
        __m512i z1 = _mm512_loadu_si512((const void *)(p + 64));
        __m512i z2 = _mm512_loadu_si512((const void *)(p + 128));
        __m512i z3 = _mm512_loadu_si512((const void *)(p + 192));
        p += 256;
        n -= 256;
        while (n >= 256) {
            z = rmq_crc32_fold64(z, k2048, _mm512_loadu_si512((const void *)p));
            z1 = rmq_crc32_fold64(z1, k2048, _mm512_loadu_si512((const void *)(p + 64)));
            z2 = rmq_crc32_fold64(z2, k2048, _mm512_loadu_si512((const void *)(p + 128)));
            z3 = rmq_crc32_fold64(z3, k2048, _mm512_loadu_si512((const void *)(p + 192)));
            p += 256;
            n -= 256;
        }
        /* the four registers onto the last one, each by its own distance */
        z = rmq_crc32_fold64(z, rmq_crc32_zmm_pair(RMQ_K_1536), z3);
        k = rmq_crc32_zmm_pair(RMQ_K_1024);
        z = _mm512_ternarylogic_epi64(z, _mm512_clmulepi64_epi128(z1, k, 0x00),
                                      _mm512_clmulepi64_epi128(z1, k, 0x11), 0x96);
        z = rmq_crc32_fold64(z2, k512, z);
    } else {
        p += 64;
        n -= 64;
    }

    while (n >= 64) {
        z = rmq_crc32_fold64(z, k512, _mm512_loadu_si512((const void *)p));
        p += 64;
        n -= 64;
    }

    /* four lanes onto the last: by 384, 256 and 128 bits (the top lane stays) */
    k = rmq_crc32_zmm_lanes(RMQ_K_384, RMQ_K_256, RMQ_K_128);
    k = _mm512_ternarylogic_epi64(_mm512_clmulepi64_epi128(z, k, 0x00), _mm512_clmulepi64_epi128(z, k, 0x11),
                                  _mm512_maskz_mov_epi64(0xc0, z), 0x96);
    {
        __m256i y = _mm256_xor_si256(_mm512_castsi512_si256(k), _mm512_extracti64x4_epi64(k, 1));
        a = _mm_xor_si128(_mm256_castsi256_si128(y), _mm256_extracti128_si256(y, 1));
    }
    return rmq_crc32_finish(a, p, n);
}

/* what the CPU and the OS allow: one of RMQ_CRC32_PATH_* */
static inline int rmq_crc32_best_path(void)
{
    unsigned int eax, ebx, ecx, edx, xlo, xhi;
    int clmul, zmm;

    if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx))
        return RMQ_CRC32_PATH_ZLIB;
    clmul = (ecx & bit_PCLMUL) && (ecx & bit_SSE4_1);
    if (!clmul)
        return RMQ_CRC32_PATH_ZLIB;
    if (!(ecx & bit_OSXSAVE) || !__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx))
        return RMQ_CRC32_PATH_CLMUL;
    zmm = (ebx & bit_AVX512F) && (ebx & bit_AVX512VL) && (ecx & bit_VPCLMULQDQ);
    if (!zmm)
        return RMQ_CRC32_PATH_CLMUL;
    /* XCR0: SSE, AVX, opmask, upper halves of ZMM0-15 and ZMM16-31 all saved */
    __asm__ volatile("xgetbv" : "=a"(xlo), "=d"(xhi) : "c"(0));
    (void)xhi;
    return (xlo & 0xe6) == 0xe6 ? RMQ_CRC32_PATH_VPCLMUL : RMQ_CRC32_PATH_CLMUL;
}

/* the path in use; -1 = not chosen yet */
static int rmq_crc32_active = -1;

static inline int rmq_crc32_path(void)
{
    int path = rmq_crc32_active;
    if (path < 0)
        path = rmq_crc32_active = rmq_crc32_best_path();
    return path;
}

/*
 * Use ``path`` from now on (-1: the best one again).  Returns the path in
 * use, or -1 without changing anything when this CPU cannot run it.
 */
static inline int rmq_crc32_set_path(int path)
{
    int best = rmq_crc32_best_path();
    if (path > best)
        return -1;
    rmq_crc32_active = path < 0 ? best : path;
    return rmq_crc32_active;
}

/* zlib's crc32(crc, p, n) */
static inline uint32_t rmq_crc32(uint32_t crc, const unsigned char *p, size_t n)
{
    if (n >= 4) {
        int path = rmq_crc32_path();
        if (path == RMQ_CRC32_PATH_VPCLMUL && n >= RMQ_CRC32_ZMM_MIN)
            return ~rmq_crc32_vpclmul(~crc, p, n);
        if (path != RMQ_CRC32_PATH_ZLIB)
            return n >= 16 ? ~rmq_crc32_clmul(~crc, p, n) : ~rmq_crc32_clmul_short(~crc, p, n);
    }
    return rmq_crc32_zlib(crc, p, n);
}

#else
static inline int rmq_crc32_path(void) { return RMQ_CRC32_PATH_ZLIB; }

static inline int rmq_crc32_set_path(int path)
{
    if (path > RMQ_CRC32_PATH_ZLIB)
        return -1;
    return RMQ_CRC32_PATH_ZLIB;
}

/* zlib's crc32(crc, p, n) */
static inline uint32_t rmq_crc32(uint32_t crc, const unsigned char *p, size_t n)
{
    return rmq_crc32_zlib(crc, p, n);
}
#endif

#endif /* RMQ_CRC32_FAST_H */
