# cython: language_level=3
# The kept entries' bookkeeping (dledger_push.pyx), cimported by the leader's
# compiled append (dledger_append.pyx), and a follower's push answer read in
# place, by the leader's answer lane (dledger_frames.pyx).

from libc.stdint cimport int64_t, uint8_t


cdef tuple keep_entries(dict recent, list entries, int64_t first, int64_t kept,
                        int64_t max_bytes)


cdef bint answer_fields(const uint8_t* text, Py_ssize_t size, int64_t* code_out, int64_t* term_out,
                        int64_t* index_out, bint* has_index_out) noexcept nogil
