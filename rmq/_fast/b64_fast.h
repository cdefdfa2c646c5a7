/*
 * Base64 encoding of long inputs with AVX2 (b64.pyx's _encode_into).
 *
 * A DLedger leader writes every entry's body in base64 into its pushes
 * (about 1.2 KiB an entry, 20 KiB a round at 16 sends in flight); the
 * scalar loop of b64.pyx takes about six instructions a byte for it.  Here
 * 24 input bytes become 32 characters per step: each 128-bit lane takes 12
 * bytes, a byte shuffle lays each group of three bytes (b0 b1 b2) out as the
 * little-endian word [b1 b0 b2 b1], so that the four 6-bit values sit in
 * the two 16-bit halves (b0:b1 holds the first two, b1:b2 the last two);
 * two masks and two 16-bit multiplies move each value to the low bits of
 * its own byte, and a 16-entry table of offsets per range (A-Z, a-z, 0-9,
 * '+', '/') turns the values into the alphabet's characters.
 *
 * rmq_b64_encode_bulk(src, n, dst) encodes whole steps while at least 28
 * input bytes remain (each step reads 16 bytes from the 12th on) and
 * returns how many input bytes it took (a multiple of 24); the caller
 * encodes the rest.  On a CPU or OS without AVX2 it takes nothing.
 * rmq_b64_set_path(0) keeps it off (the scalar loop alone, for tests that
 * compare both); rmq_b64_set_path(-1) goes back to the best path.
 */
#ifndef RMQ_B64_FAST_H
#define RMQ_B64_FAST_H

#include <stddef.h>
#include <stdint.h>

/* paths, in the order of preference (rmq_b64_path() / rmq_b64_set_path()) */
#define RMQ_B64_PATH_SCALAR 0
#define RMQ_B64_PATH_AVX2 1

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#include <immintrin.h>

#define RMQ_B64_TARGET_AVX2 __attribute__((target("avx2")))

/* 32 characters of 24 bytes: the low lane's 12 at ``lo``, the high lane's at ``hi`` */
RMQ_B64_TARGET_AVX2
static inline __m256i rmq_b64_step(__m128i lo, __m128i hi)
{
    /* per lane: groups at 0, 3, 6, 9, each as [b1 b0 b2 b1] */
    const __m256i spread = _mm256_setr_epi8(
        1, 0, 2, 1, 4, 3, 5, 4, 7, 6, 8, 7, 10, 9, 11, 10,
        1, 0, 2, 1, 4, 3, 5, 4, 7, 6, 8, 7, 10, 9, 11, 10);
    /* ASCII minus the value, by range: 0-25 (index 0), 26-51 (1), 52-61
     * (2-11), 62 (12), 63 (13) */
    const __m256i offsets = _mm256_setr_epi8(
        65, 71, -4, -4, -4, -4, -4, -4, -4, -4, -4, -4, -19, -16, 0, 0,
        65, 71, -4, -4, -4, -4, -4, -4, -4, -4, -4, -4, -19, -16, 0, 0);
    __m256i in = _mm256_shuffle_epi8(_mm256_inserti128_si256(_mm256_castsi128_si256(lo), hi, 1),
                                     spread);
    /* the 1st value (bits 15-10 of the low half) and the 3rd (bits 11-6 of
     * the high half) to bits 0-5 of bytes 0 and 2: the high 16 bits of a
     * 16-bit product by 2^6 and 2^10 */
    __m256i ac = _mm256_mulhi_epu16(_mm256_and_si256(in, _mm256_set1_epi32(0x0fc0fc00)),
                                    _mm256_set1_epi32(0x04000040));
    /* the 2nd (bits 9-4 of the low half) and the 4th (bits 5-0 of the high
     * half) to bits 0-5 of bytes 1 and 3: the low 16 bits of a product by
     * 2^4 and 2^8 */
    __m256i bd = _mm256_mullo_epi16(_mm256_and_si256(in, _mm256_set1_epi32(0x003f03f0)),
                                    _mm256_set1_epi32(0x01000010));
    __m256i v = _mm256_or_si256(ac, bd);
    /* the range's index: 52-63 -> 1-12 by a saturated subtract, then one
     * more for every value above 25 (0-25 -> 0, 26-51 -> 1, 52-63 -> 2-13) */
    __m256i at = _mm256_sub_epi8(_mm256_subs_epu8(v, _mm256_set1_epi8(51)),
                                 _mm256_cmpgt_epi8(v, _mm256_set1_epi8(25)));
    return _mm256_add_epi8(v, _mm256_shuffle_epi8(offsets, at));
}

RMQ_B64_TARGET_AVX2
static size_t rmq_b64_encode_avx2(const uint8_t *src, size_t n, char *dst)
{
    size_t done = 0;
    while (n - done >= 28) {
        __m128i lo = _mm_loadu_si128((const __m128i *)(src + done));
        __m128i hi = _mm_loadu_si128((const __m128i *)(src + done + 12));
        _mm256_storeu_si256((__m256i *)dst, rmq_b64_step(lo, hi));
        done += 24;
        dst += 32;
    }
    return done;
}

/* what the CPU and the OS allow: one of RMQ_B64_PATH_* */
static inline int rmq_b64_best_path(void)
{
    unsigned int eax, ebx, ecx, edx, xlo, xhi;

    if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx) || !(ecx & bit_OSXSAVE) || !(ecx & bit_AVX))
        return RMQ_B64_PATH_SCALAR;
    if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) || !(ebx & bit_AVX2))
        return RMQ_B64_PATH_SCALAR;
    /* XCR0: the SSE and AVX register halves saved by the OS */
    __asm__ volatile("xgetbv" : "=a"(xlo), "=d"(xhi) : "c"(0));
    (void)xhi;
    return (xlo & 0x6) == 0x6 ? RMQ_B64_PATH_AVX2 : RMQ_B64_PATH_SCALAR;
}

#else
static inline int rmq_b64_best_path(void) { return RMQ_B64_PATH_SCALAR; }

static size_t rmq_b64_encode_avx2(const uint8_t *src, size_t n, char *dst)
{
    (void)src; (void)n; (void)dst;
    return 0;
}
#endif

/* the path in use; -1 = not chosen yet */
static int rmq_b64_active = -1;

static inline int rmq_b64_path(void)
{
    int path = rmq_b64_active;
    if (path < 0)
        path = rmq_b64_active = rmq_b64_best_path();
    return path;
}

/*
 * Use ``path`` from now on (-1: the best one again).  Returns the path in
 * use, or -1 without changing anything when this CPU cannot run it.
 */
static inline int rmq_b64_set_path(int path)
{
    int best = rmq_b64_best_path();
    if (path > best)
        return -1;
    rmq_b64_active = path < 0 ? best : path;
    return rmq_b64_active;
}

/* the leading whole steps of ``src[:n]`` encoded at ``dst``: the bytes taken */
static inline size_t rmq_b64_encode_bulk(const uint8_t *src, size_t n, char *dst)
{
    if (n < 28 || rmq_b64_path() != RMQ_B64_PATH_AVX2)
        return 0;
    return rmq_b64_encode_avx2(src, n, dst);
}

#endif
