# cython: language_level=3
# Byte-level JSON pieces for the remoting header codec: string scanning and
# escaping eight bytes at a time, escape decoding, UTF-8 validation, number
# and value skipping.  Pure C (no Python objects, nogil), inline, so the codec
# keeps only the object building.  Everything here is strict RFC 8259 / 3629;
# whatever it cannot vouch for it reports as "not handled" and the codec asks
# orjson instead, so accepting here never means accepting more than orjson.

from libc.stdint cimport int64_t, uint8_t, uint32_t, uint64_t
from libc.string cimport memcmp, memcpy

cdef enum:
    JV_FAIL = -1     # not handled here (bad JSON, or a form left to orjson)
    JV_STR = 1
    JV_INT = 2
    JV_TRUE = 3
    JV_FALSE = 4
    JV_NULL = 5
    JV_OTHER = 6     # a valid float, array or object (only from json_skip_value)

cdef enum:
    JSON_MAX_DEPTH = 64      # deeper unknown values are left to orjson
    JSON_MAX_INT_DIGITS = 18


cdef struct JStr:
    const uint8_t* s     # first byte after the opening quote
    Py_ssize_t n         # raw bytes up to the closing quote
    bint esc             # holds backslash escapes
    bint wide            # may hold raw bytes >= 0x80


cdef struct JIndex:
    # where the quotes, backslashes and control bytes of a JSON text are:
    # bit i of bm[i >> 6] for byte i, found for the whole text in one pass,
    # so scanning a string is a bit search instead of a byte search
    const uint8_t* base
    const uint64_t* bm
    bint wide            # the text has a byte >= 0x80 somewhere


