# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Compiled frame and header codec of the remoting protocol.

Same functions, signatures and bytes as the pure-Python twin in
``rmq/remoting/codec.py`` (the frame and both header layouts are described at
the top of that module).  Every length read from the network is checked
against the buffer once before any byte behind it is touched.
"""

from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytes cimport PyBytes_FromStringAndSize
from cpython.mem cimport PyMem_Free, PyMem_Malloc
from cpython.unicode cimport PyUnicode_DecodeUTF8
from libc.stdint cimport int16_t, int32_t, int64_t, uint8_t, uint32_t
from libc.string cimport memcmp, memcpy

import orjson


cdef object _command_error = None


cdef object RemotingCommandError():
    """rmq.remoting.exceptions.RemotingCommandError, imported on first use:
    rmq.remoting imports this module, so importing it at load time would be
    circular when this module is imported first."""
    global _command_error
    if _command_error is None:
        from rmq.remoting.exceptions import RemotingCommandError as cls
        _command_error = cls
    return _command_error


cdef extern from "Python.h":
    const char* PyUnicode_AsUTF8AndSize(object s, Py_ssize_t* size) except NULL


cdef tuple LANGUAGE_NAMES = ("JAVA", "CPP", "DOTNET", "PYTHON", "DELPHI", "ERLANG", "RUBY",
                             "OTHER", "HTTP", "GO", "PHP", "OMS", "RUST")
cdef dict LANGUAGE_BY_NAME = {name: code for code, name in enumerate(LANGUAGE_NAMES)}
cdef int N_LANGUAGES = 13
cdef int LANGUAGE_OTHER = 7
cdef int FIXED_SIZE = 17
cdef char HEX[16]
HEX[:] = [48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 97, 98, 99, 100, 101, 102]


# ---------------------------------------------------------------------------
# helpers shared by both serializations

cdef inline uint32_t rd32(const uint8_t* p) noexcept nogil:
    return (<uint32_t>p[0] << 24) | (<uint32_t>p[1] << 16) | (<uint32_t>p[2] << 8) | p[3]


cdef inline void wr32(uint8_t* p, uint32_t v) noexcept nogil:
    p[0] = <uint8_t>(v >> 24)
    p[1] = <uint8_t>(v >> 16)
    p[2] = <uint8_t>(v >> 8)
    p[3] = <uint8_t>v


cdef inline void wr16(uint8_t* p, uint32_t v) noexcept nogil:
    p[0] = <uint8_t>(v >> 8)
    p[1] = <uint8_t>v


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


cdef inline int check_int32(str name, object value) except -1:
    if not -2147483648 <= value <= 2147483647:
        raise RemotingCommandError()(f"{name} {value} is not an int32")
    return 0


cdef str text(const uint8_t* p, Py_ssize_t n):
    try:
        return PyUnicode_DecodeUTF8(<const char*>p, n, NULL)
    except UnicodeDecodeError as e:
        raise RemotingCommandError()(f"bad UTF-8 in header: {e}") from None


# ---------------------------------------------------------------------------
# a growable output buffer (C memory, no Python objects while writing)

cdef class _Writer:
    cdef bytearray buf
    cdef uint8_t* data
    cdef Py_ssize_t n
    cdef Py_ssize_t cap
    cdef bint busy

    def __cinit__(self, Py_ssize_t cap):
        self.buf = bytearray(cap)
        self.data = <uint8_t*>(<char*>self.buf)
        self.n = 0
        self.cap = cap

    cdef inline int reserve(self, Py_ssize_t extra) except -1:
        cdef Py_ssize_t want = self.n + extra
        if want <= self.cap:
            return 0
        cdef Py_ssize_t cap = self.cap * 2
        while cap < want:
            cap *= 2
        self.buf.extend(bytes(cap - self.cap))
        self.data = <uint8_t*>(<char*>self.buf)
        self.cap = cap
        return 0

    cdef inline int put(self, const char* p, Py_ssize_t k) except -1:
        self.reserve(k)
        memcpy(self.data + self.n, p, k)
        self.n += k
        return 0

    cdef inline int put_int(self, int64_t v) except -1:
        cdef char tmp[24]
        cdef int i = 24
        cdef bint neg = v < 0
        cdef uint32_t u
        if neg:
            v = -v
        while True:
            i -= 1
            tmp[i] = <char>(48 + v % 10)
            v //= 10
            if v == 0:
                break
        if neg:
            i -= 1
            tmp[i] = 45
        return self.put(&tmp[i], 24 - i)

    cdef int put_json_string(self, object s) except -1:
        """A JSON string with orjson's escapes (\\" \\\\ \\b \\f \\n \\r \\t, other
        control characters as lower-case \\u00XX); everything else raw UTF-8."""
        cdef Py_ssize_t n, i, start
        cdef const uint8_t* p = <const uint8_t*>PyUnicode_AsUTF8AndSize(s, &n)
        cdef uint8_t c
        cdef char esc[6]
        self.reserve(n + 2)
        self.data[self.n] = 34
        self.n += 1
        start = 0
        for i in range(n):
            c = p[i]
            if c >= 0x20 and c != 34 and c != 92:
                continue
            if i > start:
                self.put(<const char*>p + start, i - start)
            start = i + 1
            esc[0] = 92
            if c == 34 or c == 92:
                esc[1] = c
                self.put(esc, 2)
            elif c == 8:
                self.put(b"\\b", 2)
            elif c == 12:
                self.put(b"\\f", 2)
            elif c == 10:
                self.put(b"\\n", 2)
            elif c == 13:
                self.put(b"\\r", 2)
            elif c == 9:
                self.put(b"\\t", 2)
            else:
                esc[1] = 117
                esc[2] = 48
                esc[3] = 48
                esc[4] = HEX[c >> 4]
                esc[5] = HEX[c & 15]
                self.put(esc, 6)
        if n > start:
            self.put(<const char*>p + start, n - start)
        self.put(b'"', 1)
        return 0


# ---------------------------------------------------------------------------
# encode

cdef _Writer _shared = _Writer(4096)


cdef inline _Writer writer():
    """The module's writer, reused across calls (a fresh one if a stringify
    callback re-entered encode while it is in use)."""
    if _shared.busy:
        return _Writer(512)
    _shared.busy = True
    _shared.n = 0
    return _shared


cdef inline void release(_Writer w):
    """Give the shared writer back, dropping a buffer a huge header grew."""
    global _shared
    w.busy = False
    if w is _shared and w.cap > 65536:
        _shared = _Writer(4096)


cdef bytes finish(_Writer w, int stype, Py_ssize_t body_len):
    """Fill the 8-byte prefix reserved at the start of ``w`` and return the frame head."""
    cdef Py_ssize_t hlen = w.n - 8
    if hlen > 0xFFFFFF or 4 + hlen + body_len > 2147483647:
        raise RemotingCommandError()(f"header of {hlen} bytes is too long")
    wr32(w.data, <uint32_t>(4 + hlen + body_len))
    wr32(w.data + 4, (<uint32_t>stype << 24) | <uint32_t>hlen)
    return PyBytes_FromStringAndSize(<char*>w.data, w.n)


cdef bytes encode_json(int32_t code, object language, int32_t version, int32_t opaque,
                       int32_t flag, object remark, object ext_fields, Py_ssize_t body_len):
    cdef _Writer w = writer()
    try:
        return _encode_json(w, code, language, version, opaque, flag, remark, ext_fields,
                            body_len)
    finally:
        release(w)


cdef bytes _encode_json(_Writer w, int32_t code, object language, int32_t version,
                        int32_t opaque, int32_t flag, object remark, object ext_fields,
                        Py_ssize_t body_len):
    cdef dict ext
    cdef bint first = True
    cdef long lang = language
    w.n = 8
    w.put(b'{"code":', 8)
    w.put_int(code)
    if ext_fields is not None:
        ext = string_ext(<dict?>ext_fields)
        w.put(b',"extFields":{', 14)
        for k, v in ext.items():
            if not first:
                w.put(b",", 1)
            first = False
            w.put_json_string(k)
            w.put(b":", 1)
            w.put_json_string(v)
        w.put(b"}", 1)
    w.put(b',"flag":', 8)
    w.put_int(flag)
    w.put(b',"language":', 12)
    w.put_json_string(LANGUAGE_NAMES[lang] if 0 <= lang < N_LANGUAGES else "OTHER")
    w.put(b',"opaque":', 10)
    w.put_int(opaque)
    if remark is not None:
        w.put(b',"remark":', 10)
        w.put_json_string(remark)
    w.put(b',"serializeTypeCurrentRPC":"JSON","version":', 44)
    w.put_int(version)
    w.put(b"}", 1)
    return finish(w, 0, body_len)


cdef bytes encode_rocketmq(int32_t code, object language, int32_t version, int32_t opaque,
                           int32_t flag, object remark, object ext_fields, Py_ssize_t body_len):
    cdef _Writer w = writer()
    try:
        return _encode_rocketmq(w, code, language, version, opaque, flag, remark, ext_fields,
                                body_len)
    finally:
        release(w)


cdef bytes _encode_rocketmq(_Writer w, int32_t code, object language, int32_t version,
                            int32_t opaque, int32_t flag, object remark, object ext_fields,
                            Py_ssize_t body_len):
    cdef Py_ssize_t rn = 0, kn, vn, ext_at
    cdef const char* rp = NULL
    cdef const char* kp
    cdef const char* vp
    cdef long lang = language
    if remark:
        rp = PyUnicode_AsUTF8AndSize(remark, &rn)
    w.reserve(8 + FIXED_SIZE + rn + 4)
    cdef uint8_t* p = w.data + 8
    wr16(p, <uint32_t>code & 0xFFFF)
    p[2] = <uint8_t>(lang & 0xFF)
    wr16(p + 3, <uint32_t>version & 0xFFFF)
    wr32(p + 5, <uint32_t>opaque)
    wr32(p + 9, <uint32_t>flag)
    wr32(p + 13, <uint32_t>rn)
    w.n = 8 + FIXED_SIZE
    if rn:
        w.put(rp, rn)
    ext_at = w.n
    w.n += 4
    if ext_fields:
        for k, v in (<dict?>ext_fields).items():
            if v is None:
                continue
            if type(v) is not str:
                v = stringify(v)
            kp = PyUnicode_AsUTF8AndSize(k, &kn)
            if kn > 32767:
                raise RemotingCommandError()(f"extFields key of {kn} bytes is too long")
            vp = PyUnicode_AsUTF8AndSize(v, &vn)
            w.reserve(6 + kn + vn)
            wr16(w.data + w.n, <uint32_t>kn)
            memcpy(w.data + w.n + 2, kp, kn)
            w.n += 2 + kn
            wr32(w.data + w.n, <uint32_t>vn)
            memcpy(w.data + w.n + 4, vp, vn)
            w.n += 4 + vn
    wr32(w.data + ext_at, <uint32_t>(w.n - ext_at - 4))
    return finish(w, 1, body_len)


def encode(code, language, version, opaque, flag, remark, ext_fields, serialize_type,
           Py_ssize_t body_len):
    """Length prefix, header-length word and header of one frame."""
    check_int32("code", code)
    check_int32("version", version)
    check_int32("opaque", opaque)
    check_int32("flag", flag)
    if remark is not None and type(remark) is not str:
        remark = stringify(remark)
    if serialize_type == 0:
        return encode_json(code, language, version, opaque, flag, remark, ext_fields, body_len)
    if serialize_type == 1:
        return encode_rocketmq(code, language, version, opaque, flag, remark, ext_fields,
                               body_len)
    raise RemotingCommandError()(f"unknown serialize type {serialize_type}")


# ---------------------------------------------------------------------------
# decode

cdef object json_int(dict obj, str key, object default):
    cdef object value = obj.get(key)
    if value is None:
        return default
    if type(value) is int:
        if -2147483648 <= value <= 2147483647:
            return value
    elif type(value) is str:
        try:
            return int(value)
        except ValueError:
            pass
    raise RemotingCommandError()(f"bad {key} in JSON header: {value!r}")


cdef object json_language(object value):
    if value is None:
        return 0
    if type(value) is str:
        return LANGUAGE_BY_NAME.get(value, LANGUAGE_OTHER)
    if type(value) is int:
        return value if 0 <= value < N_LANGUAGES else LANGUAGE_OTHER
    raise RemotingCommandError()(f"bad language in JSON header: {value!r}")



# ---------------------------------------------------------------------------
# JSON header fast path
#
# A strict subset of JSON -- the shape every known client sends: one object,
# plain keys, string / integer / true / false / null values, extFields one
# level deep, the usual string escapes.  Anything else (floats, arrays, nested
# objects under unknown keys, values of an unexpected type, out-of-range
# numbers, invalid UTF-8, surrogate escapes, trailing bytes) returns None and
# the caller falls back to orjson + the same checks as the twin, so both
# paths give identical results by construction.

cdef enum:
    J_FAIL = -1
    J_STR = 1
    J_INT = 2
    J_TRUE = 3
    J_FALSE = 4
    J_NULL = 5


cdef struct JCur:
    const uint8_t* p
    const uint8_t* end
    const uint8_t* s       # last string token (raw, between the quotes)
    Py_ssize_t slen
    bint sesc              # the string token contains escapes
    int64_t ival           # last integer token


cdef inline void jws(JCur* c) noexcept nogil:
    while c.p < c.end and (c.p[0] == 32 or c.p[0] == 10 or c.p[0] == 13 or c.p[0] == 9):
        c.p += 1


cdef int jstring(JCur* c) noexcept nogil:
    """At an opening quote: record the raw string, J_STR or J_FAIL."""
    cdef const uint8_t* q = c.p + 1
    cdef uint8_t ch
    c.sesc = False
    while q < c.end:
        ch = q[0]
        if ch == 34:
            c.s = c.p + 1
            c.slen = q - c.s
            c.p = q + 1
            return J_STR
        if ch < 0x20:
            return J_FAIL
        if ch == 92:
            c.sesc = True
            q += 2
            continue
        q += 1
    return J_FAIL


cdef int jvalue(JCur* c) noexcept nogil:
    """One scalar value token; objects/arrays/floats give J_FAIL."""
    cdef const uint8_t* q
    cdef bint neg = False
    cdef int digits = 0
    cdef int64_t v = 0
    if c.p >= c.end:
        return J_FAIL
    cdef uint8_t ch = c.p[0]
    if ch == 34:
        return jstring(c)
    if ch == 116 and c.end - c.p >= 4 and memcmp(c.p, b"true", 4) == 0:
        c.p += 4
        return J_TRUE
    if ch == 102 and c.end - c.p >= 5 and memcmp(c.p, b"false", 5) == 0:
        c.p += 5
        return J_FALSE
    if ch == 110 and c.end - c.p >= 4 and memcmp(c.p, b"null", 4) == 0:
        c.p += 4
        return J_NULL
    q = c.p
    if q[0] == 45:
        neg = True
        q += 1
    while q < c.end and 48 <= q[0] <= 57:
        v = v * 10 + (q[0] - 48)
        digits += 1
        q += 1
    if digits == 0 or digits > 18:
        return J_FAIL
    if digits > 1 and (q - digits)[0] == 48:  # leading zero: not JSON
        return J_FAIL
    if neg and v == 0:  # -0: let orjson decide
        return J_FAIL
    if q < c.end and (q[0] == 46 or q[0] == 101 or q[0] == 69):  # . e E: a float
        return J_FAIL
    c.ival = -v if neg else v
    c.p = q
    return J_INT


cdef object jtext(JCur* c):
    """The last string token as str, or None when it cannot be decoded here."""
    cdef const uint8_t* q
    cdef const uint8_t* e
    cdef uint8_t* buf
    cdef uint8_t* o
    cdef uint32_t cp
    cdef int i
    cdef uint8_t h
    if not c.sesc:
        try:
            return PyUnicode_DecodeUTF8(<const char*>c.s, c.slen, NULL)
        except UnicodeDecodeError:
            return None
    buf = <uint8_t*>PyMem_Malloc(c.slen + 1)
    if buf == NULL:
        raise MemoryError()
    try:
        q = c.s
        e = c.s + c.slen
        o = buf
        while q < e:
            if q[0] != 92:
                o[0] = q[0]
                o += 1
                q += 1
                continue
            if q + 1 >= e:
                return None
            h = q[1]
            q += 2
            if h == 34 or h == 92 or h == 47:
                o[0] = h
            elif h == 98:
                o[0] = 8
            elif h == 102:
                o[0] = 12
            elif h == 110:
                o[0] = 10
            elif h == 114:
                o[0] = 13
            elif h == 116:
                o[0] = 9
            elif h == 117:
                if e - q < 4:
                    return None
                cp = 0
                for i in range(4):
                    h = q[i]
                    if 48 <= h <= 57:
                        cp = cp * 16 + (h - 48)
                    elif 97 <= h <= 102:
                        cp = cp * 16 + (h - 87)
                    elif 65 <= h <= 70:
                        cp = cp * 16 + (h - 55)
                    else:
                        return None
                q += 4
                if 0xD800 <= cp <= 0xDFFF:
                    return None
                if cp < 0x80:
                    o[0] = <uint8_t>cp
                elif cp < 0x800:
                    o[0] = <uint8_t>(0xC0 | (cp >> 6))
                    o[1] = <uint8_t>(0x80 | (cp & 0x3F))
                    o += 1
                else:
                    o[0] = <uint8_t>(0xE0 | (cp >> 12))
                    o[1] = <uint8_t>(0x80 | ((cp >> 6) & 0x3F))
                    o[2] = <uint8_t>(0x80 | (cp & 0x3F))
                    o += 2
            else:
                return None
            o += 1
        try:
            return PyUnicode_DecodeUTF8(<const char*>buf, o - buf, NULL)
        except UnicodeDecodeError:
            return None
    finally:
        PyMem_Free(buf)


cdef inline bint jkey(JCur* c, const char* name, Py_ssize_t n) noexcept nogil:
    return not c.sesc and c.slen == n and memcmp(c.s, name, n) == 0


cdef object jscalar_text(JCur* c, int kind):
    """An extFields value as the twin stringifies it (None: skip, or fail)."""
    if kind == J_STR:
        return jtext(c)
    if kind == J_INT:
        return str(c.ival)
    if kind == J_TRUE:
        return "true"
    if kind == J_FALSE:
        return "false"
    return None


cdef object jext(JCur* c):
    """extFields object -> dict, or None to fall back."""
    cdef dict ext = {}
    cdef int kind
    c.p += 1
    jws(c)
    if c.p < c.end and c.p[0] == 125:
        c.p += 1
        return ext
    while True:
        jws(c)
        if c.p >= c.end or c.p[0] != 34 or jstring(c) != J_STR:
            return None
        key = jtext(c)
        if key is None:
            return None
        jws(c)
        if c.p >= c.end or c.p[0] != 58:
            return None
        c.p += 1
        jws(c)
        kind = jvalue(c)
        if kind == J_FAIL:
            return None
        if kind != J_NULL:
            val = jscalar_text(c, kind)
            if val is None:
                return None
            ext[key] = val
        jws(c)
        if c.p >= c.end:
            return None
        if c.p[0] == 44:
            c.p += 1
            continue
        if c.p[0] == 125:
            c.p += 1
            return ext
        return None


cdef object fast_json(const uint8_t* data, Py_ssize_t n):
    """The seven header values, or None to fall back to orjson."""
    cdef JCur c
    cdef int kind
    cdef int64_t code = 0, version = 0, opaque = 0, flag = 0
    cdef int64_t* target
    c.p = data
    c.end = data + n
    language = 0
    remark = None
    ext = None
    jws(&c)
    if c.p >= c.end or c.p[0] != 123:
        return None
    c.p += 1
    jws(&c)
    if c.p < c.end and c.p[0] == 125:
        c.p += 1
    else:
        while True:
            jws(&c)
            if c.p >= c.end or c.p[0] != 34 or jstring(&c) != J_STR:
                return None
            target = NULL
            if jkey(&c, "code", 4):
                target = &code
            elif jkey(&c, "flag", 4):
                target = &flag
            elif jkey(&c, "opaque", 6):
                target = &opaque
            elif jkey(&c, "version", 7):
                target = &version
            is_ext = jkey(&c, "extFields", 9)
            is_lang = jkey(&c, "language", 8)
            is_remark = jkey(&c, "remark", 6)
            if c.sesc:
                return None
            known = target != NULL or is_ext or is_lang or is_remark
            if not known and jtext(&c) is None:  # orjson would reject the key
                return None
            jws(&c)
            if c.p >= c.end or c.p[0] != 58:
                return None
            c.p += 1
            jws(&c)
            if is_ext:
                if c.p < c.end and c.p[0] == 123:
                    ext = jext(&c)
                    if ext is None:
                        return None
                elif jvalue(&c) == J_NULL:
                    ext = None
                else:
                    return None
            else:
                kind = jvalue(&c)
                if kind == J_FAIL:
                    return None
                if target != NULL:
                    if kind == J_NULL:
                        target[0] = 0
                    elif kind != J_INT or not -2147483648 <= c.ival <= 2147483647:
                        return None
                    else:
                        target[0] = c.ival
                elif is_lang:
                    if kind == J_STR:
                        name = jtext(&c)
                        if name is None:
                            return None
                        language = LANGUAGE_BY_NAME.get(name, LANGUAGE_OTHER)
                    elif kind == J_INT:
                        language = c.ival if 0 <= c.ival < N_LANGUAGES else LANGUAGE_OTHER
                    elif kind == J_NULL:
                        language = 0
                    else:
                        return None
                elif is_remark:
                    if kind == J_NULL:
                        remark = None
                    else:
                        remark = jscalar_text(&c, kind)
                        if remark is None:
                            return None
                elif kind == J_STR and jtext(&c) is None:  # ignored, but must be valid
                    return None
            jws(&c)
            if c.p >= c.end:
                return None
            if c.p[0] == 44:
                c.p += 1
                continue
            if c.p[0] == 125:
                c.p += 1
                break
            return None
    jws(&c)
    if c.p != c.end:
        return None
    return code, language, version, opaque, flag, remark, ext

cdef tuple decode_json(object raw):
    """orjson and the twin's checks: the path for headers fast_json declines."""
    try:
        obj = orjson.loads(raw)
    except orjson.JSONDecodeError as e:
        raise RemotingCommandError()(f"bad JSON header: {e}") from None
    if type(obj) is not dict:
        raise RemotingCommandError()("JSON header is not an object")
    cdef dict d = <dict>obj
    remark = d.get("remark")
    if remark is not None and type(remark) is not str:
        remark = stringify(remark)
    ext = d.get("extFields")
    if ext is not None:
        if type(ext) is not dict:
            raise RemotingCommandError()("extFields is not an object")
        ext = string_ext(<dict>ext)
    return (json_int(d, "code", 0), json_language(d.get("language")),
            json_int(d, "version", 0), json_int(d, "opaque", 0),
            json_int(d, "flag", 0), remark, ext)


