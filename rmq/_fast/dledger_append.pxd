# cython: language_level=3
# A DLedger leader's plain sends of one read stored in one call
# (dledger_append.pyx), cimported by the send lane's ``store_plain``
# (send_lane.pyx), which counts and answers what it stored.

from libc.stdint cimport int32_t, int64_t


cdef struct Put:
    # what a stored send's answer and statistics need
    int64_t phy        # the record's physical offset
    int64_t qoff       # its queue offset
    Py_ssize_t size    # the record's size


cdef list c_append_plain(cl, list sends, int32_t host_bits, bytes born, int64_t now,
                         Put* puts)
