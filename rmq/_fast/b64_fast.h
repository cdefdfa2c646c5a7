/*
 * Base64 encoding and decoding of long inputs with AVX2 (b64.pyx's
 * _encode_into and _decode).
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
 *
 * Each follower decodes every body it is pushed.  The decoder takes 32
 * characters a step: two nibble look-ups flag any byte outside the
 * alphabet (a step with one is left to the scalar loop, which refuses the
 * text as it always did), a third look-up by the high nibble ('/' set
 * apart) gives the offset from each character to its 6-bit value, two
 * multiply-adds merge four values into 24 bits per 32-bit word, and a byte
 * shuffle and a lane permute pack the 24 bytes.  rmq_b64_decode_bulk(src,
 * n, dst) decodes whole steps while at least 48 characters remain (each
 * step stores 32 bytes, 8 past its own, which the next step or the scalar
 * loop overwrites; the last group, which may hold padding, is never
 * taken) and returns how many characters it took (a multiple of 32).
 *
 * rmq_b64_set_path(0) keeps both off (the scalar loops alone, for tests
 * that compare both); rmq_b64_set_path(-1) goes back to the best path.
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

/* 24 bytes of 32 characters of the alphabet at ``dst`` (32 bytes stored);
 * 0 without storing anything when one of them is outside the alphabet */
RMQ_B64_TARGET_AVX2
static inline int rmq_b64_unstep(const uint8_t *src, uint8_t *dst)
{
    /* by low nibble and by high nibble, bit sets that share a bit only for
     * a byte outside A-Z a-z 0-9 + / (any byte from 0x80 has a high nibble
     * of 0x10 in every low nibble's set) */
    const __m256i lut_lo = _mm256_setr_epi8(
        0x15, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11,
        0x11, 0x11, 0x13, 0x1A, 0x1B, 0x1B, 0x1B, 0x1A,
        0x15, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11,
        0x11, 0x11, 0x13, 0x1A, 0x1B, 0x1B, 0x1B, 0x1A);
    const __m256i lut_hi = _mm256_setr_epi8(
        0x10, 0x10, 0x01, 0x02, 0x04, 0x08, 0x04, 0x08,
        0x10, 0x10, 0x10, 0x10, 0x10, 0x10, 0x10, 0x10,
        0x10, 0x10, 0x01, 0x02, 0x04, 0x08, 0x04, 0x08,
        0x10, 0x10, 0x10, 0x10, 0x10, 0x10, 0x10, 0x10);
    /* value minus character, by high nibble ('+' 2, digits 3, A-O 4, P-Z
     * 5, a-o 6, p-z 7), '/' at index 1 (its high nibble 2 less one) */
    const __m256i lut_roll = _mm256_setr_epi8(
        0, 16, 19, 4, -65, -65, -71, -71, 0, 0, 0, 0, 0, 0, 0, 0,
        0, 16, 19, 4, -65, -65, -71, -71, 0, 0, 0, 0, 0, 0, 0, 0);
    const __m256i mask_2f = _mm256_set1_epi8(0x2F);
    __m256i in = _mm256_loadu_si256((const __m256i *)src);
    /* a 32-bit shift leaves the next byte's low bits above the nibble:
     * the masks keep bit 5 too, which the byte shuffles ignore */
    __m256i hi_nibbles = _mm256_and_si256(_mm256_srli_epi32(in, 4), mask_2f);
    __m256i lo_nibbles = _mm256_and_si256(in, mask_2f);
    if (!_mm256_testz_si256(_mm256_shuffle_epi8(lut_lo, lo_nibbles),
                            _mm256_shuffle_epi8(lut_hi, hi_nibbles)))
        return 0;
    __m256i roll = _mm256_shuffle_epi8(
        lut_roll, _mm256_add_epi8(_mm256_cmpeq_epi8(in, mask_2f), hi_nibbles));
    __m256i v = _mm256_add_epi8(in, roll);
    /* [a b c d] 6-bit values per word: a*64+b and c*64+d per 16 bits,
     * then (a*64+b)*4096 + (c*64+d) per 32 bits */
    __m256i ab_cd = _mm256_maddubs_epi16(v, _mm256_set1_epi32(0x01400140));
    __m256i word = _mm256_madd_epi16(ab_cd, _mm256_set1_epi32(0x00011000));
    /* the three bytes of each word, most significant first, 12 a lane */
    word = _mm256_shuffle_epi8(word, _mm256_setr_epi8(
        2, 1, 0, 6, 5, 4, 10, 9, 8, 14, 13, 12, -1, -1, -1, -1,
        2, 1, 0, 6, 5, 4, 10, 9, 8, 14, 13, 12, -1, -1, -1, -1));
    word = _mm256_permutevar8x32_epi32(word, _mm256_setr_epi32(0, 1, 2, 4, 5, 6, 7, 7));
    _mm256_storeu_si256((__m256i *)dst, word);
    return 1;
}

RMQ_B64_TARGET_AVX2
static size_t rmq_b64_decode_avx2(const uint8_t *src, size_t n, uint8_t *dst)
{
    size_t done = 0;
    while (n - done >= 48 && rmq_b64_unstep(src + done, dst)) {
        done += 32;
        dst += 24;
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

static size_t rmq_b64_decode_avx2(const uint8_t *src, size_t n, uint8_t *dst)
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

/* the leading whole steps of the characters ``src[:n]`` decoded at ``dst``
 * (room for ``n / 4 * 3 - 2`` bytes): the characters taken */
static inline size_t rmq_b64_decode_bulk(const uint8_t *src, size_t n, uint8_t *dst)
{
    if (n < 48 || rmq_b64_path() != RMQ_B64_PATH_AVX2)
        return 0;
    return rmq_b64_decode_avx2(src, n, dst);
}

#endif