cdef extern from *:
    """
    #include <stdint.h>
    #include <string.h>
    /* eight bytes as a word with the first byte lowest, whatever the host order */
    static inline uint64_t rmq_json_load8(const uint8_t *p) {
        uint64_t w;
        memcpy(&w, p, 8);
    #if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
        w = __builtin_bswap64(w);
    #endif
        return w;
    }
    /* the inverse of rmq_json_load8 */
    static inline void rmq_json_store8(uint8_t *p, uint64_t w) {
    #if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
        w = __builtin_bswap64(w);
    #endif
        memcpy(p, &w, 8);
    }
    /* fewer than eight bytes as the low bytes of a word (byte loads: a short
       memcpy into a word stalls the load that follows it) */
    static inline uint64_t rmq_json_load_short(const uint8_t *p, Py_ssize_t n) {
        uint64_t w = 0;
        int at = 0;
        if (n & 4) {
            uint32_t v;
            memcpy(&v, p, 4);
    #if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
            v = __builtin_bswap32(v);
    #endif
            w = v;
            at = 4;
        }
        if (n & 2) {
            w |= ((uint64_t)p[at] | ((uint64_t)p[at + 1] << 8)) << (8 * at);
            at += 2;
        }
        if (n & 1) w |= (uint64_t)p[at] << (8 * at);
        return w;
    }
    /* Bit j set for each of the sixteen bytes at p that is '"', '\\' or a
       control byte; *wide set when one of them is >= 0x80.  SSE2 where the
       compiler has it (every x86-64), else byte by byte. */
    #if defined(__SSE2__)
    #include <emmintrin.h>
    static inline uint64_t rmq_json_mask16(const uint8_t *p, int *wide) {
        __m128i x = _mm_loadu_si128((const __m128i *)p);
        __m128i quote = _mm_cmpeq_epi8(x, _mm_set1_epi8(0x22));
        __m128i bslash = _mm_cmpeq_epi8(x, _mm_set1_epi8(0x5C));
        __m128i ctrl = _mm_cmpeq_epi8(_mm_max_epu8(x, _mm_set1_epi8(0x1F)), _mm_set1_epi8(0x1F));
        *wide |= _mm_movemask_epi8(x);
        return (uint64_t)(unsigned)_mm_movemask_epi8(_mm_or_si128(_mm_or_si128(quote, bslash), ctrl));
    }
    #else
    static inline uint64_t rmq_json_mask16(const uint8_t *p, int *wide) {
        uint64_t m = 0;
        for (int j = 0; j < 16; j++) {
            uint8_t c = p[j];
            if (c == 0x22 || c == 0x5C || c < 0x20) m |= (uint64_t)1 << j;
            *wide |= c >= 0x80;
        }
        return m;
    }
    #endif
    static inline int rmq_json_ctz64(uint64_t m) { return __builtin_ctzll(m); }
    /* index of the first byte flagged in a non-zero mask of high bits */
    static inline int rmq_json_first(uint64_t m) { return __builtin_ctzll(m) >> 3; }
    /* Whether 32 bytes from p lie in p's memory page: reading them cannot
       fault even where they run past the object p points into (pages are
       mapped whole). */
    static inline int rmq_json_page_has32(const uint8_t *p) {
        return ((uintptr_t)p & 4095) <= 4096 - 32;
    }
    /* Whether none of the 1..32 bytes at p needs escaping, from sixteen-byte
       blocks (the caller vouches for the bytes past them: rmq_json_page_has32). */
    static inline int rmq_json_plain32(const uint8_t *p, Py_ssize_t n) {
        int wide = 0;
        uint64_t m = rmq_json_mask16(p, &wide);
        if (n > 16) m |= rmq_json_mask16(p + 16, &wide) << 16;
        return (m & (((uint64_t)1 << n) - 1)) == 0;
    }
    /* The decimal digits of u at o (room for 20 bytes), two at a time from
       a table, their number from the bit length (Bit Twiddling Hacks'
       base-10 logarithm). */
    static const char rmq_json_digits2[201] =
        "00010203040506070809101112131415161718192021222324"
        "25262728293031323334353637383940414243444546474849"
        "50515253545556575859606162636465666768697071727374"
        "75767778798081828384858687888990919293949596979899";
    static const uint64_t rmq_json_pow10[20] = {
        1ULL, 10ULL, 100ULL, 1000ULL, 10000ULL,
        100000ULL, 1000000ULL, 10000000ULL, 100000000ULL, 1000000000ULL,
        10000000000ULL, 100000000000ULL, 1000000000000ULL, 10000000000000ULL, 100000000000000ULL,
        1000000000000000ULL, 10000000000000000ULL, 100000000000000000ULL,
        1000000000000000000ULL, 10000000000000000000ULL};
    static inline uint8_t *rmq_json_write_u64(uint8_t *o, uint64_t u) {
        if (u < 10) {
            o[0] = (uint8_t)('0' + u);
            return o + 1;
        }
        int t = ((64 - __builtin_clzll(u)) * 1233) >> 12;
        int n = t - (u < rmq_json_pow10[t]) + 1;
        uint8_t *q = o + n;
        while (u >= 100) {
            unsigned r = (unsigned)(u % 100);
            u /= 100;
            q -= 2;
            memcpy(q, rmq_json_digits2 + 2 * r, 2);
        }
        if (u >= 10) memcpy(q - 2, rmq_json_digits2 + 2 * u, 2);
        else q[-1] = (uint8_t)('0' + u);
        return o + n;
    }
    """
    uint64_t json_load8 "rmq_json_load8"(const uint8_t* p) noexcept nogil
    void json_store8 "rmq_json_store8"(uint8_t* p, uint64_t w) noexcept nogil
    uint64_t json_load_short "rmq_json_load_short"(const uint8_t* p, Py_ssize_t n) noexcept nogil
    int json_first "rmq_json_first"(uint64_t m) noexcept nogil
    uint64_t json_mask16 "rmq_json_mask16"(const uint8_t* p, int* wide) noexcept nogil
    int json_ctz64 "rmq_json_ctz64"(uint64_t m) noexcept nogil
    bint json_page_has32 "rmq_json_page_has32"(const uint8_t* p) noexcept nogil
    bint json_plain32 "rmq_json_plain32"(const uint8_t* p, Py_ssize_t n) noexcept nogil
    uint8_t* json_write_u64 "rmq_json_write_u64"(uint8_t* o, uint64_t u) noexcept nogil


cdef enum:
    JSON_ONES = 0x0101010101010101
    JSON_HIGH = 0x8080808080808080