cdef tuple decode_rocketmq(const uint8_t* h, Py_ssize_t hlen):
    cdef Py_ssize_t p, end
    cdef int32_t rlen, elen, vlen
    cdef int16_t klen
    cdef int language
    if hlen < FIXED_SIZE + 4:
        raise RemotingCommandError()(f"ROCKETMQ header too short: {hlen}")
    cdef int16_t code = <int16_t>((h[0] << 8) | h[1])
    language = h[2]
    cdef int16_t version = <int16_t>((h[3] << 8) | h[4])
    cdef int32_t opaque = <int32_t>rd32(h + 5)
    cdef int32_t flag = <int32_t>rd32(h + 9)
    rlen = <int32_t>rd32(h + 13)
    p = FIXED_SIZE
    if rlen < 0 or p + rlen + 4 > hlen:
        raise RemotingCommandError()(f"bad remark length {rlen}")
    remark = text(h + p, rlen) if rlen else None
    p += rlen
    elen = <int32_t>rd32(h + p)
    p += 4
    if elen < 0 or p + elen > hlen:
        raise RemotingCommandError()(f"bad extFields length {elen}")
    ext = None
    if elen:
        ext = {}
        end = p + elen
        while p < end:
            if p + 2 > end:
                raise RemotingCommandError()("truncated extFields key length")
            klen = <int16_t>((h[p] << 8) | h[p + 1])
            p += 2
            if klen < 0 or p + klen + 4 > end:
                raise RemotingCommandError()(f"bad extFields key length {klen}")
            key = text(h + p, klen)
            p += klen
            vlen = <int32_t>rd32(h + p)
            p += 4
            if vlen < 0 or p + vlen > end:
                raise RemotingCommandError()(f"bad extFields value length {vlen}")
            if klen and vlen:
                ext[key] = text(h + p, vlen)
            p += vlen
    if language >= N_LANGUAGES:
        language = LANGUAGE_OTHER
    return code, language, version, opaque, flag, remark, ext


