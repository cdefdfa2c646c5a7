# cython: language_level=3, boundscheck=False, wraparound=False
"""Base64 of DLedger entry bodies (a push carries each body in base64).

``encode(data)`` is ``binascii.b2a_base64(data, newline=False)`` and
``decode(text)`` is ``binascii.a2b_base64(text)``: the twins in
``rmq.dledger.entry``.  CPython's decoder checks every character against
its table one call at a time (about 4 us for a 1.2 KiB body here, once per
entry on each follower); this one decodes canonical input -- a multiple of
four characters of the standard alphabet, padding only at the end -- in one
pass, and hands anything else to binascii, so odd input (whitespace, bad
padding, stray characters) is read, or refused, exactly as before.  With
AVX2, where the CPU has it (b64_fast.h), the encoder takes 24 bytes a step
(a leader encodes every body it pushes) and the decoder 32 characters a
step (each follower decodes every body it is pushed), the scalar loops
below the rest; ``path()`` / ``set_path()`` say and choose which runs.
"""

from binascii import a2b_base64

from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize
from cpython.unicode cimport PyUnicode_GET_LENGTH
from libc.stdint cimport uint8_t, uint32_t
from libc.string cimport memcpy


cdef extern from "b64_fast.h" nogil:
    size_t rmq_b64_encode_bulk(const uint8_t *src, size_t n, char *dst)
    size_t rmq_b64_decode_bulk(const uint8_t *src, size_t n, uint8_t *dst)
    int rmq_b64_path()
    int rmq_b64_set_path(int path)


# the names of b64_fast.h's RMQ_B64_PATH_* values, by value
_PATHS = ("scalar", "avx2")


def path():
    """The path in use, encoding and decoding: "avx2" or "scalar"."""
    return _PATHS[rmq_b64_path()]


def set_path(name):
    """Encode and decode by ``name`` ("scalar" or "avx2") from now on, None: the best
    this CPU runs.  Returns the path in use; ValueError when this CPU cannot
    run it."""
    if name is not None and name not in _PATHS:
        raise ValueError(f"unknown base64 path {name!r}; expected one of {', '.join(_PATHS)} or None")
    code = rmq_b64_set_path(-1 if name is None else _PATHS.index(name))
    if code < 0:
        raise ValueError(f"this CPU cannot run the {name} base64 path")
    return _PATHS[code]


cdef extern from "Python.h":
    bint PyUnicode_IS_ASCII(object)
    void *PyUnicode_DATA(object)


cdef const char *ALPHABET = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
cdef uint8_t VALUE[256]
# each character's 6 bits already in place for its position in a group of
# four (SHIFTED[k][c] = VALUE[c] << 18 - 6k), a character outside the
# alphabet set in the top byte: a group is four loads and three ORs
cdef uint32_t SHIFTED[4][256]
cdef enum:
    BAD = 0xFF000000


cdef void _init_table():
    cdef int i, k
    for i in range(256):
        VALUE[i] = 255
        for k in range(4):
            SHIFTED[k][i] = BAD
    for i in range(64):
        VALUE[<uint8_t>ALPHABET[i]] = i
        for k in range(4):
            SHIFTED[k][<uint8_t>ALPHABET[i]] = <uint32_t>i << (18 - 6 * k)


_init_table()


# the two characters of each 12-bit value: a group of three bytes is two
# look-ups and two 2-byte stores, not four of each
cdef char PAIRS[4096][2]


cdef void _init_pairs():
    cdef int v
    for v in range(4096):
        PAIRS[v][0] = ALPHABET[v >> 6]
        PAIRS[v][1] = ALPHABET[v & 63]


_init_pairs()


