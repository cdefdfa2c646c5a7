# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Compiled frame and header codec of the remoting protocol.

Same functions, signatures and bytes as the pure-Python twin in
``rmq/remoting/codec.py`` (the frame and both header layouts are described at
the top of that module).  Every length read from the network is checked
against the buffer once before any byte behind it is touched.

JSON headers are written and read by hand in ``json_header.pyx``; whatever
it leaves alone goes to orjson and the twin's steps written again here
(``decode_json``, ``encode_json_orjson``), so results and errors are the twin's.
"""

from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytes cimport PyBytes_FromStringAndSize
from cpython.ref cimport PyObject
from cpython.unicode cimport PyUnicode_DecodeUTF8
from libc.stdint cimport int16_t, int32_t, uint8_t, uint32_t
from libc.string cimport memcpy
from rmq._fast.byteorder cimport get16, get32, put16, put32

from rmq._fast.json_header cimport (
    LANGUAGE_OTHER,
    N_LANGUAGES,
    encode_json,
    fast_json,
    int_object,
    string_ext,
    stringify,
)

import struct

import orjson

from rmq.common.java import LANGUAGE_NAMES as _LANGUAGE_NAMES
from rmq.common.exceptions import RemotingCommandError


cdef extern from "Python.h":
    const char* PyUnicode_AsUTF8AndSize(object s, Py_ssize_t* size) except NULL
    bint bytes_exact "PyBytes_CheckExact"(PyObject* o)
    char* bytes_data "PyBytes_AS_STRING"(PyObject* o)
    Py_ssize_t bytes_size "PyBytes_GET_SIZE"(PyObject* o)


cdef tuple LANGUAGE_NAMES = _LANGUAGE_NAMES
cdef dict LANGUAGE_BY_NAME = {name: code for code, name in enumerate(LANGUAGE_NAMES)}
cdef int FIXED_SIZE = 17


# ---------------------------------------------------------------------------
# helpers shared by both serializations

cdef inline int check_int32(str name, object value) except -1:
    if not -2147483648 <= value <= 2147483647:
        raise RemotingCommandError(f"{name} {value} is not an int32")
    return 0


cdef str text(const uint8_t* p, Py_ssize_t n):
    try:
        return PyUnicode_DecodeUTF8(<const char*>p, n, NULL)
    except UnicodeDecodeError as e:
        raise RemotingCommandError(f"bad UTF-8 in header: {e}") from None


# ---------------------------------------------------------------------------
# a growable output buffer for the ROCKETMQ writer (stringify may run Python
# code in the middle of a header, so each header owns its buffer)

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
        raise RemotingCommandError(f"header of {hlen} bytes is too long")
    put32(w.data, <uint32_t>(4 + hlen + body_len))
    put32(w.data + 4, (<uint32_t>stype << 24) | <uint32_t>hlen)
    return PyBytes_FromStringAndSize(<char*>w.data, w.n)


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
    put16(p, <uint32_t>code & 0xFFFF)
    p[2] = <uint8_t>(lang & 0xFF)
    put16(p + 3, <uint32_t>version & 0xFFFF)
    put32(p + 5, <uint32_t>opaque)
    put32(p + 9, <uint32_t>flag)
    put32(p + 13, <uint32_t>rn)
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
                raise RemotingCommandError(f"extFields key of {kn} bytes is too long")
            vp = PyUnicode_AsUTF8AndSize(v, &vn)
            w.reserve(6 + kn + vn)
            put16(w.data + w.n, <uint32_t>kn)
            memcpy(w.data + w.n + 2, kp, kn)
            w.n += 2 + kn
            put32(w.data + w.n, <uint32_t>vn)
            memcpy(w.data + w.n + 4, vp, vn)
            w.n += 4 + vn
    put32(w.data + ext_at, <uint32_t>(w.n - ext_at - 4))
    return finish(w, 1, body_len)

cdef object _PREFIX = struct.Struct(">ii")


cdef object any_string_ext(object ext_fields):
    """The twin's ``_string_ext`` for any mapping (``string_ext`` takes dicts)."""
    for v in ext_fields.values():
        if type(v) is not str:
            break
    else:
        return ext_fields
    return {k: v if type(v) is str else stringify(v)
            for k, v in ext_fields.items() if v is not None}


