# cython: language_level=3
# The kept entries' bookkeeping (dledger_push.pyx), cimported by the leader's
# compiled append (dledger_append.pyx).

from libc.stdint cimport int64_t


cdef tuple keep_entries(dict recent, list entries, int64_t first, int64_t kept,
                        int64_t max_bytes)
