# cython: language_level=3
# The batch put's two passes (store_batch.pyx), cimported by the send lane.

from libc.stdint cimport int32_t, int64_t, uint8_t

from rmq._fast.record cimport Props

cdef enum:
    KEPT = 64  # records whose property scan the first pass keeps for the second


cdef Py_ssize_t check_wire(const uint8_t *w, Py_ssize_t n, int32_t sys_flag, Py_ssize_t tlen,
                           const uint8_t *bp, Py_ssize_t bpl, Py_ssize_t *count,
                           Py_ssize_t *keys, Props *kept) noexcept nogil

cdef void write_all(uint8_t *out, const uint8_t *w, Py_ssize_t n, int32_t queue_id,
                    int32_t sys_flag, int64_t born_ts, const uint8_t *born, Py_ssize_t born_len,
                    int64_t store_ts, const uint8_t *store, Py_ssize_t store_len,
                    int32_t reconsume, const uint8_t *topic, Py_ssize_t tlen,
                    const uint8_t *bp, Py_ssize_t bpl, int64_t first_qoff, int64_t phy,
                    uint8_t *cq, uint8_t *ix, int64_t max_slots, int64_t max_index,
                    char *ids, Py_ssize_t hex_len, int32_t *last_tags,
                    const Props *kept) noexcept nogil