cdef bytes encode_json_orjson(code, language, version, opaque, flag, remark, ext_fields,
                              serialize_type, Py_ssize_t body_len):
    """The twin's JSON steps (``py_encode``, orjson) for the arguments
    ``encode_json`` leaves alone: the same checks in the same order, the same
    dict, so the same bytes and errors."""
    check_int32("code", code)
    check_int32("version", version)
    check_int32("opaque", opaque)
    check_int32("flag", flag)
    if remark is not None and type(remark) is not str:
        remark = stringify(remark)
    obj = {"code": code}
    if ext_fields is not None:
        obj["extFields"] = any_string_ext(ext_fields)
    obj["flag"] = flag
    obj["language"] = (_LANGUAGE_NAMES[language] if 0 <= language < len(_LANGUAGE_NAMES)
                       else "OTHER")
    obj["opaque"] = opaque
    if remark is not None:
        obj["remark"] = remark
    obj["serializeTypeCurrentRPC"] = "JSON"
    obj["version"] = version
    header = orjson.dumps(obj)
    hlen = len(header)
    if hlen > 0xFFFFFF or 4 + hlen + body_len > 2147483647:
        raise RemotingCommandError(f"header of {hlen} bytes is too long")
    return _PREFIX.pack(4 + hlen + body_len, (serialize_type << 24) | hlen) + header


def encode(code, language, version, opaque, flag, remark, ext_fields, serialize_type,
           Py_ssize_t body_len):
    """Length prefix, header-length word and header of one frame."""
    if serialize_type == 0:
        head = encode_json(code, language, version, opaque, flag, remark, ext_fields, body_len)
        if head is None:
            return encode_json_orjson(code, language, version, opaque, flag, remark, ext_fields,
                                      serialize_type, body_len)
        return head
    check_int32("code", code)
    check_int32("version", version)
    check_int32("opaque", opaque)
    check_int32("flag", flag)
    if remark is not None and type(remark) is not str:
        remark = stringify(remark)
    if serialize_type == 1:
        return encode_rocketmq(code, language, version, opaque, flag, remark, ext_fields,
                               body_len)
    raise RemotingCommandError(f"unknown serialize type {serialize_type}")

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
    raise RemotingCommandError(f"bad {key} in JSON header: {value!r}")


cdef object json_language(object value):
    if value is None:
        return 0
    if type(value) is str:
        return LANGUAGE_BY_NAME.get(value, LANGUAGE_OTHER)
    if type(value) is int:
        return value if 0 <= value < N_LANGUAGES else LANGUAGE_OTHER
    raise RemotingCommandError(f"bad language in JSON header: {value!r}")

