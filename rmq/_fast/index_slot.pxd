# cython: language_level=3, cdivision=True
# One index-file slot insert (STORE_FORMAT.md 7.3) on the mapped buffer, shared
# by the index module and the bulk dispatcher, and the file's entry count, read
# by the reput walk and the send lane; inline, so none pays a call.

from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from libc.stdint cimport int32_t, int64_t, uint8_t

from rmq._fast.byteorder cimport get32, get64, put32, put64


cdef inline bint index_put(uint8_t *b, int64_t max_slots, int64_t max_index, int32_t khash, int64_t phy,
                    int64_t store_ts) noexcept nogil:
    # the insert of rmq/store/index.py (STORE_FORMAT.md 7.3); False when the file is full
    cdef int64_t begin_ts = get64(b), begin_phy = get64(b + 16)
    cdef int32_t slot_count = get32(b + 32), index_count = get32(b + 36)
    if index_count <= 0:
        index_count = 1
    if index_count >= max_index:
        return False
    cdef uint8_t *slot = b + 40 + (khash % max_slots) * 4
    cdef int32_t slot_value = get32(slot)
    if slot_value <= 0 or slot_value > index_count:
        slot_value = 0
    cdef int64_t diff = 0
    if begin_ts > 0:
        diff = store_ts - begin_ts
        # Java integer division truncates toward zero
        diff = diff / 1000 if diff >= 0 else -((-diff) / 1000)
        if diff < 0:
            diff = 0
        elif diff > 0x7FFFFFFF:
            diff = 0x7FFFFFFF
    cdef uint8_t *e = b + 40 + max_slots * 4 + <int64_t>index_count * 20
    put32(e, khash)
    put64(e + 4, phy)
    put32(e + 12, <int32_t>diff)
    put32(e + 16, slot_value)
    put32(slot, index_count)
    if index_count <= 1:
        begin_phy = phy
        begin_ts = store_ts
    if slot_value == 0:
        slot_count += 1
    put64(b, begin_ts)
    put64(b + 8, store_ts)
    put64(b + 16, begin_phy)
    put64(b + 24, phy)
    put32(b + 32, slot_count)
    put32(b + 36, index_count + 1)
    return True


cdef inline int32_t index_count(view) except? -1:
    """The entry count in the header of the index file whose buffer is
    ``view`` (its last field, at 36), read in place."""
    cdef Py_buffer hv
    cdef int32_t used = 0
    PyObject_GetBuffer(view, &hv, PyBUF_SIMPLE)
    cdef bint short = hv.len < 40
    if not short:
        used = <int32_t>get32(<const uint8_t*>hv.buf + 36)
    PyBuffer_Release(&hv)
    if short:
        raise ValueError("index file shorter than its header")
    return used
