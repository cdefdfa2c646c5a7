# cython: language_level=3
# The remoting header decoder (remoting_codec.pyx), cimported by the compiled
# pop lane: a frame's header read where it lies in the receive buffer.

from libc.stdint cimport uint8_t


cdef tuple decode_header(object buf, Py_ssize_t base, const uint8_t* f, Py_ssize_t n,
                         bint with_body)
