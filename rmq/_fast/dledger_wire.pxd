# cython: language_level=3
# An entry's JSON object in an APPEND push (``Entry.json_bytes``), written in
# one pass into the bytes returned: ``dledger_push.entry_wire`` makes it for an
# entry pushed the first time, ``dledger_append.write_entries`` when a leader
# with followers appends (its fields and body are at hand there).

from cpython.ref cimport PyObject
from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t
from libc.string cimport memcpy

from rmq._fast.b64 cimport _encode_into
from rmq._fast.byteorder cimport get32
from rmq._fast.json_text cimport json_write_int


# (dledger_push writes its push frames with these too)
cdef extern from "Python.h":
    PyObject* new_bytes "PyBytes_FromStringAndSize"(const char* s, Py_ssize_t n)
    char* raw_bytes_at "PyBytes_AS_STRING"(PyObject* b)
    int _PyBytes_Resize(PyObject** b, Py_ssize_t n)
    object take_ref "(PyObject*)"(PyObject* o)  # the reference handed over
    ctypedef struct PyTypeObject:
        PyObject* (*tp_alloc)(PyTypeObject*, Py_ssize_t) except NULL


cdef inline object new_instance(cls):
    """An instance of the slots class ``cls`` with no slot set, from its
    type's allocator (what ``object.__new__`` would make, without the call):
    the append's entries and the push round's waits, whose slots the caller
    then fills."""
    cdef PyTypeObject* t = <PyTypeObject*><PyObject*>cls
    return take_ref(t.tp_alloc(t, 0))


cdef inline uint8_t* put(uint8_t* p, const char* s, Py_ssize_t n) noexcept nogil:
    memcpy(p, s, n)
    return p + n


cdef inline bytes wire_of(const uint8_t* body, Py_ssize_t n, int64_t body_crc, int64_t chain_crc,
                          int64_t channel, int64_t index, int64_t magic, int64_t pos,
                          int64_t size, int64_t term):
    """``{"body":base64,"bodyCrc":..,"chainCrc":..,"channel":..,"index":..,
    "magic":..,"pos":..,"size":..,"term":..}`` of a body of ``n`` bytes."""
    cdef Py_ssize_t b64n = (n + 2) // 3 * 4
    cdef PyObject* out = new_bytes(NULL, b64n + 256)
    if out == NULL:
        raise MemoryError()
    cdef uint8_t* start = <uint8_t*>raw_bytes_at(out)
    cdef uint8_t* p = put(start, b'{"body":"', 9)
    _encode_into(body, n, <char*>p)
    p = put(p + b64n, b'","bodyCrc":', 12)
    p = put(json_write_int(p, body_crc), b',"chainCrc":', 12)
    p = put(json_write_int(p, chain_crc), b',"channel":', 11)
    p = put(json_write_int(p, channel), b',"index":', 9)
    p = put(json_write_int(p, index), b',"magic":', 9)
    p = put(json_write_int(p, magic), b',"pos":', 7)
    p = put(json_write_int(p, pos), b',"size":', 8)
    p = put(json_write_int(p, size), b',"term":', 8)
    p = put(json_write_int(p, term), b'}', 1)
    if _PyBytes_Resize(&out, p - start) < 0:  # (out freed and NULL then)
        raise MemoryError()
    return take_ref(out)


cdef inline bint json_frame(const uint8_t* base, Py_ssize_t pos, Py_ssize_t end,
                            Py_ssize_t max_frame, const uint8_t** head,
                            const uint8_t** head_end, Py_ssize_t* frame_end) noexcept nogil:
    """Whether ``base[pos:end]`` starts with a whole remoting frame no longer
    than ``max_frame`` whose header is JSON (a push or its answer): its
    header from ``head`` to ``head_end``, the frame's end in ``frame_end``."""
    cdef int64_t length, hlen
    if pos < 0 or end - pos < 8:
        return False
    length = <int32_t>get32(base + pos)
    if length < 4 or length > max_frame or end - pos - 4 < length:
        return False
    hlen = <uint32_t>get32(base + pos + 4)
    if hlen >> 24 or hlen > length - 4:  # (the top byte: a serialize type other than JSON)
        return False
    head[0] = base + pos + 8
    head_end[0] = head[0] + hlen
    frame_end[0] = pos + 4 + length
    return True
