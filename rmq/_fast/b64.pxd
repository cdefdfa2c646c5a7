# cython: language_level=3
from libc.stdint cimport uint8_t

cdef object _decode(const uint8_t *src, Py_ssize_t n)
cdef void _encode_into(const uint8_t *src, Py_ssize_t n, char *dst) noexcept nogil
