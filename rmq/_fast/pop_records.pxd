# cython: language_level=3
# The revive records' bodies of offsets held in a C array (pop_records.pyx),
# cimported by the compiled pop and ack pieces: a pop's or an ack's offsets go
# from the store's runs or the ack's bit map to the record's text without a
# list of Python ints.

from libc.stdint cimport int64_t


cdef bytes ck_body_arr(object broker_name, str cid, const int64_t *offs, Py_ssize_t n,
                       long long invisible_time, long long pop_time, long long queue_id,
                       long long start_offset, str topic)

cdef bytes ack_body_arr(const int64_t *offs, Py_ssize_t n, object broker_name, str group,
                        long long pop_time, long long queue_id, long long start_offset,
                        str topic)
