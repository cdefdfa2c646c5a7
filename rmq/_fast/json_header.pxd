# cython: language_level=3
# The JSON header writer and reader (json_header.pyx), cimported by the
# remoting codec.

from libc.stdint cimport int64_t, uint8_t

cdef enum:
    N_LANGUAGES = 13
    LANGUAGE_OTHER = 7

cdef object int_object(int64_t v)
cdef str stringify(object value)
cdef dict string_ext(dict ext)
cdef object encode_json(object code, object language, object version, object opaque,
                        object flag, object remark, object ext_fields, Py_ssize_t body_len,
                        bint stringified=*)
cdef object fast_json(const uint8_t* data, Py_ssize_t n, object tail_a, object tail_b)