cdef inline uint64_t json_escape8(uint64_t x) noexcept nogil:
    """High bit set in the first byte of ``x`` that is '"', '\\' or below 0x20
    (bits above it may be spurious; zero exactly when there is none)."""
    cdef uint64_t ones = <uint64_t>JSON_ONES
    cdef uint64_t q = x ^ (ones * 0x22)
    cdef uint64_t b = x ^ (ones * 0x5C)
    return (((x - ones * 0x20) & ~x) | ((q - ones) & ~q) | ((b - ones) & ~b)) & <uint64_t>JSON_HIGH


cdef inline bint json_is_ws(uint8_t c) noexcept nogil:
    return c == 32 or c == 10 or c == 13 or c == 9


cdef inline const uint8_t* json_ws(const uint8_t* p, const uint8_t* end) noexcept nogil:
    while p < end and json_is_ws(p[0]):
        p += 1
    return p


cdef inline Py_ssize_t json_index_words(Py_ssize_t n) noexcept nogil:
    return (n + 63) >> 6


cdef inline bint json_index(const uint8_t* p, Py_ssize_t n, uint64_t* bm) noexcept nogil:
    """Fill ``bm`` (json_index_words(n) words) for ``p[:n]``; whether the text
    has a byte >= 0x80."""
    cdef Py_ssize_t i = 0, j, w = 0
    cdef int wide = 0
    cdef uint64_t m
    cdef uint8_t c
    while n - i >= 64:
        bm[w] = (json_mask16(p + i, &wide) | (json_mask16(p + i + 16, &wide) << 16)
                 | (json_mask16(p + i + 32, &wide) << 32) | (json_mask16(p + i + 48, &wide) << 48))
        i += 64
        w += 1
    if i < n:
        m = 0
        j = 0
        while n - i - j >= 16:
            m |= json_mask16(p + i + j, &wide) << j
            j += 16
        while i + j < n:
            c = p[i + j]
            if c == 34 or c == 92 or c < 0x20:
                m |= (<uint64_t>1) << j
            if c >= 0x80:
                wide = 1
            j += 1
        bm[w] = m
    return wide != 0


cdef inline const uint8_t* json_scan_string(const JIndex* ix, const uint8_t* p,
                                            const uint8_t* end, JStr* out) noexcept nogil:
    """``p`` at an opening quote: fill ``out`` and return the byte after the
    closing quote, or NULL (unterminated, raw control character).  Goes from
    one flagged byte of the index to the next."""
    cdef Py_ssize_t n = end - ix.base
    cdef Py_ssize_t i = (p + 1) - ix.base
    cdef Py_ssize_t w
    cdef uint64_t bits
    cdef uint8_t c
    out.s = p + 1
    out.esc = False
    out.wide = ix.wide
    while i < n:
        w = i >> 6
        bits = ix.bm[w] & (<uint64_t>0xFFFFFFFFFFFFFFFFULL << (i & 63))
        while bits == 0:
            w += 1
            if (w << 6) >= n:
                return NULL
            bits = ix.bm[w]
        i = (w << 6) + json_ctz64(bits)
        c = ix.base[i]
        if c == 34:
            out.n = (ix.base + i) - out.s
            return ix.base + i + 1
        if c != 92 or n - i < 2:
            return NULL
        out.esc = True
        i += 2
    return NULL


cdef inline bint json_ascii(const uint8_t* p, Py_ssize_t n) noexcept nogil:
    cdef Py_ssize_t i
    for i in range(n):
        if p[i] >= 0x80:
            return False
    return True


cdef inline int json_hex4(const uint8_t* p) noexcept nogil:
    cdef int v = 0, i, h
    for i in range(4):
        h = p[i]
        if 48 <= h <= 57:
            h -= 48
        elif 97 <= h <= 102:
            h -= 87
        elif 65 <= h <= 70:
            h -= 55
        else:
            return -1
        v = (v << 4) | h
    return v


