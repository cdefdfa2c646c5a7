# cython: language_level=3
# A pop's checkpoint record and an ack's record of offsets held in a C array
# (pop_revive.pyx), cimported by the compiled pop and ack pieces.

from libc.stdint cimport int64_t


cdef bint direct(object svc, str name) except -1

cdef object write_ck_arr(object svc, object qid, str topic, str cid, object queue_id,
                         object start_offset, object pop_time, object invisible,
                         const int64_t *offs, Py_ssize_t n, object broker_name,
                         bint commits)

cdef object write_ack_arr(object svc, object qid, str topic, str group, object queue_id,
                          object start_offset, object pop_time, object broker_name,
                          const int64_t *offs, Py_ssize_t n)
