# cython: language_level=3
# The single put's session (store_put.pyx), cimported by the revive writer, and
# the per-class slot offsets it keeps, which the revive writer keeps too; the
# put and reput locks as it takes them, which the send lane takes so too.

from libc.stdint cimport int64_t
from libc.string cimport memcpy


cdef long long put_one(object store, str topic, bytes topic_b, int queue_id, int flag,
                       object body, object keys, object uniq, str stored, long long tags_code,
                       int sys_flag, long long born_ts, bytes born_host, int reconsume,
                       int64_t *phy_out, Py_ssize_t *size_out) except -2

cdef object config_of(object store)

# an RLock (the store's reput lock) taken and given at its OS lock when it is
# a ``_thread.RLock`` of the layout known here (``raw_rlock``), else through
# its methods
cdef bint raw_rlock(object lock) noexcept
cdef int take_rlock(object lock, bint raw) except -1
cdef int give_rlock(object lock, bint raw) except -1


cdef class PutLocks:
    cdef object put_lock, reput_lock
    cdef object put_acquire, put_release
    cdef bint put_raw, reput_raw  # taken at their OS locks (``raw_lock``, ``raw_rlock``)


cdef int take_locks(PutLocks fx) except -1
cdef int give_locks(PutLocks fx) except -1


cdef enum:
    OFFSETS_MAX = 9  # the most fields a ``ClassOffsets`` keeps
    CLASSES_KEPT = 8  # the most classes whose offsets it keeps


cdef class ClassOffsets:
    cdef object cls
    cdef dict met  # each class met (a few): its offsets, packed
    cdef tuple names
    cdef Py_ssize_t n  # len(names)
    cdef bint with_dict  # a class whose instances may also keep a __dict__ counts
    cdef Py_ssize_t at[OFFSETS_MAX]

    cdef int find(self, object o) except -1

    cdef inline int copy(self, object o, Py_ssize_t *out) except -1:
        """The offsets of ``o``'s fields into ``out`` (as many as ``names``):
        those kept when ``o`` is of the class last met (inline: a put takes
        five), else ``find``'s."""
        if type(o) is not self.cls:
            self.find(o)
        memcpy(out, self.at, self.n * sizeof(Py_ssize_t))
        return 0