cdef tuple decode_json(object raw):
    """orjson and the twin's checks: the path for headers fast_json declines."""
    try:
        obj = orjson.loads(raw)
    except orjson.JSONDecodeError as e:
        raise RemotingCommandError(f"bad JSON header: {e}") from None
    if type(obj) is not dict:
        raise RemotingCommandError("JSON header is not an object")
    cdef dict d = <dict>obj
    remark = d.get("remark")
    if remark is not None and type(remark) is not str:
        remark = stringify(remark)
    ext = d.get("extFields")
    if ext is not None:
        if type(ext) is not dict:
            raise RemotingCommandError("extFields is not an object")
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
        raise RemotingCommandError(f"ROCKETMQ header too short: {hlen}")
    cdef int16_t code = get16(h)
    language = h[2]
    cdef int16_t version = get16(h + 3)
    cdef int32_t opaque = get32(h + 5)
    cdef int32_t flag = get32(h + 9)
    rlen = get32(h + 13)
    p = FIXED_SIZE
    if rlen < 0 or p + rlen + 4 > hlen:
        raise RemotingCommandError(f"bad remark length {rlen}")
    remark = text(h + p, rlen) if rlen else None
    p += rlen
    elen = get32(h + p)
    p += 4
    if elen < 0 or p + elen > hlen:
        raise RemotingCommandError(f"bad extFields length {elen}")
    ext = None
    if elen:
        ext = {}
        end = p + elen
        while p < end:
            if p + 2 > end:
                raise RemotingCommandError("truncated extFields key length")
            klen = get16(h + p)
            p += 2
            if klen < 0 or p + klen + 4 > end:
                raise RemotingCommandError(f"bad extFields key length {klen}")
            key = text(h + p, klen)
            p += klen
            vlen = get32(h + p)
            p += 4
            if vlen < 0 or p + vlen > end:
                raise RemotingCommandError(f"bad extFields value length {vlen}")
            if klen and vlen:
                ext[key] = text(h + p, vlen)
            p += vlen
    if language >= N_LANGUAGES:
        language = LANGUAGE_OTHER
    return code, language, version, opaque, flag, remark, ext


cdef tuple decode_header(object buf, Py_ssize_t base, const uint8_t* f, Py_ssize_t n,
                         bint with_body):
    """The frame at ``f`` (= ``buf`` + ``base``, n bytes after the length
    prefix): the seven header values, then (serialize type, body offset), or
    with ``with_body`` (body bytes or None, serialize type)."""
    if n < 4:
        raise RemotingCommandError(f"frame too short: {n} bytes")
    cdef uint32_t mark = <uint32_t>get32(f)
    cdef int stype = mark >> 24
    cdef Py_ssize_t hlen = mark & 0xFFFFFF
    if hlen > n - 4:
        raise RemotingCommandError(f"header length {hlen} exceeds frame length {n}")
    cdef Py_ssize_t off = 4 + hlen
    if with_body:
        tail_a = PyBytes_FromStringAndSize(<const char*>f + off, n - off) if off < n else None
        tail_b = stype
    else:
        tail_a = stype
        tail_b = int_object(off)
    if stype == 0:
        fields = fast_json(f + 4, hlen, tail_a, tail_b)
        if fields is not None:
            return <tuple>fields
        return decode_json(memoryview(buf)[base + 4:base + 4 + hlen]) + (tail_a, tail_b)
    if stype == 1:
        return decode_rocketmq(f + 4, hlen) + (tail_a, tail_b)
    raise RemotingCommandError(f"unknown serialize type {stype}")


def decode(frame):
    """Decode the header of one frame (the bytes after the length prefix)."""
    cdef Py_buffer view
    cdef PyObject* p = <PyObject*>frame
    if bytes_exact(p):
        return decode_header(frame, 0, <const uint8_t*>bytes_data(p), bytes_size(p), False)
    PyObject_GetBuffer(frame, &view, PyBUF_SIMPLE)
    try:
        return decode_header(frame, 0, <const uint8_t*>view.buf, view.len, False)
    finally:
        PyBuffer_Release(&view)


cdef inline Py_ssize_t length_at(const uint8_t* b, Py_ssize_t pos, Py_ssize_t end,
                                 Py_ssize_t max_frame) except -2:
    if end - pos < 4:
        return -1
    cdef int32_t length = get32(b + pos)
    if length < 4 or length > max_frame:
        raise RemotingCommandError(f"frame length {length} out of range [4, {max_frame}]")
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
    cdef Py_ssize_t length
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
                frames.append(decode_header(buf, pos + 4, b + pos + 4, length, True))
                pos += 4 + length
        except RemotingCommandError as e:
            return frames, pos, e
        return frames, pos, None
    finally:
        PyBuffer_Release(&view)