cdef tuple decode_header(object buf, Py_ssize_t base, const uint8_t* f, Py_ssize_t n):
    """The seven header values and (serialize type, body offset) of the frame
    at ``f`` (= ``buf`` + ``base``)."""
    if n < 4:
        raise RemotingCommandError()(f"frame too short: {n} bytes")
    cdef uint32_t mark = rd32(f)
    cdef int stype = mark >> 24
    cdef Py_ssize_t hlen = mark & 0xFFFFFF
    if hlen > n - 4:
        raise RemotingCommandError()(f"header length {hlen} exceeds frame length {n}")
    if stype == 0:
        fields = fast_json(f + 4, hlen)
        if fields is None:
            fields = decode_json(memoryview(buf)[base + 4:base + 4 + hlen])
    elif stype == 1:
        fields = decode_rocketmq(f + 4, hlen)
    else:
        raise RemotingCommandError()(f"unknown serialize type {stype}")
    return fields, stype, 4 + hlen


def decode(frame):
    """Decode the header of one frame (the bytes after the length prefix)."""
    cdef Py_buffer view
    PyObject_GetBuffer(frame, &view, PyBUF_SIMPLE)
    try:
        fields, stype, off = decode_header(frame, 0, <const uint8_t*>view.buf, view.len)
    finally:
        PyBuffer_Release(&view)
    return (*fields, stype, off)


