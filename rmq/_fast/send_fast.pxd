# cython: language_level=3
# The property scan of a single send (send_fast.pyx), cimported by the send lane.

from libc.stdint cimport int32_t


cdef struct SendProps:
    int32_t tags_code    # TAGS hash (0 without)
    bint wait            # isWaitStoreMsgOK
    bint special         # DELAY or TRAN_MSG present (the general path stores those)
    Py_ssize_t keys_at   # KEYS value within the input, -1 without
    Py_ssize_t keys_len
    Py_ssize_t uniq_at   # UNIQ_KEY value within the input, -1 without
    Py_ssize_t uniq_len


cdef Py_ssize_t send_props(const char *p, Py_ssize_t n, const char *cluster, Py_ssize_t clen,
                           char *out, SendProps *r) except -2
