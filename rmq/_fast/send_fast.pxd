# cython: language_level=3
# The property scan of a single send (send_fast.pyx), cimported by the send lane.

from libc.stdint cimport int32_t, int64_t


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


cdef inline bint ascii_int(const char *p, Py_ssize_t n, int64_t *out) noexcept nogil:
    """``-?[0-9]{1,18}`` in ``p[:n]`` into ``out``: the plain numbers the send
    fast paths take (anything else goes to the general header parser)."""
    cdef Py_ssize_t i = 0
    cdef bint neg = False
    cdef int64_t v = 0
    if n > 0 and p[0] == 45:  # '-'
        neg = True
        i = 1
    if n - i < 1 or n - i > 18:
        return False
    while i < n:
        if p[i] < 48 or p[i] > 57:
            return False
        v = v * 10 + (p[i] - 48)
        i += 1
    out[0] = -v if neg else v
    return True


cdef inline bint java_int(int64_t v) noexcept nogil:
    """Within Java's int range."""
    return -2147483648 <= v <= 2147483647