cdef inline int json_escape_at(const uint8_t* s, const uint8_t* e, uint32_t* cp) noexcept nogil:
    """The escape sequence at ``s`` (a backslash): its code point in ``cp`` and
    the bytes it takes, or -1 (unknown escape, bad hex, lone surrogate)."""
    cdef int hi, lo
    if e - s < 2:
        return -1
    cdef uint8_t h = s[1]
    if h == 34 or h == 92 or h == 47:
        cp[0] = h
    elif h == 98:
        cp[0] = 8
    elif h == 102:
        cp[0] = 12
    elif h == 110:
        cp[0] = 10
    elif h == 114:
        cp[0] = 13
    elif h == 116:
        cp[0] = 9
    elif h == 117:
        if e - s < 6:
            return -1
        hi = json_hex4(s + 2)
        if hi < 0 or 0xDC00 <= hi <= 0xDFFF:
            return -1
        if hi < 0xD800 or hi > 0xDBFF:
            cp[0] = <uint32_t>hi
            return 6
        if e - s < 12 or s[6] != 92 or s[7] != 117:
            return -1
        lo = json_hex4(s + 8)
        if lo < 0xDC00 or lo > 0xDFFF:
            return -1
        cp[0] = 0x10000 + ((<uint32_t>(hi - 0xD800)) << 10) + <uint32_t>(lo - 0xDC00)
        return 12
    else:
        return -1
    return 2


cdef inline Py_ssize_t json_unescape(const uint8_t* s, Py_ssize_t n, uint8_t* o,
                                     bint* wide) noexcept nogil:
    """Decode the escapes of a scanned string into ``o`` (room for ``n``
    bytes: decoding never grows); the length written, or -1.  ``wide`` tells
    whether the result holds bytes >= 0x80."""
    cdef const uint8_t* e = s + n
    cdef uint8_t* o0 = o
    cdef uint32_t cp
    cdef int k
    cdef uint8_t c
    cdef uint8_t hi = 0
    cdef uint64_t w, m, seen = 0
    while s < e:
        if e - s >= 8:
            # copy up to the next backslash a word at a time (the output
            # never runs ahead of the input, so eight bytes always fit)
            w = json_load8(s)
            m = w ^ (<uint64_t>JSON_ONES * 0x5C)
            m = (m - <uint64_t>JSON_ONES) & ~m & <uint64_t>JSON_HIGH
            memcpy(o, s, 8)
            if m == 0:
                seen |= w
                o += 8
                s += 8
                continue
            k = json_first(m)
            seen |= w & ((<uint64_t>1 << (8 * k)) - 1)
            o += k
            s += k
        c = s[0]
        if c != 92:
            hi |= c
            o[0] = c
            o += 1
            s += 1
            continue
        k = json_escape_at(s, e, &cp)
        if k < 0:
            return -1
        s += k
        if cp < 0x80:
            o[0] = <uint8_t>cp
            o += 1
        elif cp < 0x800:
            o[0] = <uint8_t>(0xC0 | (cp >> 6))
            o[1] = <uint8_t>(0x80 | (cp & 0x3F))
            o += 2
            hi = 0x80
        elif cp < 0x10000:
            o[0] = <uint8_t>(0xE0 | (cp >> 12))
            o[1] = <uint8_t>(0x80 | ((cp >> 6) & 0x3F))
            o[2] = <uint8_t>(0x80 | (cp & 0x3F))
            o += 3
            hi = 0x80
        else:
            o[0] = <uint8_t>(0xF0 | (cp >> 18))
            o[1] = <uint8_t>(0x80 | ((cp >> 12) & 0x3F))
            o[2] = <uint8_t>(0x80 | ((cp >> 6) & 0x3F))
            o[3] = <uint8_t>(0x80 | (cp & 0x3F))
            o += 4
            hi = 0x80
    wide[0] = ((hi & 0x80) != 0) or (seen & <uint64_t>JSON_HIGH) != 0
    return o - o0