cdef inline Py_ssize_t length_at(const uint8_t* b, Py_ssize_t pos, Py_ssize_t end,
                                 Py_ssize_t max_frame) except -2:
    if end - pos < 4:
        return -1
    cdef int32_t length = <int32_t>rd32(b + pos)
    if length < 4 or length > max_frame:
        raise RemotingCommandError()(f"frame length {length} out of range [4, {max_frame}]")
    if end - pos - 4 < length:
        return -1
    return length


def frame_length(buf, Py_ssize_t pos, Py_ssize_t end, Py_ssize_t max_frame):
    """L of the complete frame at ``pos``, or -1 while it is incomplete."""
    cdef Py_buffer view
    PyObject_GetBuffer(buf, &view, PyBUF_SIMPLE)
    try:
        if pos < 0 or end > view.len or pos > end:
            raise ValueError("pos/end outside the buffer")
        return length_at(<const uint8_t*>view.buf, pos, end, max_frame)
    finally:
        PyBuffer_Release(&view)


def decode_frames(buf, Py_ssize_t pos, Py_ssize_t end, Py_ssize_t max_frame):
    """Decode every complete frame in ``buf[pos:end]``: ``(frames, pos, error)``
    exactly as ``rmq.remoting.codec.py_decode_frames``."""
    cdef Py_buffer view
    cdef list frames = []
    cdef Py_ssize_t length, off
    cdef const uint8_t* b
    PyObject_GetBuffer(buf, &view, PyBUF_SIMPLE)
    try:
        if pos < 0 or end > view.len or pos > end:
            raise ValueError("pos/end outside the buffer")
        b = <const uint8_t*>view.buf
        try:
            while True:
                length = length_at(b, pos, end, max_frame)
                if length < 0:
                    break
                fields, stype, off = decode_header(buf, pos + 4, b + pos + 4, length)
                body = (PyBytes_FromStringAndSize(<const char*>b + pos + 4 + off, length - off)
                        if off < length else None)
                frames.append((*fields, body, stype))
                pos += 4 + length
        except Exception as e:
            if isinstance(e, RemotingCommandError()):
                return frames, pos, e
            raise
        return frames, pos, None
    finally:
        PyBuffer_Release(&view)
