# cython: language_level=3
# The kept entries' bookkeeping (dledger_push.pyx), cimported by the leader's
# compiled append (dledger_append.pyx) and its commit (dledger_frames.pyx), a
# follower's push answer read in place, by the leader's answer lane
# (dledger_frames.pyx), and the monotonic clock of the push round and the
# quorum wait (dledger_frames.pyx).

from cpython.list cimport PyList_GET_ITEM, PyList_GET_SIZE
from libc.stdint cimport int64_t, uint8_t
from posix.time cimport CLOCK_MONOTONIC, clock_gettime, timespec


cdef tuple keep_entries(list recent, list entries, int64_t first, int64_t kept,
                        int64_t max_bytes)


cdef inline object kept_at(list recent, int64_t first, int64_t index):
    """The kept entry of ``index`` (``recent``: the store's kept entries, in
    index order from ``first``), None when it is not kept
    (``rmq.dledger.mmap_store.kept_entry``)."""
    cdef int64_t i = index - first
    if 0 <= i < PyList_GET_SIZE(recent):
        return <object>PyList_GET_ITEM(recent, i)
    return None


cdef bint answer_fields(const uint8_t* text, Py_ssize_t size, int64_t* code_out, int64_t* term_out,
                        int64_t* index_out, bint* has_index_out) noexcept nogil


cdef inline double monotonic() noexcept nogil:
    """``time.monotonic()`` (the same clock, the same double: its
    nanoseconds over 1e9), for the push round's times and the quorum
    wait's deadline (dledger_frames.pyx)."""
    cdef timespec ts
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return <double>(<int64_t>ts.tv_sec * 1000000000 + ts.tv_nsec) / 1e9