cdef inline bint json_utf8_valid(const uint8_t* p, Py_ssize_t n) noexcept nogil:
    """Well-formed UTF-8 (RFC 3629: no overlong forms, surrogates or code
    points past U+10FFFF), as orjson requires of every string."""
    cdef const uint8_t* e = p + n
    cdef uint8_t c, c1
    cdef int k, i
    while p < e:
        c = p[0]
        if c < 0x80:
            p += 1
            continue
        if 0xC2 <= c <= 0xDF:
            k = 1
        elif 0xE0 <= c <= 0xEF:
            k = 2
        elif 0xF0 <= c <= 0xF4:
            k = 3
        else:
            return False
        if e - p <= k:
            return False
        c1 = p[1]
        if ((c == 0xE0 and c1 < 0xA0) or (c == 0xED and c1 > 0x9F)
                or (c == 0xF0 and c1 < 0x90) or (c == 0xF4 and c1 > 0x8F)):
            return False
        for i in range(1, k + 1):
            if p[i] & 0xC0 != 0x80:
                return False
        p += k + 1
    return True


cdef inline bint header_utf8(const uint8_t* p, Py_ssize_t n, bint* wide) noexcept nogil:
    """A text of a ROCKETMQ binary header the general reader decodes
    (well-formed UTF-8), for the lanes that read such headers in place;
    ``wide`` says whether it holds bytes >= 0x80."""
    cdef Py_ssize_t i
    for i in range(n):
        if p[i] >= 0x80:
            wide[0] = True
            return json_utf8_valid(p, n)
    wide[0] = False
    return True


cdef inline bint json_string_valid(const JStr* s) noexcept nogil:
    """A scanned string orjson would accept (escapes and UTF-8)."""
    cdef const uint8_t* p = s.s
    cdef const uint8_t* e = s.s + s.n
    cdef uint32_t cp
    cdef int k
    if s.wide and not json_utf8_valid(s.s, s.n):
        return False
    if s.esc:
        while p < e:
            if p[0] != 92:
                p += 1
                continue
            k = json_escape_at(p, e, &cp)
            if k < 0:
                return False
            p += k
    return True


cdef inline const uint8_t* json_number(const uint8_t* p, const uint8_t* end, int* kind,
                                       int64_t* ival) noexcept nogil:
    """A JSON number at ``p``: JV_INT (at most 18 digits, not -0) with its
    value, JV_OTHER for a plain fraction, else JV_FAIL (exponents, longer
    integers and -0 are left to orjson, which may turn them into floats,
    infinities or errors).  Returns the byte after the number."""
    cdef bint neg = False
    cdef int digits = 0
    cdef int64_t v = 0
    kind[0] = JV_FAIL
    if p < end and p[0] == 45:
        neg = True
        p += 1
    if p < end and p[0] == 48:
        digits = 1
        p += 1
    else:
        while p < end and 48 <= p[0] <= 57:
            if digits == JSON_MAX_INT_DIGITS:
                return p
            v = v * 10 + (p[0] - 48)
            digits += 1
            p += 1
    if digits == 0:
        return p
    if p < end and (p[0] == 101 or p[0] == 69):
        return p
    if p < end and p[0] == 46:
        p += 1
        digits = 0
        while p < end and 48 <= p[0] <= 57:
            digits += 1
            p += 1
        if digits == 0 or (p < end and (p[0] == 101 or p[0] == 69)):
            return p
        kind[0] = JV_OTHER
        return p
    if neg and v == 0:
        return p
    ival[0] = -v if neg else v
    kind[0] = JV_INT
    return p


cdef inline bint json_int32(const uint8_t** p, const uint8_t* end, int64_t* out) noexcept nogil:
    """Step ``p`` over an integer in JSON's form (no leading zeros, not -0)
    within int32, its value in ``out``; False (``p`` where it was) for
    anything else."""
    cdef int kind
    cdef const uint8_t* q = json_number(p[0], end, &kind, out)
    if kind != JV_INT or not -2147483648 <= out[0] <= 2147483647:
        return False
    p[0] = q
    return True


cdef inline bint json_step(const uint8_t** p, const uint8_t* end, const char* text,
                          Py_ssize_t n) noexcept nogil:
    """Step ``p`` over ``text`` (``n`` bytes) when it comes next: the fixed
    pieces of a header of a known form, matched in place."""
    if end - p[0] < n or memcmp(p[0], text, n) != 0:
        return False
    p[0] += n
    return True


