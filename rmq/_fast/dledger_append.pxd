# cython: language_level=3
# The slot offsets of a few fields of the last class met (dledger_append.pyx),
# shared with the leader's answer lane (dledger_frames.pyx).

cdef enum:
    FIELDS_MAX = 9  # the most fields a ``FieldOffsets`` keeps


cdef class FieldOffsets:
    cdef object cls
    cdef tuple names
    cdef Py_ssize_t at[FIELDS_MAX]

    cdef Py_ssize_t* of(self, object o) except NULL
