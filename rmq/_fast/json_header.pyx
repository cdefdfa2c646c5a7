# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""The JSON header writer and reader of the compiled remoting codec.

``encode_json`` writes exactly what the twin (``rmq/remoting/codec.py``, orjson)
writes for the same arguments; ``fast_json`` reads a header into the values the
twin's decoder returns, building the extFields dict straight from the bytes.
Both return None for whatever they leave to the twin's orjson path -- unusual
argument types, strings with lone surrogates, floats, exponents, escaped
top-level keys, invalid JSON -- so results and errors are the twin's by
construction.  The byte-level work is in ``json_text.pxd``.

Why by hand: an orjson-based compiled codec (the twin's checks in Cython)
measured 0.8-1.5 µs more per header, 25% more name-server CPU per route
lookup and 11% more client CPU per SDK send (bench/RESULTS.md, "JSON header
codec against orjson"); orjson's ``loads`` alone takes 2-3x this reader.
"""

from cpython.bytes cimport PyBytes_FromStringAndSize
from cpython.mem cimport PyMem_Free, PyMem_Malloc, PyMem_Realloc
from cpython.ref cimport Py_INCREF, Py_XDECREF, PyObject
from cpython.unicode cimport PyUnicode_DecodeUTF8
from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t, uint64_t
from libc.string cimport memcmp, memcpy

from rmq._fast.byteorder cimport put32
from rmq._fast.json_text cimport (
    JV_FAIL,
    JV_FALSE,
    JV_INT,
    JV_NULL,
    JV_STR,
    JV_TRUE,
    JIndex,
    JStr,
    json_ascii,
    json_index,
    json_index_words,
    json_literal,
    json_step,
    json_load_short,
    json_number,
    json_page_has32,
    json_plain32,
    json_scalar,
    json_scan_string,
    json_skip_value,
    json_unescape,
    json_utf8_valid,
    json_write_int,
    json_write_short,
    json_write_string,
    json_ws,
)

import orjson

from rmq.common.exceptions import RemotingCommandError
from rmq.common.java import LANGUAGE_NAMES


cdef extern from "Python.h":
    # borrowed references, errors left to the caller
    const char* utf8_or_null "PyUnicode_AsUTF8AndSize"(PyObject* s, Py_ssize_t* size)
    bint str_exact "PyUnicode_CheckExact"(PyObject* o)
    bint int_like "PyLong_Check"(PyObject* o)
    bint is_bool "PyBool_Check"(PyObject* o)
    long long int_value "PyLong_AsLongLongAndOverflow"(PyObject* o, int* overflow)
    bint dict_exact "PyDict_CheckExact"(PyObject* o)
    int dict_next "PyDict_Next"(object d, Py_ssize_t* pos, PyObject** k, PyObject** v)
    int dict_set "PyDict_SetItem"(object d, object k, object v) except -1
    object dict_presized "_PyDict_NewPresized"(Py_ssize_t n)
    object dict_copy "PyDict_Copy"(object d)
    void PyErr_Clear()
    object PyUnicode_New(Py_ssize_t size, uint32_t maxchar)
    void* PyUnicode_DATA(object s)
    bint is_compact_ascii "PyUnicode_IS_COMPACT_ASCII"(PyObject* o)
    Py_ssize_t str_length "PyUnicode_GET_LENGTH"(PyObject* o)
    void* ascii_data "PyUnicode_DATA"(PyObject* o)


cdef extern from *:
    """
    #include <stdint.h>
    /* The entries of a dict whose combined table holds only str keys (what
       a header's extFields is), read in place as (key, value) pairs in
       insertion order, a NULL value marking a deleted one: PyDict_Next costs
       a call per entry, most of the time of writing a small value.  The
       layout is the one of CPython 3.11 to 3.13 (the entries follow the
       index table, 1 << dk_log2_index_bytes bytes); NULL elsewhere, and for
       split tables and other key kinds, and the caller then walks the dict
       with PyDict_Next. */
    typedef struct { PyObject *key; PyObject *value; } rmq_dict_pair;
    static inline const rmq_dict_pair *rmq_dict_pairs(PyObject *d, Py_ssize_t *n) {
    #if PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030E0000 \
        && !defined(Py_GIL_DISABLED) && !defined(PYPY_VERSION) && !defined(Py_LIMITED_API)
        typedef struct {
            Py_ssize_t refcnt;
            uint8_t log2_size;
            uint8_t log2_index_bytes;
            uint8_t kind;               /* 1: str keys, combined table */
            uint32_t version;
            Py_ssize_t usable;
            Py_ssize_t nentries;
            char indices[];
        } rmq_dict_keys;
        PyDictObject *mp = (PyDictObject *)d;
        const rmq_dict_keys *dk = (const rmq_dict_keys *)mp->ma_keys;
        if (mp->ma_values == NULL && dk->kind == 1) {
            *n = dk->nentries;
            return (const rmq_dict_pair *)(dk->indices + ((size_t)1 << dk->log2_index_bytes));
        }
    #endif
        *n = 0;
        return NULL;
    }
    /* The value of an exact int of one digit (|v| < 2**30), read in place;
       0 for anything else (PyLong_AsLongLongAndOverflow decides those). */
    static inline int rmq_small_int(PyObject *o, long *v) {
    #if PY_VERSION_HEX >= 0x030C0000 && !defined(PYPY_VERSION) && !defined(Py_LIMITED_API)
        if (PyLong_CheckExact(o) && PyUnstable_Long_IsCompact((PyLongObject *)o)) {
            *v = (long)PyUnstable_Long_CompactValue((PyLongObject *)o);
            return 1;
        }
    #elif !defined(PYPY_VERSION) && !defined(Py_LIMITED_API)
        if (PyLong_CheckExact(o)) {
            Py_ssize_t size = Py_SIZE(o);
            if (size >= -1 && size <= 1) {
                *v = (long)size * (long)((PyLongObject *)o)->ob_digit[0];
                return 1;
            }
        }
    #endif
        return 0;
    }
    """
    ctypedef struct DictPair "rmq_dict_pair":
        PyObject* key
        PyObject* value
    const DictPair* dict_pairs "rmq_dict_pairs"(PyObject* d, Py_ssize_t* n) noexcept
    bint small_int "rmq_small_int"(PyObject* o, long* v) noexcept

# LanguageCode names by code (rmq.common.java), as C strings
if len(LANGUAGE_NAMES) != N_LANGUAGES:
    raise ImportError(f"json_header.pxd has N_LANGUAGES = {N_LANGUAGES}, "
                      f"LanguageCode has {len(LANGUAGE_NAMES)} names")
cdef tuple LANGUAGE_BYTES = tuple(name.encode() for name in LANGUAGE_NAMES)
cdef const char* LANGUAGE_C[N_LANGUAGES]
cdef Py_ssize_t LANGUAGE_LEN[N_LANGUAGES]
for _i in range(N_LANGUAGES):
    LANGUAGE_C[_i] = <const char*>(<bytes>LANGUAGE_BYTES[_i])
    LANGUAGE_LEN[_i] = len(<bytes>LANGUAGE_BYTES[_i])


# ---------------------------------------------------------------------------
# the twin's stringification of non-string values

cdef str stringify(object value):
    """fastjson's view of a non-string extFields value as a Java String."""
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, (int, float, str)):
        return str(value)
    return orjson.dumps(value).decode()


cdef dict string_ext(dict ext):
    """The map with every value a str (None values dropped)."""
    cdef object v
    for v in ext.values():
        if type(v) is not str:
            break
    else:
        return ext
    return {k: (v if type(v) is str else stringify(v)) for k, v in ext.items() if v is not None}


# ---------------------------------------------------------------------------
# JSON writer.  One C buffer for the module: nothing between the first write
# and the final copy into bytes can run Python code (values are turned into
# strings before writing starts), so no call can re-enter it half way.

cdef uint8_t* OUT = NULL
cdef Py_ssize_t OUT_CAP = 0
cdef Py_ssize_t OUT_KEEP = 1 << 18     # a buffer grown past this is dropped after use
cdef Py_ssize_t FIXED_ROOM = 256       # every fixed key, four int32s and the language


cdef int out_reserve(Py_ssize_t need) except -1:
    global OUT, OUT_CAP
    if need <= OUT_CAP:
        return 0
    cdef Py_ssize_t cap = max(need, 2 * OUT_CAP, 4096)
    cdef uint8_t* p = <uint8_t*>PyMem_Realloc(OUT, cap)
    if p == NULL:
        raise MemoryError()
    OUT = p
    OUT_CAP = cap
    return 0


cdef inline uint8_t* put(uint8_t* o, const char* s, Py_ssize_t n) noexcept nogil:
    memcpy(o, s, n)
    return o + n


cdef inline const char* str_utf8(PyObject* s, Py_ssize_t* n) noexcept:
    """The UTF-8 of an exact str (NULL with an error set when it has none, as
    for lone surrogates); compact ASCII strs are their own UTF-8."""
    if is_compact_ascii(s):
        n[0] = str_length(s)
        return <const char*>ascii_data(s)
    return utf8_or_null(s, n)


cdef inline bint int32_arg(object v, int64_t* out):
    """An int (not a bool, which orjson writes as true/false) in int32 range."""
    cdef int overflow = 0
    cdef long small
    cdef PyObject* p = <PyObject*>v
    if small_int(p, &small):
        out[0] = small
        return True
    if not int_like(p) or is_bool(p):
        return False
    cdef long long x = int_value(p, &overflow)
    if overflow or x < -2147483648 or x > 2147483647:
        PyErr_Clear()
        return False
    out[0] = x
    return True


cdef inline int language_index(object language):
    """The twin's LANGUAGE_NAMES index for an int language, -1 for others."""
    cdef int overflow = 0
    cdef long small
    cdef PyObject* p = <PyObject*>language
    if small_int(p, &small):
        return <int>small if 0 <= small < N_LANGUAGES else LANGUAGE_OTHER
    if not int_like(p):
        return -1
    cdef long long x = int_value(p, &overflow)
    if overflow:
        PyErr_Clear()
        return LANGUAGE_OTHER
    return <int>x if 0 <= x < N_LANGUAGES else LANGUAGE_OTHER


cdef enum:
    EXT_NOT_PLAIN = -1     # a key or value the writer does not take
    EXT_NOT_STR = -2       # a value to stringify first (the twin's string_ext)
    ENTRY_SLACK = 38       # ',' ':' and json_write_short's overrun
    SHORT_KEY = 16         # the longest key and value write_entry copies as blocks
    SHORT_VALUE = 32
    SHORT_ENTRY = 64       # the most such a pair writes, overrun included


cdef inline Py_ssize_t write_entry(PyObject* k, PyObject* val, Py_ssize_t at, Py_ssize_t room,
                                   uint8_t sep) except -3:
    """``sep`` and the pair ``"k":"val"`` written into OUT at ``at``, keeping
    ``room`` bytes free behind it: the offset after it, or EXT_NOT_PLAIN /
    EXT_NOT_STR (nothing written or run).  A pair of short ASCII texts with
    nothing to escape (nearly every pair of a header) is checked and copied
    as sixteen-byte blocks, which may run past a text's end but not past its
    memory page; the rest goes to write_entry_any."""
    cdef Py_ssize_t kn, vn
    cdef const uint8_t* kp
    cdef const uint8_t* vp
    cdef uint8_t* o
    if (str_exact(k) and str_exact(val) and is_compact_ascii(k) and is_compact_ascii(val)
            and at + SHORT_ENTRY + room <= OUT_CAP):
        kn = str_length(k)
        vn = str_length(val)
        kp = <const uint8_t*>ascii_data(k)
        vp = <const uint8_t*>ascii_data(val)
        if (0 < kn <= SHORT_KEY and 0 < vn <= SHORT_VALUE
                and json_page_has32(kp) and json_page_has32(vp)
                and json_plain32(kp, kn) and json_plain32(vp, vn)):
            o = OUT + at
            o[0] = sep
            o[1] = 34
            memcpy(o + 2, kp, 16)
            o += 2 + kn
            o[0] = 34
            o[1] = 58
            o[2] = 34
            memcpy(o + 3, vp, 32)
            o += 3 + vn
            o[0] = 34
            return o + 1 - OUT
    return write_entry_any(k, val, at, room, sep)


cdef Py_ssize_t write_entry_any(PyObject* k, PyObject* val, Py_ssize_t at, Py_ssize_t room,
                                uint8_t sep) except -3:
    """write_entry for any pair (long, escaped or non-ASCII texts, values
    to stringify, keys the writer leaves to the twin)."""
    cdef Py_ssize_t kn, vn
    cdef const char* kp
    cdef const char* vp
    cdef uint8_t* o
    if not str_exact(val):
        return EXT_NOT_STR
    if not str_exact(k):
        return EXT_NOT_PLAIN
    kp = str_utf8(k, &kn)
    vp = str_utf8(val, &vn) if kp != NULL else NULL
    if vp == NULL:
        PyErr_Clear()
        return EXT_NOT_PLAIN
    if at + 6 * (kn + vn) + ENTRY_SLACK + room > OUT_CAP:
        out_reserve(at + 6 * (kn + vn) + ENTRY_SLACK + room)
    o = OUT + at
    o[0] = sep
    o = json_write_short(o + 1, <const uint8_t*>kp, kn)
    o[0] = 58
    o = json_write_short(o + 1, <const uint8_t*>vp, vn)
    return o - OUT


cdef Py_ssize_t write_ext(dict ext, Py_ssize_t at, Py_ssize_t room) except -3:
    """The extFields object of ``ext`` written into OUT from ``at``, keeping
    ``room`` bytes free behind it: the offset after its '}', or EXT_NOT_PLAIN /
    EXT_NOT_STR (nothing run, so nothing can have re-entered OUT)."""
    cdef Py_ssize_t it = 0, count, i
    cdef PyObject* k
    cdef PyObject* val
    cdef uint8_t sep = 123       # '{' before the first entry, ',' before the others
    cdef const DictPair* pairs = dict_pairs(<PyObject*>ext, &count)
    if pairs != NULL:
        for i in range(count):
            if pairs[i].value != NULL:
                at = write_entry(pairs[i].key, pairs[i].value, at, room, sep)
                if at < 0:
                    return at
                sep = 44
    else:
        while dict_next(ext, &it, &k, &val):
            at = write_entry_any(k, val, at, room, sep)
            if at < 0:
                return at
            sep = 44
    if sep == 123:
        OUT[at] = 123
        at += 1
    OUT[at] = 125
    return at + 1


cdef object encode_json(object code, object language, object version, object opaque,
                        object flag, object remark, object ext_fields, Py_ssize_t body_len,
                        bint stringified=False):
    """The frame head the twin makes, or None when its arguments are not the
    plain ones this writer takes (the twin then encodes them)."""
    cdef int64_t c, v, q, f
    cdef int lang = language_index(language)
    cdef Py_ssize_t rn = 0, at, room
    cdef const char* rp = NULL
    cdef uint8_t* o
    cdef dict ext = None
    if lang < 0 or not (int32_arg(code, &c) and int32_arg(version, &v)
                        and int32_arg(opaque, &q) and int32_arg(flag, &f)):
        return None
    if remark is not None:
        if not str_exact(<PyObject*>remark):
            return None
        rp = utf8_or_null(<PyObject*>remark, &rn)
        if rp == NULL:
            PyErr_Clear()
            return None
    if ext_fields is not None:
        if not dict_exact(<PyObject*>ext_fields):
            return None
        ext = <dict>ext_fields
    room = FIXED_ROOM + 6 * rn
    if 8 + room > OUT_CAP:
        out_reserve(8 + room)
    o = put(OUT + 8, '{"code":', 8)
    o = json_write_int(o, c)
    if ext is not None:
        o = put(o, ',"extFields":', 13)
        at = write_ext(ext, o - OUT, room)
        if at == EXT_NOT_STR:
            if stringified:
                return None
            # the twin's string_ext, then the whole header again (it may
            # run Python code, which may encode into OUT meanwhile)
            return encode_json(code, language, version, opaque, flag, remark,
                               string_ext(ext), body_len, True)
        if at == EXT_NOT_PLAIN:
            return None
        o = OUT + at
    o = put(o, ',"flag":', 8)
    o = json_write_int(o, f)
    o = put(o, ',"language":"', 13)
    o = put(o, LANGUAGE_C[lang], LANGUAGE_LEN[lang])
    o = put(o, '","opaque":', 11)
    o = json_write_int(o, q)
    if rp != NULL:
        o = put(o, ',"remark":', 10)
        o = json_write_short(o, <const uint8_t*>rp, rn)
    o = put(o, ',"serializeTypeCurrentRPC":"JSON","version":', 44)
    o = json_write_int(o, v)
    o[0] = 125
    o += 1
    return out_frame(o - OUT, body_len)


cdef bytes out_frame(Py_ssize_t n, Py_ssize_t body_len):
    """Fill the 8-byte prefix of the n bytes in OUT and copy them out."""
    global OUT, OUT_CAP
    cdef Py_ssize_t hlen = n - 8
    if hlen > 0xFFFFFF or 4 + hlen + body_len > 2147483647:
        raise RemotingCommandError(f"header of {hlen} bytes is too long")
    put32(OUT, <int32_t>(4 + hlen + body_len))
    put32(OUT + 4, <int32_t>hlen)
    cdef bytes head = PyBytes_FromStringAndSize(<char*>OUT, n)
    if OUT_CAP > OUT_KEEP:
        PyMem_Free(OUT)
        OUT = NULL
        OUT_CAP = 0
    return head


# ---------------------------------------------------------------------------
# JSON reader.  Strings come from a direct-mapped cache when short and plain
# ASCII (keys a..n, topics, groups, "0", "false": the same few texts in every
# header), so most of them cost a hash and a compare, and keep their str hash
# for the dict insert.

cdef enum:
    CACHE_SLOTS = 1024
    CACHE_MAX = 32

cdef struct CachedText:
    PyObject* text
    Py_ssize_t n
    uint8_t raw[CACHE_MAX]

cdef CachedText TEXT_CACHE[CACHE_SLOTS]

cdef enum:
    K_UNKNOWN = 0
    K_CODE = 1
    K_FLAG = 2
    K_OPAQUE = 3
    K_VERSION = 4
    K_LANGUAGE = 5
    K_REMARK = 6
    K_EXT = 7

cdef enum:
    SMALL_INTS = 1024

# ints 0..1023 made once: codes, versions, flags, languages and the header
# offsets of ordinary frames are in this range, and each decode needs several
cdef list SMALL_INT_OBJECTS = list(range(SMALL_INTS))
cdef PyObject* SMALL_INT[SMALL_INTS]
for _i in range(SMALL_INTS):
    SMALL_INT[_i] = <PyObject*>SMALL_INT_OBJECTS[_i]


cdef object int_object(int64_t v):
    if 0 <= v < SMALL_INTS:
        return <object>SMALL_INT[v]
    return v


cdef str TRUE_TEXT = "true"
cdef list ONE_CHAR_TEXTS = [chr(i) for i in range(128)]
cdef PyObject* ONE_CHAR[128]
for _i in range(128):
    ONE_CHAR[_i] = <PyObject*>ONE_CHAR_TEXTS[_i]
cdef str FALSE_TEXT = "false"


cdef inline uint64_t load8(const uint8_t* p) noexcept nogil:
    cdef uint64_t w
    memcpy(&w, p, 8)
    return w


cdef inline uint32_t text_slot(const uint8_t* p, Py_ssize_t n) noexcept nogil:
    """Cache slot of ``p[:n]`` (n <= CACHE_MAX): every byte takes part."""
    cdef uint64_t a
    if n < 8:
        a = json_load_short(p, n)
    else:
        a = load8(p) ^ (load8(p + n - 8) * <uint64_t>0xC2B2AE3D27D4EB4FULL)
        if n > 16:
            a ^= load8(p + 8) * <uint64_t>0xD6E8FEB86659FD93ULL
            if n > 24:
                a ^= load8(p + 16) * <uint64_t>0xA0761D6478BD642FULL
    # multiplicative hashing: the top bits of the product mix every input bit
    return <uint32_t>(((a ^ <uint64_t>n) * <uint64_t>0x9E3779B97F4A7C15ULL) >> 54)


cdef inline bint same_short(const uint8_t* a, const uint8_t* b, Py_ssize_t n) noexcept nogil:
    """memcmp(a, b, n) == 0 for n <= CACHE_MAX, in words (no library call)."""
    cdef Py_ssize_t i = 0
    while n - i >= 8:
        if load8(a + i) != load8(b + i):
            return False
        i += 8
    return json_load_short(a + i, n - i) == json_load_short(b + i, n - i)


cdef inline object ascii_text(const uint8_t* p, Py_ssize_t n):
    cdef object s = PyUnicode_New(n, 127)
    memcpy(PyUnicode_DATA(s), p, n)
    return s


cdef inline object cached_ascii(const uint8_t* p, Py_ssize_t n):
    """``p[:n]`` (ASCII, n <= CACHE_MAX) as str, shared with earlier calls."""
    if n == 1:
        return <object>ONE_CHAR[p[0]]
    cdef CachedText* slot = &TEXT_CACHE[text_slot(p, n)]
    if slot.text != NULL and slot.n == n and same_short(slot.raw, p, n):
        return <object>slot.text
    return cache_text(slot, p, n)


cdef object cache_text(CachedText* slot, const uint8_t* p, Py_ssize_t n):
    """A new str for ``p[:n]``, kept in ``slot`` (the text there is dropped)."""
    cdef object s = ascii_text(p, n)
    cdef PyObject* old = slot.text
    Py_INCREF(s)
    slot.text = <PyObject*>s
    slot.n = n
    memcpy(slot.raw, p, n)
    Py_XDECREF(old)
    return s


cdef object utf8_text(const uint8_t* p, Py_ssize_t n):
    """Strict UTF-8 as str, None where orjson would object."""
    try:
        return PyUnicode_DecodeUTF8(<const char*>p, n, NULL)
    except UnicodeDecodeError:
        return None


cdef inline object jtext(const JStr* t):
    """A scanned JSON string as str, or None to leave the header to orjson."""
    if not t.esc and t.n <= CACHE_MAX and (not t.wide or json_ascii(t.s, t.n)):
        return cached_ascii(t.s, t.n)
    return jtext_long(t)


cdef object jtext_long(const JStr* t):
    """jtext for escaped, non-ASCII or long strings."""
    cdef uint8_t stack[256]
    cdef uint8_t* buf
    cdef Py_ssize_t k
    cdef bint wide
    if not t.esc:
        if t.wide:
            return utf8_text(t.s, t.n)
        if t.n <= CACHE_MAX:
            return cached_ascii(t.s, t.n)
        return ascii_text(t.s, t.n)
    buf = stack
    if t.n > 256:
        buf = <uint8_t*>PyMem_Malloc(t.n)
        if buf == NULL:
            raise MemoryError()
    try:
        k = json_unescape(t.s, t.n, buf, &wide)
        if k < 0:
            return None
        if wide:
            return utf8_text(buf, k)
        return ascii_text(buf, k)
    finally:
        if buf != stack:
            PyMem_Free(buf)


cdef inline int header_key(const uint8_t* s, Py_ssize_t n) noexcept nogil:
    if n == 4:
        if memcmp(s, b"code", 4) == 0:
            return K_CODE
        if memcmp(s, b"flag", 4) == 0:
            return K_FLAG
    elif n == 6:
        if memcmp(s, b"opaque", 6) == 0:
            return K_OPAQUE
        if memcmp(s, b"remark", 6) == 0:
            return K_REMARK
    elif n == 7:
        if memcmp(s, b"version", 7) == 0:
            return K_VERSION
    elif n == 8:
        if memcmp(s, b"language", 8) == 0:
            return K_LANGUAGE
    elif n == 9:
        if memcmp(s, b"extFields", 9) == 0:
            return K_EXT
    return K_UNKNOWN


cdef inline int language_of(const uint8_t* s, Py_ssize_t n) noexcept nogil:
    cdef int i
    for i in range(N_LANGUAGES):
        if LANGUAGE_LEN[i] == n and memcmp(LANGUAGE_C[i], s, n) == 0:
            return i
    return LANGUAGE_OTHER


cdef object scalar_text(const JStr* s, int kind, const uint8_t* start, const uint8_t* stop):
    """An extFields or remark value as the twin stringifies it: strings as they
    are, integers as their digits (JSON's integer text is Python's), booleans
    lower-case; None to leave the header to orjson."""
    if kind == JV_STR:
        return jtext(s)
    if kind == JV_INT:
        return cached_ascii(start, stop - start)
    if kind == JV_TRUE:
        return TRUE_TEXT
    if kind == JV_FALSE:
        return FALSE_TEXT
    return None


cdef struct JEntry:
    JStr key
    JStr value
    const uint8_t* start     # the value's first and past-last bytes
    const uint8_t* stop
    int kind

cdef enum:
    EXT_BATCH = 32
    EXT_FAIL = 0
    EXT_MORE = 1
    EXT_DONE = 2


cdef const uint8_t* scan_ext(const JIndex* ix, const uint8_t* p, const uint8_t* end,
                             JEntry* out, int* count, int* state) noexcept nogil:
    """Scan up to EXT_BATCH entries of an extFields object from ``p`` (after
    its '{' or a ',') into ``out``: EXT_DONE at the closing brace, EXT_MORE
    when the batch is full, EXT_FAIL for anything left to orjson."""
    cdef int n = 0
    cdef int64_t ival
    state[0] = EXT_FAIL
    while n < EXT_BATCH:
        if p >= end or p[0] != 34:
            return p
        p = json_scan_string(ix, p, end, &out[n].key)
        if p == NULL:
            return end
        p = json_ws(p, end)
        if p >= end or p[0] != 58:
            return p
        p = json_ws(p + 1, end)
        out[n].start = p
        if p < end and p[0] == 34:  # the usual string value, without the dispatch
            p = json_scan_string(ix, p, end, &out[n].value)
            if p == NULL:
                return end
            out[n].kind = JV_STR
        else:
            p = json_scalar(ix, p, end, &out[n].value, &out[n].kind, &ival)
            if out[n].kind == JV_FAIL:
                return p
        out[n].stop = p
        n += 1
        count[0] = n
        p = json_ws(p, end)
        if p >= end:
            return p
        if p[0] == 125:
            state[0] = EXT_DONE
            return p + 1
        if p[0] != 44:
            return p
        p = json_ws(p + 1, end)
    state[0] = EXT_MORE
    return p


cdef object json_ext(const JIndex* ix, const uint8_t** at, const uint8_t* end):
    """The extFields object at ``at[0]`` (its '{'): the dict the twin ends up
    with, or None.  Nulls are kept as placeholders and dropped at the end,
    which is what the twin's orjson dict + string_ext amount to."""
    cdef JEntry entries[EXT_BATCH]
    cdef JEntry* e
    cdef int count = 0, state, i
    cdef bint nulls = False
    cdef const uint8_t* p = json_ws(at[0] + 1, end)
    if p < end and p[0] == 125:
        at[0] = p + 1
        return {}
    p = scan_ext(ix, p, end, entries, &count, &state)
    if state == EXT_FAIL:
        return None
    cdef object ext
    cdef int slot = template_slot(entries, count)
    if state == EXT_DONE and TEMPLATE_N[slot] == count:
        ext = from_template(slot, entries, count)
        if ext is not NotImplemented:
            at[0] = p
            return ext
    ext = dict_presized(count)
    while True:
        for i in range(count):
            e = &entries[i]
            key = jtext(&e.key)
            if key is None:
                return None
            if e.kind == JV_NULL:
                nulls = True
                dict_set(ext, key, None)
            else:
                value = scalar_text(&e.value, e.kind, e.start, e.stop)
                if value is None:
                    return None
                dict_set(ext, key, value)
        if state == EXT_DONE:
            break
        p = scan_ext(ix, p, end, entries, &count, &state)
        if state == EXT_FAIL:
            return None
    at[0] = p
    if nulls:
        return {k: v for k, v in (<dict>ext).items() if v is not None}
    if state == EXT_DONE and len(<dict>ext) == count:
        remember(slot, <dict>ext)
    return ext


# Maps of the same shape come again and again (a producer's sends, a
# consumer's pulls): the last one of each shape is kept, privately, as a
# template.  A map whose keys are the template's, in the same order, is a
# copy of the template (one allocation, no resizing, hashes in place) with
# only the values that differ put in -- texts come from the cache, so an
# unchanged value is the very same object.

cdef enum:
    TEMPLATES = 16

cdef PyObject* TEMPLATE_DICT[TEMPLATES]          # owned; never changed once made
cdef int TEMPLATE_N[TEMPLATES]
cdef PyObject* TEMPLATE_KEYS[TEMPLATES][EXT_BATCH]    # borrowed from TEMPLATE_DICT
cdef PyObject* TEMPLATE_VALUES[TEMPLATES][EXT_BATCH]


cdef inline int template_slot(const JEntry* entries, int count) noexcept nogil:
    """Slot of a map's shape: its size and its first key's first byte and length."""
    if count == 0 or entries[0].key.n == 0:
        return count & (TEMPLATES - 1)
    return (count * 7 + entries[0].key.s[0] * 3 + <int>entries[0].key.n) & (TEMPLATES - 1)


cdef object from_template(int slot, JEntry* entries, int count):
    """The map from the template in ``slot`` (NotImplemented when its keys
    are not the template's; None to leave the header to orjson)."""
    cdef int i
    cdef JEntry* e
    cdef PyObject* keys[EXT_BATCH]
    cdef PyObject* values[EXT_BATCH]
    # the template and its entries as they are now: anything below that
    # allocates may run a collection, whose finalizers may decode (and
    # replace this template) meanwhile; the reference keeps these alive
    cdef object template = <object>TEMPLATE_DICT[slot]
    memcpy(keys, TEMPLATE_KEYS[slot], count * sizeof(PyObject*))
    memcpy(values, TEMPLATE_VALUES[slot], count * sizeof(PyObject*))
    cdef object ext = dict_copy(template)
    for i in range(count):
        e = &entries[i]
        if e.kind == JV_NULL:
            return NotImplemented
        if e.key.esc or not same_text(keys[i], e.key.s, e.key.n):
            key = jtext(&e.key)
            if key is None:
                return None
            if <PyObject*>key != keys[i] and key != <object>keys[i]:
                return NotImplemented
        if e.kind == JV_STR and not e.value.esc and same_text(values[i], e.value.s, e.value.n):
            continue
        if e.kind == JV_INT and same_text(values[i], e.start, e.stop - e.start):
            continue
        value = scalar_text(&e.value, e.kind, e.start, e.stop)
        if value is None:
            return None
        if <PyObject*>value != values[i]:
            dict_set(ext, <object>keys[i], value)
    return ext


cdef inline bint same_text(PyObject* s, const uint8_t* p, Py_ssize_t n) noexcept:
    """``s`` (a str) is the ASCII text ``p[:n]``."""
    return (is_compact_ascii(s) and str_length(s) == n
            and memcmp(ascii_data(s), p, n) == 0)


cdef void remember(int slot, dict ext) except *:
    """Make a private copy of ``ext`` the template of its shape."""
    cdef dict template = ext.copy()
    cdef PyObject* old = TEMPLATE_DICT[slot]
    cdef Py_ssize_t it = 0
    cdef PyObject* k
    cdef PyObject* v
    cdef int i = 0
    Py_INCREF(template)
    TEMPLATE_DICT[slot] = <PyObject*>template
    while dict_next(template, &it, &k, &v):
        TEMPLATE_KEYS[slot][i] = k
        TEMPLATE_VALUES[slot][i] = v
        i += 1
    TEMPLATE_N[slot] = i
    Py_XDECREF(old)


cdef object fast_json(const uint8_t* data, Py_ssize_t n, object tail_a, object tail_b):
    """The seven header values followed by ``tail_a, tail_b``, or None to
    leave the header to orjson."""
    cdef uint64_t stack[64]
    cdef uint64_t* bm = stack
    cdef JIndex ix
    cdef Py_ssize_t words = json_index_words(n)
    if words > 64:
        bm = <uint64_t*>PyMem_Malloc(words * 8)
        if bm == NULL:
            raise MemoryError()
    try:
        ix.base = data
        ix.bm = bm
        ix.wide = json_index(data, n, bm)
        fields = canonical_header(&ix, data, n, tail_a, tail_b)
        if fields is NotImplemented:
            return header_values(&ix, data, n, tail_a, tail_b)
        return fields
    finally:
        if bm != stack:
            PyMem_Free(bm)


cdef inline bint int32_at(const uint8_t** p, const uint8_t* end, int64_t* out) noexcept nogil:
    """An int32 number next (JSON integer text, nothing left to orjson)."""
    cdef int kind
    p[0] = json_number(p[0], end, &kind, out)
    return kind == JV_INT and -2147483648 <= out[0] <= 2147483647


cdef object canonical_header(const JIndex* ix, const uint8_t* data, Py_ssize_t n,
                             object tail_a, object tail_b):
    """The header as Java (fastjson), this codec and the C++ client write it:
    keys in alphabetical order, no whitespace inside, integers, the language
    by name, remark a plain string.  Read by stepping over the fixed text;
    NotImplemented as soon as it differs (header_values then reads it in
    general), None to leave it to orjson."""
    cdef const uint8_t* end = data + n
    cdef const uint8_t* p = data
    cdef int64_t code, flag, opaque, version
    cdef int language
    cdef JStr s
    ext = None
    remark = None
    if not json_step(&p, end, '{"code":', 8) or not int32_at(&p, end, &code):
        return NotImplemented
    if json_step(&p, end, ',"extFields":{', 14):
        p -= 1
        ext = json_ext(ix, &p, end)
        if ext is None:
            return None
    if not json_step(&p, end, ',"flag":', 8) or not int32_at(&p, end, &flag):
        return NotImplemented
    if not json_step(&p, end, ',"language":"', 13):
        return NotImplemented
    p = json_scan_string(ix, p - 1, end, &s)
    if p == NULL or s.esc or (s.wide and not json_ascii(s.s, s.n)):
        return NotImplemented
    language = language_of(s.s, s.n)
    if not json_step(&p, end, ',"opaque":', 10) or not int32_at(&p, end, &opaque):
        return NotImplemented
    if json_step(&p, end, ',"remark":"', 11):
        p = json_scan_string(ix, p - 1, end, &s)
        if p == NULL:
            return NotImplemented
        remark = jtext(&s)
        if remark is None:
            return None
    json_step(&p, end, ',"serializeTypeCurrentRPC":"JSON"', 33)
    if (not json_step(&p, end, ',"version":', 11) or not int32_at(&p, end, &version)
            or not json_step(&p, end, '}', 1) or json_ws(p, end) != end):
        return NotImplemented
    return (int_object(code), int_object(language), int_object(version), int_object(opaque),
            int_object(flag), remark, ext, tail_a, tail_b)


cdef object header_values(const JIndex* ix, const uint8_t* data, Py_ssize_t n, object tail_a,
                          object tail_b):
    """fast_json over an indexed text."""
    cdef const uint8_t* end = data + n
    cdef const uint8_t* p = json_ws(data, end)
    cdef const uint8_t* start
    cdef JStr ks, vs
    cdef int kind, key
    cdef int64_t ival
    cdef int64_t ints[5]
    cdef int language = 0
    remark = None
    ext = None
    ints[:] = [0, 0, 0, 0, 0]
    if p >= end or p[0] != 123:
        return None
    p = json_ws(p + 1, end)
    if p < end and p[0] == 125:
        p += 1
    else:
        while True:
            if p >= end or p[0] != 34:
                return None
            p = json_scan_string(ix, p, end, &ks)
            if p == NULL or ks.esc:
                return None
            p = json_ws(p, end)
            if p >= end or p[0] != 58:
                return None
            start = json_ws(p + 1, end)
            key = header_key(ks.s, ks.n)
            if key == K_EXT:
                if start < end and start[0] == 123:
                    p = start
                    ext = json_ext(ix, &p, end)
                    if ext is None:
                        return None
                else:
                    p = json_literal(start, end, &kind)
                    if kind != JV_NULL:
                        return None
                    ext = None
            elif key == K_UNKNOWN:
                if ks.wide and not json_utf8_valid(ks.s, ks.n):
                    return None
                p = json_skip_value(ix, start, end, 1, &kind)
                if kind == JV_FAIL:
                    return None
            else:
                p = json_scalar(ix, start, end, &vs, &kind, &ival)
                if kind == JV_FAIL:
                    return None
                if key <= K_VERSION:
                    if kind == JV_NULL:
                        ints[key] = 0
                    elif kind == JV_INT and -2147483648 <= ival <= 2147483647:
                        ints[key] = ival
                    else:
                        return None
                elif key == K_LANGUAGE:
                    if kind == JV_STR and not vs.esc and (not vs.wide or json_ascii(vs.s, vs.n)):
                        language = language_of(vs.s, vs.n)
                    elif kind == JV_INT:
                        language = <int>ival if 0 <= ival < N_LANGUAGES else LANGUAGE_OTHER
                    elif kind == JV_NULL:
                        language = 0
                    else:
                        return None
                elif kind == JV_NULL:
                    remark = None
                else:
                    remark = scalar_text(&vs, kind, start, p)
                    if remark is None:
                        return None
            p = json_ws(p, end)
            if p >= end:
                return None
            if p[0] == 44:
                p = json_ws(p + 1, end)
            elif p[0] == 125:
                p += 1
                break
            else:
                return None
    if json_ws(p, end) != end:
        return None
    return (int_object(ints[K_CODE]), int_object(language), int_object(ints[K_VERSION]),
            int_object(ints[K_OPAQUE]), int_object(ints[K_FLAG]), remark, ext,
            tail_a, tail_b)