cdef inline const uint8_t* json_literal(const uint8_t* p, const uint8_t* end,
                                        int* kind) noexcept nogil:
    """true / false / null at ``p``."""
    cdef Py_ssize_t left = end - p
    if left >= 4 and memcmp(p, b"true", 4) == 0:
        kind[0] = JV_TRUE
        return p + 4
    if left >= 5 and memcmp(p, b"false", 5) == 0:
        kind[0] = JV_FALSE
        return p + 5
    if left >= 4 and memcmp(p, b"null", 4) == 0:
        kind[0] = JV_NULL
        return p + 4
    kind[0] = JV_FAIL
    return p


cdef inline const uint8_t* json_scalar(const JIndex* ix, const uint8_t* p, const uint8_t* end,
                                       JStr* s, int* kind, int64_t* ival) noexcept nogil:
    """One string, number or literal at ``p`` (its kind; JV_FAIL otherwise)."""
    if p >= end:
        kind[0] = JV_FAIL
        return p
    cdef uint8_t c = p[0]
    if c == 34:
        p = json_scan_string(ix, p, end, s)
        kind[0] = JV_STR if p != NULL else JV_FAIL
        return p
    if c == 45 or 48 <= c <= 57:
        return json_number(p, end, kind, ival)
    return json_literal(p, end, kind)


cdef inline const uint8_t* json_skip_value(const JIndex* ix, const uint8_t* p,
                                           const uint8_t* end, int depth,
                                           int* kind) noexcept nogil:
    """Validate and step over any JSON value at ``p`` (objects and arrays
    nested up to JSON_MAX_DEPTH); its kind, JV_FAIL when orjson must judge."""
    cdef JStr s
    cdef int64_t ival
    cdef int k
    cdef uint8_t close
    if p >= end or (p[0] != 123 and p[0] != 91):
        p = json_scalar(ix, p, end, &s, kind, &ival)
        if kind[0] == JV_STR and not json_string_valid(&s):
            kind[0] = JV_FAIL
        return p
    if depth >= JSON_MAX_DEPTH:
        kind[0] = JV_FAIL
        return p
    kind[0] = JV_FAIL
    close = 125 if p[0] == 123 else 93
    p = json_ws(p + 1, end)
    if p < end and p[0] == close:
        kind[0] = JV_OTHER
        return p + 1
    while True:
        if close == 125:
            if p >= end or p[0] != 34:
                return p
            p = json_scan_string(ix, p, end, &s)
            if p == NULL or not json_string_valid(&s):
                return end
            p = json_ws(p, end)
            if p >= end or p[0] != 58:
                return p
            p = json_ws(p + 1, end)
        p = json_skip_value(ix, p, end, depth + 1, &k)
        if k == JV_FAIL:
            return p
        p = json_ws(p, end)
        if p >= end:
            return p
        if p[0] == close:
            kind[0] = JV_OTHER
            return p + 1
        if p[0] != 44:
            return p
        p = json_ws(p + 1, end)


cdef inline uint8_t* json_write_int(uint8_t* o, int64_t v) noexcept nogil:
    """Decimal digits of ``v`` at ``o`` (room for 20 bytes)."""
    if v < 0:
        o[0] = 45
        return json_write_u64(o + 1, <uint64_t>0 - <uint64_t>v)
    return json_write_u64(o, <uint64_t>v)


cdef inline uint8_t* json_write_ints(uint8_t* o, const int64_t* values, Py_ssize_t n,
                                    int64_t less) noexcept nogil:
    """``values[:n]``, each less ``less`` (the caller vouches that none leaves
    64 bits), as decimal texts joined with commas (room for 21 bytes each)."""
    cdef Py_ssize_t i
    for i in range(n):
        if i:
            o[0] = 44
            o += 1
        o = json_write_int(o, values[i] - less)
    return o


cdef inline uint64_t json_tail_word(const uint8_t* p, Py_ssize_t n) noexcept nogil:
    """``p[:n]`` (1 <= n <= 8) as the low bytes of a word, the rest zero, from
    one load of the eight bytes that end at ``p + n``: the last bytes of a
    text of eight or more without a per-length load sequence (the ``8 - n``
    bytes before ``p`` must be the text's too)."""
    return json_load8(p + n - 8) >> (64 - 8 * n)