cdef void _encode_into(const uint8_t *src, Py_ssize_t n, char *dst) noexcept nogil:
    """The base64 of ``src[:n]`` at ``dst`` (room for ``(n + 2) // 3 * 4`` bytes)."""
    cdef Py_ssize_t full = n - n % 3
    cdef Py_ssize_t i = <Py_ssize_t>rmq_b64_encode_bulk(src, <size_t>n, dst)
    cdef Py_ssize_t o = i // 3 * 4
    cdef uint32_t v
    while i < full:
        v = (<uint32_t>src[i] << 16) | (<uint32_t>src[i + 1] << 8) | src[i + 2]
        memcpy(dst + o, PAIRS[v >> 12], 2)
        memcpy(dst + o + 2, PAIRS[v & 4095], 2)
        i += 3
        o += 4
    if n - full == 1:
        v = <uint32_t>src[i] << 16
        dst[o] = ALPHABET[v >> 18]
        dst[o + 1] = ALPHABET[(v >> 12) & 63]
        dst[o + 2] = b"="
        dst[o + 3] = b"="
    elif n - full == 2:
        v = (<uint32_t>src[i] << 16) | (<uint32_t>src[i + 1] << 8)
        dst[o] = ALPHABET[v >> 18]
        dst[o + 1] = ALPHABET[(v >> 12) & 63]
        dst[o + 2] = ALPHABET[(v >> 6) & 63]
        dst[o + 3] = b"="


def encode(data):
    """``binascii.b2a_base64(data, newline=False)``."""
    cdef Py_buffer pb
    PyObject_GetBuffer(data, &pb, PyBUF_SIMPLE)
    try:
        out = PyBytes_FromStringAndSize(NULL, (pb.len + 2) // 3 * 4)
        _encode_into(<const uint8_t *>pb.buf, pb.len, PyBytes_AS_STRING(out))
        return out
    finally:
        PyBuffer_Release(&pb)


cdef object _decode(const uint8_t *src, Py_ssize_t n):
    """The bytes of canonical base64 ``src[:n]``, or None when it is not."""
    if n % 4:
        return None
    if n == 0:
        return b""
    cdef Py_ssize_t pad = 0
    if src[n - 1] == b"=":
        pad = 2 if src[n - 2] == b"=" else 1
    cdef Py_ssize_t groups = n // 4
    cdef Py_ssize_t size = groups * 3 - pad
    out = PyBytes_FromStringAndSize(NULL, size)
    cdef uint8_t *dst = <uint8_t *>PyBytes_AS_STRING(out)
    # whole AVX2 steps first (none on other CPUs); a step with a character
    # outside the alphabet is left to the loop below, which refuses it
    cdef Py_ssize_t i = <Py_ssize_t>rmq_b64_decode_bulk(src, <size_t>n, dst)
    cdef Py_ssize_t g, o = i // 4 * 3
    cdef uint32_t a, b, c, d
    for g in range(i // 4, groups - 1):
        a = SHIFTED[0][src[i]] | SHIFTED[1][src[i + 1]] | SHIFTED[2][src[i + 2]] | \
            SHIFTED[3][src[i + 3]]
        if a & BAD:
            return None
        dst[o] = <uint8_t>(a >> 16)
        dst[o + 1] = <uint8_t>(a >> 8)
        dst[o + 2] = <uint8_t>a
        i += 4
        o += 3
    a = VALUE[src[i]]
    b = VALUE[src[i + 1]]
    c = 0 if pad == 2 else VALUE[src[i + 2]]
    d = 0 if pad >= 1 else VALUE[src[i + 3]]
    if (a | b | c | d) & 0xC0:
        return None
    a = (a << 18) | (b << 12) | (c << 6) | d
    # non-zero bits under the padding: binascii decides (it ignores them)
    if (pad == 2 and a & 0xFFFF) or (pad == 1 and a & 0xFF):
        return None
    dst[o] = <uint8_t>(a >> 16)
    if pad < 2:
        dst[o + 1] = <uint8_t>(a >> 8)
    if pad < 1:
        dst[o + 2] = <uint8_t>a
    return out


def decode(text):
    """``binascii.a2b_base64(text)`` (``text`` an ASCII str or bytes)."""
    cdef Py_buffer pb
    if type(text) is str:
        if PyUnicode_IS_ASCII(text):
            out = _decode(<const uint8_t *>PyUnicode_DATA(text), PyUnicode_GET_LENGTH(text))
            if out is not None:
                return out
        return a2b_base64(text)
    PyObject_GetBuffer(text, &pb, PyBUF_SIMPLE)
    try:
        out = _decode(<const uint8_t *>pb.buf, pb.len)
    finally:
        PyBuffer_Release(&pb)
    return a2b_base64(text) if out is None else out
