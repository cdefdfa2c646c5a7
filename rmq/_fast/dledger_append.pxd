# cython: language_level=3
# A DLedger leader's plain sends of one read stored in one call
# (dledger_append.pyx), cimported by the send lane's ``store_read``
# (send_lane.pyx), which reads them, counts and answers what it stored.

from cpython.object cimport PyObject
from libc.stdint cimport int32_t, int64_t, uint8_t


cdef struct Put:
    # what a stored send's answer and statistics need
    int64_t phy        # the record's physical offset
    int64_t qoff       # its queue offset
    Py_ssize_t size    # the record's size


cdef struct Plain:
    # a plain send as the leader's lane reads it (``SendLane.store_read``),
    # its bytes borrowed: the topic's from the lane's topic (held for the
    # read), the body in the read's buffer, the stored properties in the
    # read's own buffer
    PyObject* topic        # str
    PyObject* topic_b      # its bytes
    const uint8_t* body
    Py_ssize_t body_len
    const uint8_t* props
    Py_ssize_t props_len
    int32_t qid, mflag, sys_flag, reconsume  # sysFlag without the host bits
    int64_t born_ts
    Py_ssize_t nkeys       # its index keys
    int64_t code, flag, opaque  # the request's
    int stype              # its serialization (the answer's)
    Py_ssize_t frame_end


cdef list c_append_plain(cl, const Plain* sends, Py_ssize_t n, int32_t host_bits, bytes born,
                         int64_t now, Put* puts)