cdef inline uint64_t json_pad_above(Py_ssize_t n) noexcept nogil:
    """'A' in bytes n..7 of a word (1 <= n <= 8; none for 8): fills the rest
    of a json_tail_word with bytes that never need escaping."""
    return ((<uint64_t>JSON_ONES * 0x41) << (8 * n - 8)) << 8


cdef inline uint8_t* json_write_short(uint8_t* o, const uint8_t* p, Py_ssize_t n) noexcept nogil:
    """json_write_string for a text of 1..32 bytes with nothing to escape
    (most keys and values of a header): checked and copied as sixteen-byte
    blocks that may run past its end but not past its memory page.  ``p``
    must be the start of readable memory of at least ``n`` bytes; ``o``
    needs room for 6 * n + 2 bytes and 32 more."""
    if 0 < n <= 32 and json_page_has32(p) and json_plain32(p, n):
        o[0] = 34
        memcpy(o + 1, p, 32)
        o[n + 1] = 34
        return o + n + 2
    return json_write_string(o, p, n)


cdef inline uint8_t* json_write_escape(uint8_t* o, uint8_t c) noexcept nogil:
    """The escape of one byte that needs it ('"', '\\', a control byte) the
    way orjson writes it: \\" \\\\ \\b \\f \\n \\r \\t, the others as \\u00xx."""
    o[0] = 92
    if c == 34 or c == 92:
        o[1] = c
    elif c == 8:
        o[1] = 98
    elif c == 12:
        o[1] = 102
    elif c == 10:
        o[1] = 110
    elif c == 13:
        o[1] = 114
    elif c == 9:
        o[1] = 116
    else:
        o[1] = 117
        o[2] = 48
        o[3] = 48
        o[4] = 48 + (c >> 4)
        o[5] = 48 + (c & 15) if (c & 15) < 10 else 87 + (c & 15)
        return o + 6
    return o + 2


cdef inline uint8_t* json_write_string(uint8_t* o, const uint8_t* p, Py_ssize_t n) noexcept nogil:
    """``p[:n]`` (UTF-8) as a JSON string the way orjson writes it: \\" \\\\ \\b
    \\f \\n \\r \\t, other control characters as \\u00xx, the rest raw.
    Sixteen bytes at a time while they last; the last 1..15 of a text of
    sixteen or more are flagged from the sixteen bytes that end the text
    and stored as two words loaded from within it, those of a shorter text
    a word at a time -- no byte loop either way.  Each block is stored whole
    and the output advanced past its plain bytes only.  ``o`` needs room for
    6 * n + 2 bytes and 16 more."""
    cdef const uint8_t* e = p + n
    cdef Py_ssize_t left
    cdef uint64_t w, m
    cdef int wide = 0
    cdef int k
    o[0] = 34
    o += 1
    while True:
        left = e - p
        if left >= 16:
            m = json_mask16(p, &wide)
            memcpy(o, p, 16)
            if m == 0:
                o += 16
                p += 16
                continue
            k = json_ctz64(m)
        elif left == 0:
            break
        elif n >= 16:
            m = json_mask16(e - 16, &wide) >> (16 - left)
            if left > 8:
                json_store8(o, json_load8(p))
                json_store8(o + 8, json_tail_word(p + 8, left - 8))
            else:
                json_store8(o, json_tail_word(p, left))
            if m == 0:
                o += left
                break
            k = json_ctz64(m)
        elif left >= 8:
            w = json_load8(p)
            m = json_escape8(w)
            json_store8(o, w)
            if m == 0:
                o += 8
                p += 8
                continue
            k = json_first(m)
        else:
            w = json_tail_word(p, left) if n >= 8 else json_load_short(p, left)
            m = json_escape8(w | json_pad_above(left))
            json_store8(o, w)
            if m == 0:
                o += left
                break
            k = json_first(m)
        o = json_write_escape(o + k, p[k])
        p += k + 1
    o[0] = 34
    return o + 1
