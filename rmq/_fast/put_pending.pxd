# cython: language_level=3
# BrokerStats.add_pending_put's common case in C, for the compiled listeners
# that count puts (rmq._fast.arrival, rmq._fast.lane_runs): one copy of the
# pending row's layout on this side.

from cpython.dict cimport PyDict_GetItem
from cpython.object cimport PyObject
from rmq._fast.known_hash cimport dict_get_known


cdef inline bint add_pending(dict pending_of, object key, object nums, object size,
                             object events) except -1:
    """``BrokerStats.add_pending_put`` of a queue already counted since the
    last fold (``pending_of``: its ``_put_pending``, rows [messages, puts,
    bytes]): True once added; False with nothing done for a new key or a row
    that keeps the size histogram, which the caller's ``inc_put`` counts."""
    return add_to_row(PyDict_GetItem(pending_of, key), nums, size, events)


cdef inline bint add_pending_known(dict pending_of, object key, Py_hash_t key_hash,
                                   object nums, object size, object events) except -1:
    """``add_pending`` of a key whose hash the caller keeps (``key_hash``)."""
    return add_to_row(dict_get_known(pending_of, key, key_hash), nums, size, events)


cdef inline bint add_to_row(PyObject *found, object nums, object size, object events) except -1:
    """``add_pending``'s sums into the row ``found`` (NULL: none, False)."""
    cdef list row
    if found == NULL or len(<list>found) > 3:
        return False
    row = <list>found
    row[0] += nums
    row[1] += events
    row[2] += size
    return True
