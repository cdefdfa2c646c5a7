# cython: language_level=3
# A response frame's body copied from the records a read handed out (views of
# the commit log or bytes), shared by the pull and pop lanes' frame writers;
# inline, so neither pays a call.

from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from libc.string cimport memcpy


cdef inline Py_ssize_t copy_records(char *out, Py_ssize_t at, Py_ssize_t size,
                                    list views) except -1:
    """The records ``views`` copied to ``out + at`` (``size`` bytes in all, as
    the read said: a ValueError if they are more or fewer); the position
    past them."""
    cdef Py_buffer vb
    cdef Py_ssize_t end = at + size
    for view in views:
        PyObject_GetBuffer(view, &vb, PyBUF_SIMPLE)
        try:
            if vb.len > end - at:
                raise ValueError("the records are longer than the read said")
            memcpy(out + at, vb.buf, vb.len)
            at += vb.len
        finally:
            PyBuffer_Release(&vb)
    if at != end:
        raise ValueError("the records are shorter than the read said")
    return at
